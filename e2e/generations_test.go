package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/objects"
)

// Defect: a soft drop of a table registered from a copy of a soft-deleted
// table's metadata (the same table uuid) answered 500 every time: records
// were keyed by uuid alone. Now each soft drop is a generation of its own;
// the uuid route answers 409 listing them unless a generation is named.
func TestSoftDropOfASharedUUID(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	name, _ := softCatalog(t, nil)
	ns := uniq("gens")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	tables := "/v1/" + name + "/namespaces/" + ns + "/tables"
	var orig struct {
		MetadataLocation string          `json:"metadata-location"`
		Metadata         json.RawMessage `json:"metadata"`
	}
	mustDecode(t, mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "orig", "schema": rawSchema}), &orig)
	var meta map[string]any
	mustDecode(t, orig.Metadata, &meta)
	uuid := meta["table-uuid"].(string)

	// A copy of its metadata at another location, registered: the same uuid.
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	s3c := awsconfig.S3(cfg, ep)
	src, err := objects.Parse(orig.MetadataLocation)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(src.Bucket), Key: aws.String(src.Key)})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(got.Body)
	_ = got.Body.Close()
	mustDecode(t, raw, &meta)
	copyLoc := "s3://" + src.Bucket + "/" + name + "/" + ns + "/copy"
	meta["location"] = copyLoc
	raw, _ = json.Marshal(meta)
	copyKey := name + "/" + ns + "/copy/metadata/00000-copy.metadata.json"
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(src.Bucket), Key: aws.String(copyKey), Body: bytes.NewReader(raw)}); err != nil {
		t.Fatal(err)
	}
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces/"+ns+"/register", shared.Token,
		map[string]any{"name": "copy", "metadata-location": "s3://" + src.Bucket + "/" + copyKey})

	mustCall(t, 204, "DELETE", tables+"/orig", shared.Token, nil)
	if status, body := call(t, "DELETE", tables+"/copy", shared.Token, nil); status != 204 {
		t.Fatalf("soft drop of a second table with uuid %s: %d %s", uuid, status, body)
	}
	gens := map[string]string{} // name → generation
	for _, r := range softDeleted(t, name, ns) {
		if r.TableUUID != uuid || r.Generation == "" {
			t.Errorf("record %+v: want uuid %s and a generation", r, uuid)
		}
		gens[r.Name] = r.Generation
	}
	if len(gens) != 2 || gens["orig"] == gens["copy"] {
		t.Fatalf("generations %v, want orig and copy apart", gens)
	}

	hold := "/lifecycle/v1/catalogs/" + name + "/soft-deleted-tables/" + uuid + "/legal-hold"
	status, body := call(t, "POST", hold, shared.Token, map[string]any{"enabled": true})
	if status != 409 || !strings.Contains(string(body), `"generations"`) || !strings.Contains(string(body), gens["orig"]) || !strings.Contains(string(body), gens["copy"]) {
		t.Errorf("legal hold of an ambiguous uuid: %d %s, want a 409 listing both generations", status, body)
	}
	mustCall(t, 200, "POST", hold, shared.Token, map[string]any{"enabled": true, "generation": gens["copy"]})
	for _, r := range softDeleted(t, name, ns) {
		if r.LegalHold != (r.Name == "copy") {
			t.Errorf("after holding the copy's generation: %s held %v", r.Name, r.LegalHold)
		}
	}
	if status, body := call(t, "POST", lifecycleTablePath(name, ns, "copy")+"/purge-now", shared.Token, map[string]any{}); status != 409 {
		t.Errorf("purge-now of the held generation: %d %s", status, body)
	}
	// By name the uuid is not ambiguous: the original comes back.
	mustCall(t, 200, "POST", lifecycleTablePath(name, ns, "orig")+"/undrop", shared.Token, map[string]any{"table-uuid": uuid})
	mustCall(t, 200, "GET", tables+"/orig", shared.Token, nil)
	if left := softDeleted(t, name, ns); len(left) != 1 || left[0].Name != "copy" || !left[0].LegalHold {
		t.Errorf("left after the undrop: %+v", left)
	}
}
