package e2e

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// icebergSchemas are the Iceberg REST spec's schemas of the answers icehold
// added for engines (apache/iceberg open-api/rest-catalog-open-api.yaml:
// StorageCredential, LoadCredentialsResponse, the parts of LoadTableResult
// they ride in), transcribed: the e2e suite holds no copy of the whole spec.
const icebergSchemas = `
openapi: 3.0.3
info: {title: Iceberg REST answers for engines, version: "1"}
paths: {}
components:
  schemas:
    StorageCredential:
      type: object
      required: [prefix, config]
      properties:
        prefix: {type: string}
        config: {type: object, additionalProperties: {type: string}}
    LoadCredentialsResponse:
      type: object
      required: [storage-credentials]
      properties:
        storage-credentials:
          type: array
          items: {$ref: '#/components/schemas/StorageCredential'}
    LoadTableResult:
      type: object
      required: [metadata]
      properties:
        metadata-location: {type: string}
        metadata: {type: object}
        config: {type: object, additionalProperties: {type: string}}
        storage-credentials:
          type: array
          items: {$ref: '#/components/schemas/StorageCredential'}
`

func icebergSchema(t *testing.T, name string) *openapi3.Schema {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData([]byte(icebergSchemas))
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
	return doc.Components.Schemas[name].Value
}

// The answers engines get with vended credentials match the Iceberg REST
// spec's schemas: a load (LoadTableResult with storage-credentials), its
// revalidation (304, no body, the same tag), loadCredentials
// (LoadCredentialsResponse) and unregister (LoadTableResult).
func TestIcebergAnswersForEnginesMatchTheSpec(t *testing.T) {
	localOnly(t)
	embeddedAWS(t)
	name, _ := softCatalog(t, map[string]string{"vended-credentials": "allowed"})
	ns := uniq("spec")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	tables := "/v1/" + name + "/namespaces/" + ns + "/tables"
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{
		"name": "t", "schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{
			map[string]any{"id": 1, "name": "id", "type": "long", "required": false}}},
	})
	valid := func(t *testing.T, schema string, body []byte) map[string]any {
		t.Helper()
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("%s: %v: %s", schema, err, body)
		}
		if err := icebergSchema(t, schema).VisitJSON(v); err != nil {
			t.Errorf("not a %s: %v", schema, err)
		}
		return v
	}
	delegate := []string{"X-Iceberg-Access-Delegation", "vended-credentials"}

	status, h, body := callHeaders(t, "GET", tables+"/t", shared.Token, nil, delegate...)
	if status != http.StatusOK {
		t.Fatalf("load: %d %s", status, body)
	}
	if v := valid(t, "LoadTableResult", body); v["storage-credentials"] == nil {
		t.Error("the load carries no storage-credentials")
	}
	tag := h.Get("ETag")
	status, h304, body := callHeaders(t, "GET", tables+"/t", shared.Token, nil, append(delegate, "If-None-Match", tag)...)
	if status != http.StatusNotModified || len(body) != 0 || h304.Get("ETag") != tag {
		t.Errorf("revalidation: %d, %d bytes, tag %q; want 304, no body, %q", status, len(body), h304.Get("ETag"), tag)
	}
	status, body = call(t, "GET", tables+"/t/credentials", shared.Token, nil)
	if status != http.StatusOK {
		t.Fatalf("loadCredentials: %d %s", status, body)
	}
	valid(t, "LoadCredentialsResponse", body)
	status, body = call(t, "POST", tables+"/t/unregister", shared.Token, nil)
	if status != http.StatusOK {
		t.Fatalf("unregister: %d %s", status, body)
	}
	valid(t, "LoadTableResult", body)
}

// A catalog that requires vended credentials tells clients so in
// /v1/config (the header, and none of the deployment's own S3 keys) and
// hands credentials on every load, asked for or not; its duration
// property is held to STS's bounds.
func TestVendedCredentialsRequired(t *testing.T) {
	localOnly(t)
	embeddedAWS(t)
	name, _ := softCatalog(t, map[string]string{"vended-credentials": "required", "vended-credentials.duration": "PT30M"})
	var cfg struct {
		Defaults map[string]string `json:"defaults"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/config?warehouse="+name, shared.Token, nil), &cfg)
	if cfg.Defaults["header.X-Iceberg-Access-Delegation"] != "vended-credentials" || cfg.Defaults["s3.access-key-id"] != "" {
		t.Errorf("/v1/config defaults %v: want the delegation header and no static S3 keys", cfg.Defaults)
	}
	ns := uniq("required")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	tables := "/v1/" + name + "/namespaces/" + ns + "/tables"
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{
		"name": "t", "schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{
			map[string]any{"id": 1, "name": "id", "type": "long", "required": false}}},
	})
	var res struct {
		Config map[string]string   `json:"config"`
		Creds  []storageCredential `json:"storage-credentials"`
	}
	mustDecode(t, mustCall(t, 200, "GET", tables+"/t", shared.Token, nil), &res)
	if len(res.Creds) != 1 || res.Config["s3.access-key-id"] != "" {
		t.Errorf("a load without the header: credentials %v, config %v; want vended ones only", res.Creds, res.Config)
	}
	for _, bad := range []string{"PT5M", "PT13H", "soon"} {
		status, body := call(t, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": uniq("dur"), "warehouse": "s3://icehold-warehouse/" + uniq("dur"),
			"properties": map[string]string{"vended-credentials": "allowed", "vended-credentials.duration": bad}})
		if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity {
			t.Errorf("duration %s: %d %s, want a 4xx ErrorModel", bad, status, body)
		}
	}
}
