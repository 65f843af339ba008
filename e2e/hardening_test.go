package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/router"
)

// Defect: a table change with assert-create through /transactions/commit
// created a table with TABLE_WRITE alone.
func TestCreateThroughTransactionNeedsTableCreate(t *testing.T) {
	localOnly(t)
	f := newFixture(t, shared.Token)
	var others []authz.Privilege
	for _, p := range authz.All {
		if p != authz.TableCreate {
			others = append(others, p)
		}
	}
	writer := grantTo(t, shared.Token, shared.Catalog, others)
	body := map[string]any{"table-changes": []any{map[string]any{
		"identifier": map[string]any{"namespace": []string{f.ns}, "name": "sneaky"}, "requirements": assertCreate, "updates": createUpdates(f, "sneaky"),
	}}}
	status, out := call(t, "POST", "/v1/"+shared.Catalog+"/transactions/commit", writer, body)
	if status != 403 {
		t.Fatalf("create through a transaction without TABLE_CREATE: %d %s, want 403", status, out)
	}
	if st, _ := call(t, "GET", "/v1/"+shared.Catalog+"/namespaces/"+f.ns+"/tables/sneaky", shared.Token, nil); st != 404 {
		t.Errorf("the refused create left a table: %d", st)
	}
	// The same request with TABLE_CREATE too creates it.
	creator := grantTo(t, shared.Token, shared.Catalog, []authz.Privilege{authz.TableWrite, authz.TableCreate})
	if status, out := call(t, "POST", "/v1/"+shared.Catalog+"/transactions/commit", creator, body); status != 204 {
		t.Errorf("with TABLE_CREATE: %d %s", status, out)
	}
}

// Defect: grants on "*" were merged into every catalog, and "*" took any
// privilege: whoever may create catalogs was admin of all of them.
func TestSystemScopeGrantsNothingInsideACatalog(t *testing.T) {
	localOnly(t)
	f := newFixture(t, shared.Token)
	maker := grantTo(t, shared.Token, authz.SystemCatalog, []authz.Privilege{authz.CatalogManage})
	demo := "/lifecycle/v1/catalogs/" + shared.Catalog
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/config?warehouse=" + shared.Catalog},
		{"GET", "/v1/" + shared.Catalog + "/namespaces"},
		{"GET", demo},
		{"GET", demo + "/purge-jobs"},
		{"PUT", demo + "/grants/" + principalOf(t, maker)},
		{"DELETE", "/v1/" + shared.Catalog + "/namespaces/" + f.ns + "/tables/t?purgeRequested=true"},
	} {
		var body any
		if c.method == "PUT" {
			body = map[string]any{"privileges": allNames()}
		}
		if status, out := call(t, c.method, c.path, maker, body); status != 403 {
			t.Errorf("CATALOG_MANAGE on * then %s %s: %d %s, want 403", c.method, c.path, status, out)
		}
	}
	// It may create catalogs, and manages the ones it creates.
	name := uniq("mine")
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", maker, map[string]any{"name": name, "warehouse": "s3://icehold-warehouse/" + name})
	mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+name, maker, nil)
	mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+name+"/grants/user:someone", maker, map[string]any{"privileges": []string{"TABLE_READ"}})
	// "*" holds only CATALOG_MANAGE.
	for _, priv := range []string{"TABLE_DROP_WITH_PURGE", "TABLE_READ", "NAMESPACE_CREATE"} {
		status, out := call(t, "PUT", "/lifecycle/v1/catalogs/*/grants/user:x", shared.Token, map[string]any{"privileges": []string{priv}})
		if status != 400 {
			t.Errorf("grant %s on *: %d %s, want 400", priv, status, out)
		}
	}
}

