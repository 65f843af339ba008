package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/store"
)

// storeDigest is a digest of every DynamoDB item (but the event outbox's)
// and every S3 object of the local server: equal digests mean a
// byte-for-byte unchanged store.
func storeDigest(t *testing.T, srv *server.Server) string {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{DynamoDB: srv.Info.DynamoDB, S3: srv.Info.S3Endpoint, Region: srv.Info.Region,
		AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	p := dynamodb.NewScanPaginator(awsconfig.DynamoDB(cfg, ep), &dynamodb.ScanInput{TableName: aws.String(server.TableName)})
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
func waitIdle(t *testing.T, srv *server.Server) {
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
		{"duplicated lifecycle property", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables", `{"name":"dup","schema":` + schemaJSON + `,"properties":{"icehold.legal-hold":"true","icehold.legal-hold":"false"}}`, 400},
		{"duplicated property in a commit", "POST", tbl, `{"requirements":[],"updates":[{"action":"set-properties","updates":{"soft-delete.hold-period":"P30D","soft-delete.hold-period":"P1D"}}]}`, 400},
		{"duplicated key in a transaction", "POST", "/v1/" + c + "/transactions/commit", `{"table-changes":[{"identifier":{"namespace":["` + ns + `"],"name":"t"},"requirements":[],"updates":[{"action":"set-properties","updates":{"a":"b"}}],"updates":[]}]}`, 400},
		{"duplicated key in a namespace", "POST", "/v1/" + c + "/namespaces/" + ns + "/properties", `{"updates":{"soft-delete.hold-period":"P30D","soft-delete.hold-period":"P1D"}}`, 400},
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

// Defect: destructive lifecycle routes ignored unknown fields, duplicated
// keys and nulls: purge-now {"table_uuid": …} (a typo) purged the only
// generation, so did {"table-uuid": null, "x": [1]}; undrop took a null
// body, a retention body extra fields, a drop a tuple with a key twice.
// Every lifecycle body with a typo'd key, a null, a duplicated key (at any
// depth), a wrong type or an out-of-range value is a 400 ErrorModel, and
// the store and the bucket stay as they were.
func TestLifecycleBodiesAreStrict(t *testing.T) {
	srv := localOnly(t)
	waitIdle(t, srv)
	c := shared.Catalog
	ns := uniq("strict")
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	retentionIn(t, ns, "days", false)
	soft := softDeletedIn(t, c, ns, "gone")
	lc := "/lifecycle/v1/catalogs/" + c
	tbl := lc + "/namespaces/" + ns + "/tables/"
	wh := func(name string) string { return `"warehouse":"s3://icehold-warehouse/` + name + `"` }
	n1, n2, n3, n4, n5, n6, n7, n8 := uniq("sx"), uniq("sx"), uniq("sx"), uniq("sx"), uniq("sx"), uniq("sx"), uniq("sx"), uniq("sx")
	day := `{"ts_day":"2026-01-01"}`

	type bad struct{ kind, body, want string }
	routes := []struct {
		method, path string
		cases        []bad
	}{
		{"POST", "/lifecycle/v1/catalogs", []bad{
			{"typo", `{"name":"` + n1 + `",` + wh(n1) + `,"propertes":{"soft-delete.enabled":"true"}}`, ""},
			{"null", `{"name":"` + n2 + `",` + wh(n2) + `,"properties":null}`, "null"},
			{"null property", `{"name":"` + n3 + `",` + wh(n3) + `,"properties":{"a":null}}`, "null"},
			{"null body", `null`, ""},
			{"duplicated key", `{"name":"` + n4 + `",` + wh(n4) + `,"name":"` + n5 + `"}`, "name"},
			{"duplicated property", `{"name":"` + n6 + `",` + wh(n6) + `,"properties":{"soft-delete.hold-period":"P7D","soft-delete.hold-period":"P1D"}}`, "soft-delete.hold-period"},
			{"wrong type", `{"name":"` + n7 + `","warehouse":["s3://icehold-warehouse/x"]}`, ""},
			{"out of range", `{"name":"` + n8 + `",` + wh(n8) + `,"properties":{"soft-delete.hold-period":"213504d"}}`, "100 years"},
			{"trailing data", `{"name":"` + n1 + `",` + wh(n1) + `} {}`, ""},
		}},
		{"POST", lc + "/properties", []bad{
			{"typo", `{"update":{"note":"1"}}`, ""},
			{"null", `{"updates":null}`, "null"},
			{"null removals", `{"updates":{"note":"1"},"removals":null}`, "null"},
			{"null property", `{"updates":{"note":null}}`, "null"},
			{"null removal", `{"removals":[null]}`, "null"},
			{"duplicated key", `{"updates":{"note":"1"},"updates":{"other":"1"}}`, "updates"},
			{"duplicated property", `{"updates":{"note":"1","note":"2"}}`, "note"},
			{"wrong type", `{"removals":"note"}`, ""},
			{"out of range", `{"updates":{"soft-delete.hold-period":"P30501W"}}`, "100 years"},
		}},
		{"PUT", lc + "/grants/user:" + ns, []bad{
			{"typo", `{"privileges":["TABLE_READ"],"privilege":["CATALOG_MANAGE"]}`, ""},
			{"principal in the body", `{"principal":"user:other","privileges":["TABLE_READ"]}`, ""},
			{"null", `{"privileges":["TABLE_READ"],"note":null}`, ""},
			{"null body", `null`, ""},
			{"duplicated key", `{"privileges":["TABLE_READ"],"privileges":["CATALOG_MANAGE"]}`, "privileges"},
			{"wrong type", `{"privileges":[1]}`, ""},
		}},
		{"POST", lc + "/soft-deleted-tables/" + soft + "/legal-hold", []bad{
			{"typo", `{"enabled":true,"enable":false}`, ""},
			{"null", `{"enabled":true,"note":null}`, ""},
			{"null body", `null`, ""},
			{"duplicated key", `{"enabled":false,"enabled":true}`, "enabled"},
			{"wrong type", `{"enabled":1}`, ""},
			{"array body", `[]`, ""},
		}},
		{"POST", tbl + "gone/undrop", []bad{
			{"typo", `{"table_uuid":"` + soft + `"}`, ""},
			{"null", `{"table-uuid":null}`, "null"},
			{"null rename-to", `{"rename-to":null}`, "null"},
			{"empty uuid", `{"table-uuid":""}`, "empty"},
			{"null body", `null`, ""},
			{"duplicated key", `{"table-uuid":"00000000-0000-0000-0000-000000000000","table-uuid":"` + soft + `"}`, "table-uuid"},
			{"duplicated nested key", `{"rename-to":{"namespace":["` + ns + `"],"name":"a","name":"b"}}`, "name"},
			{"unknown nested key", `{"rename-to":{"namespace":["` + ns + `"],"name":"a","nmae":"b"}}`, ""},
			{"wrong type", `{"rename-to":"` + ns + `.a"}`, ""},
		}},
		{"POST", tbl + "gone/purge-now", []bad{
			{"typo", `{"table_uuid":"` + soft + `"}`, ""},
			{"null and extra", `{"table-uuid":null,"x":[1]}`, ""},
			{"null", `{"table-uuid":null}`, "null"},
			{"empty uuid", `{"table-uuid":""}`, "empty"},
			{"null body", `null`, ""},
			{"duplicated key", `{"table-uuid":"00000000-0000-0000-0000-000000000000","table-uuid":"` + soft + `"}`, "table-uuid"},
			{"wrong type", `{"table-uuid":["` + soft + `"]}`, ""},
			{"array body", `[]`, ""},
		}},
		{"POST", tbl + "days/partitions/drop", []bad{
			{"typo", `{"partitions":[` + day + `],"spec_id":0}`, ""},
			{"null spec-id", `{"partitions":[` + day + `],"spec-id":null}`, "null"},
			{"null read-snapshot-id", `{"partitions":[` + day + `],"read-snapshot-id":null}`, "null"},
			{"null expected-table-uuid", `{"partitions":[` + day + `],"expected-table-uuid":null}`, "null"},
			{"empty expected-table-uuid", `{"partitions":[` + day + `],"expected-table-uuid":""}`, "empty"},
			{"null tuple", `{"partitions":[null]}`, ""},
			{"null body", `null`, ""},
			{"duplicated key", `{"partitions":[` + day + `],"partitions":[{"ts_day":"2026-01-02"}]}`, "partitions"},
			{"duplicated tuple key", `{"partitions":[{"ts_day":"2026-01-01","ts_day":"2026-01-02"}]}`, "ts_day"},
			{"wrong type", `{"partitions":` + day + `}`, ""},
			{"spec-id too large", `{"partitions":[` + day + `],"spec-id":2147483648}`, "spec-id"},
			{"spec-id negative", `{"partitions":[` + day + `],"spec-id":-1}`, "spec-id"},
			{"spec-id overflow", `{"partitions":[` + day + `],"spec-id":99999999999999999999}`, "spec-id"},
			{"spec-id fraction", `{"partitions":[` + day + `],"spec-id":0.5}`, "spec-id"},
			{"read-snapshot-id overflow", `{"partitions":[` + day + `],"read-snapshot-id":9223372036854775808}`, "read-snapshot-id"},
			{"read-snapshot-id negative", `{"partitions":[` + day + `],"read-snapshot-id":-5}`, "read-snapshot-id"},
		}},
		{"PUT", tbl + "days/partition-retention", []bad{
			{"typo", `{"field":"ts_day","keep":"P7D","kep":"P1D"}`, ""},
			{"null", `{"field":"ts_day","keep":"P7D","note":null}`, ""},
			{"null keep", `{"field":"ts_day","keep":null}`, ""},
			{"null body", `null`, ""},
			{"duplicated key", `{"field":"ts_day","keep":"P7D","keep":"P1D"}`, "keep"},
			{"wrong type", `{"field":"ts_day","keep":7}`, ""},
			{"out of range", `{"field":"ts_day","keep":"5124096h"}`, "100 years"},
			{"out of range days", `{"field":"ts_day","keep":"213504d"}`, "100 years"},
		}},
	}
	for _, rt := range routes {
		for _, tc := range rt.cases {
			t.Run(rt.method+" "+rt.path[strings.LastIndex(rt.path, "/")+1:]+" "+tc.kind, func(t *testing.T) {
				waitIdle(t, srv)
				before := storeDigest(t, srv)
				status, out := call(t, rt.method, rt.path, shared.Token, tc.body)
				if status != 400 {
					t.Fatalf("%s: status %d, want 400: %s", tc.body, status, out)
				}
				typ, code, msg := errorModel(t, out)
				if code != 400 || typ != "BadRequestException" || !strings.Contains(msg, tc.want) {
					t.Errorf("ErrorModel %s %d %q, want a BadRequestException naming %q", typ, code, msg, tc.want)
				}
				waitIdle(t, srv)
				if after := storeDigest(t, srv); after != before {
					t.Errorf("the store changed: %s -> %s", before, after)
				}
			})
		}
	}
	// The routes whose fields are all optional still take no body at all.
	t.Run("empty bodies stay allowed", func(t *testing.T) {
		if status, out := call(t, "POST", tbl+"gone/undrop", shared.Token, nil); status != 200 {
			t.Errorf("undrop without a body: %d %s", status, out)
		}
	})
}

// Defect: an Idempotency-Key (any header) holding byte 0x7f got net/http's
// plain-text 400, not the ErrorModel every other answer is.
func TestControlBytesInHeadersAnswerErrorModel(t *testing.T) {
	srv := localOnly(t)
	waitIdle(t, srv)
	addr := strings.TrimPrefix(shared.URL, "http://")
	body := `{"namespace":["` + uniq("ctl") + `"]}`
	for _, key := range []string{"a\x7fb", "a\x01b", "a\x00b"} {
		t.Run(fmt.Sprintf("%q", key), func(t *testing.T) {
			before := storeDigest(t, srv)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /v1/%s/namespaces HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				shared.Catalog, addr, shared.Token, key, len(body), body)
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			out, _ := io.ReadAll(res.Body)
			if res.StatusCode != 400 || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d, Content-Type %q: %s; want a 400 ErrorModel", res.StatusCode, res.Header.Get("Content-Type"), out)
			}
			if typ, code, msg := errorModel(t, out); code != 400 || typ != "BadRequestException" || msg == "" {
				t.Errorf("ErrorModel %s %d %q", typ, code, msg)
			}
			if after := storeDigest(t, srv); after != before {
				t.Errorf("the store changed")
			}
		})
	}
}
