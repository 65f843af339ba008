package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/localserver"
	"github.com/icehold/icehold/shared/store"
)

// storeDigest is a digest of every DynamoDB item (but the event outbox's)
// and every S3 object of the local server: equal digests mean a
// byte-for-byte unchanged store.
func storeDigest(t *testing.T, srv *localserver.Server) string {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{DynamoDB: srv.Info.DynamoDB, S3: srv.Info.S3Endpoint, Region: srv.Info.Region,
		AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	p := dynamodb.NewScanPaginator(awsconfig.DynamoDB(cfg, ep), &dynamodb.ScanInput{TableName: aws.String(localserver.TableName)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if pk, ok := it["pk"].(*ddbtypes.AttributeValueMemberS); ok && pk.Value == store.OutboxPK {
				// Events of earlier tests, relayed and deleted in the
				// background: delivery state, not the catalog's.
				continue
			}
			b, _ := json.Marshal(it)
			lines = append(lines, "ddb "+string(b))
		}
	}
	s3c := awsconfig.S3(cfg, ep)
	lp := s3.NewListObjectsV2Paginator(s3c, &s3.ListObjectsV2Input{Bucket: aws.String(srv.Info.Bucket)})
	for lp.HasMorePages() {
		page, err := lp.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			lines = append(lines, fmt.Sprintf("s3 %s %s %d", aws.ToString(o.Key), aws.ToString(o.ETag), aws.ToInt64(o.Size)))
		}
	}
	sort.Strings(lines)
	h := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(h[:]) + fmt.Sprintf(" (%d records)", len(lines))
}

// softDeletedIn soft-deletes a new table of the suite's catalog (soft
// delete on for the drop only) and returns its uuid.
func softDeletedIn(t *testing.T, c, ns, name string) string {
	t.Helper()
	out := mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/tables", shared.Token, `{"name":"`+name+`","schema":`+schemaJSON+`}`)
	var res struct {
		Metadata struct {
			UUID string `json:"table-uuid"`
		} `json:"metadata"`
	}
	mustDecode(t, out, &res)
	mustCall(t, 200, "POST", "/lifecycle/v1/catalogs/"+c+"/properties", shared.Token, map[string]any{"updates": map[string]string{"soft-delete.enabled": "true"}})
	mustCall(t, 204, "DELETE", "/v1/"+c+"/namespaces/"+ns+"/tables/"+name, shared.Token, nil)
	mustCall(t, 200, "POST", "/lifecycle/v1/catalogs/"+c+"/properties", shared.Token, map[string]any{"removals": []string{"soft-delete.enabled"}})
	return res.Metadata.UUID
}