// apigwEvent reads a sample API Gateway event of this suite.
func apigwEvent(t *testing.T, name string, replace ...string) events.APIGatewayProxyRequest {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.NewReplacer(replace...).Replace(string(raw)))
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// Defect: API Gateway reports a role's caller as
// arn:aws:sts::<acct>:assumed-role/<role>/<session>, which the README's admin
// role ARN never matched: the deployed catalog locked everyone out.
func TestRoleARNCoversItsSessions(t *testing.T) {
	srv := localOnly(t)
	f := newFixture(t, shared.Token)
	cfg := srv.RouterConfig
	cfg.Authz = authz.New(srv.Catalog.Store(), []string{"arn:aws:iam::123456789012:role/icehold-admin"})
	cfg.Authenticate = apigw.Principal
	handle := apigw.Handler(router.New(cfg))
	ctx := context.Background()
	// A grant naming a role ARN covers that role's sessions, no other.
	mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+shared.Catalog+"/grants/arn:aws:iam::123456789012:role/analyst", shared.Token,
		map[string]any{"privileges": []string{"TABLE_READ"}})
	cases := []struct {
		event string
		want  int
	}{
		{"apigw-assumed-role-admin", 200}, // an admin role's session
		{"apigw-iam-user", 403},           // an IAM user of the account, no grant
		{"apigw-assumed-role-analyst", 200},
	}
	for _, c := range cases {
		t.Run(c.event, func(t *testing.T) {
			res, err := handle(ctx, apigwEvent(t, c.event, "{ns}", f.ns))
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != c.want {
				t.Errorf("status %d, want %d: %s", res.StatusCode, c.want, res.Body)
			}
		})
	}
	other := apigwEvent(t, "apigw-assumed-role-analyst", "{ns}", f.ns, "assumed-role/analyst/", "assumed-role/analyst2/")
	if res, _ := handle(ctx, other); res.StatusCode != 403 {
		t.Errorf("a session of another role (analyst2) got %d, want 403", res.StatusCode)
	}
}

// Defect: Idempotency-Keys were global: a principal without grants could
// claim a key first (422 to the real caller for a day), and state-dependent
// 409s were replayed for a day.
func TestIdempotencyKeysArePerPrincipal(t *testing.T) {
	localOnly(t)
	f := newFixture(t, shared.Token)
	tables := "/v1/" + shared.Catalog + "/namespaces/" + f.ns + "/tables"
	create := func(name string) map[string]any { return map[string]any{"name": name, "schema": rawSchema} }
	stranger := grantTo(t, shared.Token, shared.Catalog, nil)
	key := uniq("key")
	if status, _ := call(t, "POST", tables+"/nope/nope", stranger, "{}", "Idempotency-Key", key); status != 404 {
		t.Fatalf("stranger on no route: %d, want 404", status)
	}
	if status, _ := call(t, "POST", tables, stranger, create("k1"), "Idempotency-Key", key); status != 403 {
		t.Fatalf("stranger: %d, want 403", status)
	}
	// The stranger's try does not hold the key for anyone, not even itself.
	if status, out := call(t, "POST", tables, shared.Token, create("k1"), "Idempotency-Key", key); status != 200 {
		t.Fatalf("the real caller after a stranger used its key: %d %s, want 200", status, out)
	}
	// Another principal's key space is its own: same key, other request.
	creator := grantTo(t, shared.Token, shared.Catalog, []authz.Privilege{authz.TableCreate})
	if status, out := call(t, "POST", tables, creator, create("k2"), "Idempotency-Key", key); status != 200 {
		t.Errorf("another principal with the same key: %d %s, want 200", status, out)
	}
	// A state-dependent 409 is not replayed: once the state changes, the
	// retry with the same key runs for real.
	key2 := uniq("key")
	if status, _ := call(t, "POST", tables, shared.Token, create("k1"), "Idempotency-Key", key2); status != 409 {
		t.Fatalf("create of an existing name: %d, want 409", status)
	}
	mustCall(t, 204, "DELETE", tables+"/k1", shared.Token, nil)
	status, out := call(t, "POST", tables, shared.Token, create("k1"), "Idempotency-Key", key2)
	if status != 200 {
		t.Errorf("retry after the conflict cleared: %d %s, want 200", status, out)
	}
	// A success is replayed.
	if status, _ := call(t, "POST", tables, shared.Token, create("k1"), "Idempotency-Key", key2); status != 200 {
		t.Errorf("replay of the success: %d", status)
	}
}