// waitIdle waits until no purge job is active: the pipeline's background
// work (other tests' purges) would otherwise change the store under a test
// that compares it.
func waitIdle(t *testing.T, srv *localserver.Server) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // generous: CI machines are shared
	for {
		active, _, err := srv.Catalog.Store().ActiveJobs(context.Background(), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(active) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("purge jobs still active after 3 minutes: %v", active)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const schemaJSON = `{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","type":"long","required":false}]}`

// Every bad input gets a 4xx ErrorModel and changes nothing in the store.
func TestBadInputChangesNothing(t *testing.T) {
	srv := localOnly(t)
	waitIdle(t, srv)
	admin := shared.Token
	c := shared.Catalog
	ns := uniq("bad")
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces", admin, map[string]any{"namespace": []string{ns}})
	out := mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/tables", admin, `{"name":"t","schema":`+schemaJSON+`}`)
	var created struct {
		Metadata struct {
			UUID string `json:"table-uuid"`
		} `json:"metadata"`
	}
	mustDecode(t, out, &created)
	tbl := "/v1/" + c + "/namespaces/" + ns + "/tables/t"
	long := strings.Repeat("a", 300)
	soft := softDeletedIn(t, c, ns, "gone") // a soft-deleted table to aim at
	undrop := "/lifecycle/v1/catalogs/" + c + "/namespaces/" + ns + "/tables/gone"

	cases := []struct {
		name, method, path, body string
		status                   int
	}{
		{"malformed JSON", "POST", "/v1/" + c + "/namespaces", `{"namespace": [`, 400},
		{"trailing garbage", "POST", "/v1/" + c + "/namespaces", `{"namespace": ["z"]} x`, 400},
		{"empty body", "POST", "/v1/" + c + "/namespaces", ``, 400},
		{"namespace wrong type", "POST", "/v1/" + c + "/namespaces", `{"namespace": "a"}`, 400},
		{"properties wrong type", "POST", "/v1/" + c + "/namespaces", `{"namespace": ["z"], "properties": {"a": 1}}`, 400},
		{"empty namespace", "POST", "/v1/" + c + "/namespaces", `{"namespace": []}`, 400},
		{"empty level", "POST", "/v1/" + c + "/namespaces", `{"namespace": [""]}`, 400},
		{"dot level", "POST", "/v1/" + c + "/namespaces", `{"namespace": ["."]}`, 400},
		{"dotdot level", "POST", "/v1/" + c + "/namespaces", `{"namespace": [".."]}`, 400},
		{"slash in level", "POST", "/v1/" + c + "/namespaces", `{"namespace": ["a/b"]}`, 400},
		{"control char in level", "POST", "/v1/" + c + "/namespaces", `{"namespace": ["a\u0001b"]}`, 400},
		{"overlong level", "POST", "/v1/" + c + "/namespaces", `{"namespace": ["` + long + `"]}`, 400},
		{"control char in path", "GET", "/v1/" + c + "/namespaces/a%01b", ``, 400},
		{"dotdot in path", "GET", "/v1/" + c + "/namespaces/" + ns + "%1F..", ``, 400},
		{"table name empty", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"","schema":` + schemaJSON + `}`, 400},
		{"table name slash", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"a/b","schema":` + schemaJSON + `}`, 400},
		{"table name control", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"a\nb","schema":` + schemaJSON + `}`, 400},
		{"table name overlong", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"` + long + `","schema":` + schemaJSON + `}`, 400},
		{"table name wrong type", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":5,"schema":` + schemaJSON + `}`, 400},
		{"schema missing", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"u"}`, 400},
		{"schema bad type", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"u","schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"nope","required":false}]}}`, 400},
		{"location not s3", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"u","location":"/tmp/x","schema":` + schemaJSON + `}`, 400},
		{"location outside the warehouse", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"u","location":"s3://other-bucket/x","schema":` + schemaJSON + `}`, 400},
		{"set-location outside the warehouse", "POST", tbl, `{"requirements":[],"updates":[{"action":"set-location","location":"s3://icehold-warehouse/other-catalog/t"}]}`, 400},
		{"table exists", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"t","schema":` + schemaJSON + `}`, 409},
		{"unknown update action", "POST", tbl, `{"requirements":[],"updates":[{"action":"explode"}]}`, 400},
		{"unknown requirement", "POST", tbl, `{"requirements":[{"type":"assert-magic"}],"updates":[]}`, 400},
		{"updates wrong type", "POST", tbl, `{"requirements":[],"updates":{}}`, 400},
		{"update bad schema id", "POST", tbl, `{"requirements":[],"updates":[{"action":"set-current-schema","schema-id":42}]}`, 400},
		{"violated table uuid", "POST", tbl, `{"requirements":[{"type":"assert-table-uuid","uuid":"00000000-0000-0000-0000-000000000000"}],"updates":[{"action":"set-properties","updates":{"a":"b"}}]}`, 409},
		{"violated schema id", "POST", tbl, `{"requirements":[{"type":"assert-current-schema-id","current-schema-id":7}],"updates":[{"action":"set-properties","updates":{"a":"b"}}]}`, 409},
		{"violated assert-create", "POST", tbl, `{"requirements":[{"type":"assert-create"}],"updates":[]}`, 409},
		{"commit missing table", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables/nope", `{"requirements":[],"updates":[]}`, 404},
		{"unknown catalog", "GET", "/v1/nope/namespaces", ``, 404},
		{"undrop malformed body", "POST", undrop + "/undrop", `{"table-uuid": 5}`, 400},
		{"undrop unknown uuid", "POST", undrop + "/undrop", `{"table-uuid": "00000000-0000-0000-0000-000000000000"}`, 404},
		{"undrop no such table", "POST", "/lifecycle/v1/catalogs/" + c + "/namespaces/" + ns + "/tables/never/undrop", `{}`, 404},
		{"undrop into a missing namespace", "POST", undrop + "/undrop", `{"rename-to": {"namespace": ["missing_ns"], "name": "x"}}`, 404},
		{"undrop rename-to bad name", "POST", undrop + "/undrop", `{"rename-to": {"namespace": ["` + ns + `"], "name": "a/b"}}`, 400},
		{"undrop trailing data", "POST", undrop + "/undrop", `{} {}`, 400},
		{"purge-now unknown uuid", "POST", undrop + "/purge-now", `{"table-uuid": "nope"}`, 404},
		{"legal hold unknown uuid", "POST", "/lifecycle/v1/catalogs/" + c + "/soft-deleted-tables/nope/legal-hold", `{"enabled": true}`, 404},
		{"legal hold missing enabled", "POST", "/lifecycle/v1/catalogs/" + c + "/soft-deleted-tables/" + soft + "/legal-hold", `{}`, 400},
		{"legal hold wrong type", "POST", "/lifecycle/v1/catalogs/" + c + "/soft-deleted-tables/" + soft + "/legal-hold", `{"enabled": "yes"}`, 400},
		{"soft-deleted bad namespace", "GET", "/lifecycle/v1/catalogs/" + c + "/soft-deleted-tables?namespace=a%01b", ``, 400},
		{"soft-deleted bad page token", "GET", "/lifecycle/v1/catalogs/" + c + "/soft-deleted-tables?pageToken=zzz", ``, 400},
		{"invalid catalog name", "GET", "/v1/config?warehouse=no%20pe", ``, 400},
		{"bad page token", "GET", "/v1/" + c + "/namespaces?pageToken=garbage", ``, 400},
		{"foreign page token", "GET", "/v1/" + c + "/namespaces?pageToken=eyJwIjoiTlMjeCIsIngiOiIwMSMiLCJrIjoiMDEjYSJ9", ``, 400},
		{"bad page size", "GET", "/v1/" + c + "/namespaces?pageSize=0", ``, 400},
		{"bad snapshots mode", "GET", tbl + "?snapshots=some", ``, 400},
		{"register missing file", "POST", "/v1/" + c + "/namespaces/" + ns + "/register", `{"name":"r","metadata-location":"s3://icehold-warehouse/nope.metadata.json"}`, 400},
		{"register not s3", "POST", "/v1/" + c + "/namespaces/" + ns + "/register", `{"name":"r","metadata-location":"file:///etc/passwd"}`, 400},
		{"rename missing source", "POST", "/v1/" + c + "/tables/rename", `{"source":{"namespace":["` + ns + `"],"name":"nope"},"destination":{"namespace":["` + ns + `"],"name":"x"}}`, 404},
		{"rename bad destination", "POST", "/v1/" + c + "/tables/rename", `{"source":{"namespace":["` + ns + `"],"name":"t"},"destination":{"namespace":["` + ns + `"],"name":"../x"}}`, 400},
		{"rename into missing namespace", "POST", "/v1/" + c + "/tables/rename", `{"source":{"namespace":["` + ns + `"],"name":"t"},"destination":{"namespace":["nope_ns"],"name":"x"}}`, 404},
		{"transaction without identifier", "POST", "/v1/" + c + "/transactions/commit", `{"table-changes":[{"requirements":[],"updates":[]}]}`, 400},
		{"transaction empty", "POST", "/v1/" + c + "/transactions/commit", `{"table-changes":[]}`, 400},
		{"transaction violated", "POST", "/v1/" + c + "/transactions/commit", `{"table-changes":[{"identifier":{"namespace":["` + ns + `"],"name":"t"},"requirements":[{"type":"assert-table-uuid","uuid":"00000000-0000-0000-0000-000000000000"}],"updates":[{"action":"set-properties","updates":{"a":"b"}}]}]}`, 409},
		{"property both set and removed", "POST", "/v1/" + c + "/namespaces/" + ns + "/properties", `{"updates":{"a":"1"},"removals":["a"]}`, 422},
		{"drop missing namespace", "DELETE", "/v1/" + c + "/namespaces/nope_ns", ``, 404},
		{"drop non-empty namespace", "DELETE", "/v1/" + c + "/namespaces/" + ns, ``, 409},
		{"unknown route", "GET", "/v1/" + c + "/nowhere", ``, 404},
		{"wrong method", "PATCH", tbl, `{}`, 405},
		{"catalog bad warehouse", "POST", "/lifecycle/v1/catalogs", `{"name":"x1","warehouse":"http://nope"}`, 400},
		{"catalog bad name", "POST", "/lifecycle/v1/catalogs", `{"name":"a b","warehouse":"s3://icehold-warehouse/x"}`, 400},
		{"catalog bad hold period", "POST", "/lifecycle/v1/catalogs", `{"name":"x2","warehouse":"s3://icehold-warehouse/x","properties":{"soft-delete.hold-period":"seven days"}}`, 400},
		{"catalog exists", "POST", "/lifecycle/v1/catalogs", `{"name":"` + c + `","warehouse":"s3://icehold-warehouse/x"}`, 409},
		{"grant unknown privilege", "PUT", "/lifecycle/v1/catalogs/" + c + "/grants/user:x", `{"privileges":["TABLE_EVERYTHING"]}`, 400},
		{"grant wrong type", "PUT", "/lifecycle/v1/catalogs/" + c + "/grants/user:x", `{"privileges":"TABLE_READ"}`, 400},
		{"bad idempotency key", "POST", "/v1/" + c + "/namespaces", `{"namespace":["k"]}`, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := storeDigest(t, srv)
			var headers []string
			if tc.name == "bad idempotency key" {
				headers = []string{"Idempotency-Key", "has space"}
			}
			var body any
			if tc.body != "" {
				body = tc.body
			}
			status, out := call(t, tc.method, tc.path, admin, body, headers...)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, out)
			}
			typ, code, msg := errorModel(t, out)
			if code != status || msg == "" {
				t.Errorf("ErrorModel %s code %d message %q", typ, code, msg)
			}
			if after := storeDigest(t, srv); after != before {
				t.Errorf("the store changed: %s -> %s", before, after)
			}
		})
	}

	t.Run("oversized body", func(t *testing.T) {
		before := storeDigest(t, srv)
		big := `{"namespace":["big"],"properties":{"p":"` + strings.Repeat("x", 11<<20) + `"}}`
		status, out := call(t, "POST", "/v1/"+c+"/namespaces", admin, big)
		if status != 413 {
			t.Fatalf("status %d, want 413", status)
		}
		errorModel(t, out)
		if after := storeDigest(t, srv); after != before {
			t.Errorf("the store changed")
		}
	})
}