// Defect: any object could be read whole as metadata (a multi-GB file as
// metadata-location ran the function out of memory), and gzip inflated up to
// 512 MB inside a 1 GB function.
func TestUnboundedReadsAreCapped(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	f := newFixture(t, shared.Token)
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	s3c := awsconfig.S3(cfg, ep)
	put := func(key string, body []byte) string {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Info.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
		return "s3://" + srv.Info.Bucket + "/" + key
	}
	big := put(shared.Catalog+"/"+f.ns+"/big/metadata/00000-big.metadata.json", make([]byte, 65<<20))
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	chunk := make([]byte, 1<<20)
	for range 130 {
		_, _ = zw.Write(chunk)
	}
	_ = zw.Close()
	gz := put(shared.Catalog+"/"+f.ns+"/bomb/metadata/00000-x.gz.metadata.json", bomb.Bytes())
	for name, loc := range map[string]string{"a 65 MiB file": big, "a gzip bomb": gz} {
		status, out := call(t, "POST", "/v1/"+shared.Catalog+"/namespaces/"+f.ns+"/register", shared.Token,
			map[string]any{"name": "r", "metadata-location": loc})
		if status != 400 {
			t.Errorf("register %s: %d %s, want 400", name, status, out)
			continue
		}
		if _, _, msg := errorModel(t, out); !strings.Contains(msg, "more than") {
			t.Errorf("register %s: the 400 does not say why: %s", name, msg)
		}
	}
}

// API Gateway's real limits: a body past what reaches the Lambda is a 413
// ErrorModel, and a large answer goes out compressed (base64) under the
// limit; the Lambda path is asserted with API Gateway events.
func TestPayloadLimitsThroughAPIGateway(t *testing.T) {
	srv := localOnly(t)
	f := newFixture(t, shared.Token)
	cfg := srv.RouterConfig
	cfg.Authz = authz.New(srv.Catalog.Store(), []string{"arn:aws:iam::123456789012:role/icehold-admin"})
	cfg.Authenticate = apigw.Principal
	handle := apigw.Handler(router.New(cfg))
	ev := apigwEvent(t, "apigw-assumed-role-admin")
	ev.HTTPMethod, ev.Path, ev.QueryStringParameters, ev.MultiValueQueryStringParameters = "POST", "/v1/"+shared.Catalog+"/namespaces/"+f.ns+"/tables", nil, nil
	body := []byte(`{"name":"big","schema":` + schemaJSON + `,"properties":{"pad":"` + strings.Repeat("x", router.MaxBodyBytes) + `"}}`)
	ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	res, err := handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 413 || !strings.Contains(res.Body, `"code":413`) {
		t.Errorf("a body of %d bytes: %d %s, want a 413 ErrorModel", len(body), res.StatusCode, res.Body)
	}
	// Just under the limit: accepted (the event itself fits Lambda's 6 MiB).
	body = []byte(`{"name":"fits","schema":` + schemaJSON + `,"properties":{"pad":"` + strings.Repeat("x", router.MaxBodyBytes-200) + `"}}`)
	ev.Body = base64.StdEncoding.EncodeToString(body)
	if raw, _ := json.Marshal(ev); len(raw) > 6<<20 {
		t.Fatalf("an event with the largest accepted body is %d bytes, over Lambda's 6 MiB", len(raw))
	}
	ev.Headers["Accept-Encoding"] = "gzip"
	res, err = handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || !res.IsBase64Encoded {
		t.Fatalf("largest body: %d (base64 %v)", res.StatusCode, res.IsBase64Encoded)
	}
	if raw, _ := json.Marshal(res); len(raw) > 6<<20 {
		t.Errorf("the answer event is %d bytes, over Lambda's 6 MiB", len(raw))
	}
	if st := res.MultiValueHeaders["Content-Encoding"]; len(st) == 0 || st[0] != "gzip" {
		t.Errorf("a large answer went out uncompressed: %v", res.MultiValueHeaders)
	}
}
