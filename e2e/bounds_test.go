package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
)

// hundredYears is the bound of every duration a user sets (SPEC §2).
const hundredYears = 36500 * 24 * time.Hour

// putS3 writes an object of the local server's bucket; the s3:// URI.
func putS3(t *testing.T, srv *server.Server, uri string, body []byte) {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimPrefix(uri, "s3://"+srv.Info.Bucket+"/")
	if _, err := awsconfig.S3(cfg, ep).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Info.Bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

// metadataWith writes a copy of a table's current metadata with props
// added, as a new metadata file beside it, and returns its location and the
// table's location.
func metadataWith(t *testing.T, srv *server.Server, cat, ns, name string, props map[string]string) (string, string) {
	t.Helper()
	var res struct {
		Metadata map[string]any `json:"metadata"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/"+cat+"/namespaces/"+ns+"/tables/"+name, shared.Token, nil), &res)
	p, _ := res.Metadata["properties"].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	for k, v := range props {
		p[k] = v
	}
	res.Metadata["properties"] = p
	raw, err := json.Marshal(res.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	loc := res.Metadata["location"].(string)
	meta := strings.TrimRight(loc, "/") + "/metadata/00001-" + uuid.NewString() + ".metadata.json"
	putS3(t, srv, meta, raw)
	return meta, loc
}

// Defect: a hold period or retention of 213504d (or P30501W, 307445735m,
// 5124096h) overflowed time.Duration: a soft drop got purge-at 26 s later,
// a 5124096h retention dropped every partition. Wherever a duration is
// set, an out-of-range one is a 400 naming the bound, and nothing changes.
func TestHugeDurationsAreRefusedEverywhere(t *testing.T) {
	srv := localOnly(t)
	c := shared.Catalog
	ns := uniq("bounds")
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/tables", shared.Token, map[string]any{"name": "t", "schema": rawSchema})
	retentionIn(t, ns, "days", false)
	tables := "/v1/" + c + "/namespaces/" + ns + "/tables"
	const hold = catalog.PropHoldPeriod
	for i, v := range []string{"213504d", "P30501W", "307445735m", "5124096h", "36501d", "P5214WT2000000H", "99999999999999999999d"} {
		// A dropped table's metadata carrying the value, to register.
		reg := uniq("reg")
		mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": reg, "schema": rawSchema})
		regMeta, _ := metadataWith(t, srv, c, ns, reg, map[string]string{hold: v})
		mustCall(t, 204, "DELETE", tables+"/"+reg, shared.Token, nil)
		props, _ := json.Marshal(map[string]string{hold: v})
		set := `{"requirements":[],"updates":[{"action":"set-properties","updates":` + string(props) + `}]}`
		name := "bounds" + string(rune('a'+i))
		for _, tc := range []struct{ name, method, path, body string }{
			{"catalog create", "POST", "/lifecycle/v1/catalogs", `{"name":"` + name + `","warehouse":"s3://icehold-warehouse/` + name + `","properties":` + string(props) + `}`},
			{"catalog properties", "POST", "/lifecycle/v1/catalogs/" + c + "/properties", `{"updates":` + string(props) + `}`},
			{"namespace create", "POST", "/v1/" + c + "/namespaces", `{"namespace":["` + name + `"],"properties":` + string(props) + `}`},
			{"namespace properties", "POST", "/v1/" + c + "/namespaces/" + ns + "/properties", `{"updates":` + string(props) + `}`},
			{"table create", "POST", tables, `{"name":"n","schema":` + schemaJSON + `,"properties":` + string(props) + `}`},
			{"commit", "POST", tables + "/t", set},
			{"multi-table commit", "POST", "/v1/" + c + "/transactions/commit", `{"table-changes":[{"identifier":{"namespace":["` + ns + `"],"name":"t"},` + set[1:] + `]}`},
			{"register", "POST", "/v1/" + c + "/namespaces/" + ns + "/register", `{"name":"` + reg + `","metadata-location":"` + regMeta + `"}`},
			{"retention keep", "PUT", "/lifecycle/v1/catalogs/" + c + "/namespaces/" + ns + "/tables/days/partition-retention", `{"field":"ts_day","keep":"` + v + `"}`},
		} {
			t.Run(v+" "+tc.name, func(t *testing.T) {
				waitIdle(t, srv)
				before := storeDigest(t, srv)
				status, out := call(t, tc.method, tc.path, shared.Token, tc.body)
				if status != 400 {
					t.Fatalf("status %d, want 400: %s", status, out)
				}
				if _, _, msg := errorModel(t, out); !strings.Contains(msg, "100 years") {
					t.Errorf("the message does not name the bound (100 years): %s", msg)
				}
				if after := storeDigest(t, srv); after != before {
					t.Errorf("the store changed: %s -> %s", before, after)
				}
			})
		}
	}
}

// A hold period stored before durations were bounded never yields a
// shorter hold than meant: an out-of-range one holds for the bound, a
// malformed one refuses the drop (the table stays), and a commit that does
// not touch the stored value still goes through.
func TestStoredHoldPeriodsNeverShortenTheHold(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	st := srv.Catalog.Store()
	name, _ := softCatalog(t, nil)
	nsA, nsB := uniq("stored"), uniq("stored")
	for _, ns := range []string{nsA, nsB} {
		mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	}
	tables := func(ns string) string { return "/v1/" + name + "/namespaces/" + ns + "/tables" }
	holdOf := func(ns, tbl string) time.Duration {
		t.Helper()
		for _, r := range softDeleted(t, name, ns) {
			if r.Name == tbl {
				dropped, _ := time.Parse(time.RFC3339, r.DroppedAt)
				purge, _ := time.Parse(time.RFC3339, r.PurgeAt)
				return purge.Sub(dropped)
			}
		}
		t.Fatalf("%s.%s is not soft-deleted", ns, tbl)
		return 0
	}

	t.Run("out-of-range catalog property holds for the bound", func(t *testing.T) {
		c, err := st.GetCatalog(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c.Properties[catalog.PropHoldPeriod] = "5124096h"
		if err := st.UpdateCatalog(ctx, c); err != nil {
			t.Fatal(err)
		}
		mustCall(t, 200, "POST", tables(nsA), shared.Token, map[string]any{"name": "a", "schema": rawSchema})
		mustCall(t, 204, "DELETE", tables(nsA)+"/a", shared.Token, nil)
		if d := holdOf(nsA, "a"); d < hundredYears {
			t.Errorf("a catalog hold period of 5124096h held the table for %v, want at least 100 years", d)
		}
	})

	t.Run("out-of-range table property holds for the bound, commits go on", func(t *testing.T) {
		mustCall(t, 200, "POST", tables(nsA), shared.Token, map[string]any{"name": "c", "schema": rawSchema})
		e, err := st.GetTable(ctx, name, []string{nsA}, "c")
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := metadataWith(t, srv, name, nsA, "c", map[string]string{catalog.PropHoldPeriod: "P30501W"})
		old := e.MetadataLocation
		e.MetadataLocation, e.HoldPeriod = meta, "P30501W"
		if err := st.CommitTable(ctx, name, e, old, nil); err != nil {
			t.Fatal(err)
		}
		if st, out := call(t, "POST", tables(nsA)+"/c", shared.Token, `{"requirements":[],"updates":[{"action":"set-properties","updates":{"note":"x"}}]}`); st != 200 {
			t.Errorf("a commit leaving the stored hold period alone: %d %s, want 200", st, out)
		}
		mustCall(t, 204, "DELETE", tables(nsA)+"/c", shared.Token, nil)
		if d := holdOf(nsA, "c"); d < hundredYears {
			t.Errorf("a table hold period of P30501W held the table for %v, want at least 100 years", d)
		}
	})

	t.Run("malformed namespace property refuses the drop", func(t *testing.T) {
		mustCall(t, 200, "POST", tables(nsB), shared.Token, map[string]any{"name": "b", "schema": rawSchema})
		n, err := st.GetNamespace(ctx, name, []string{nsB})
		if err != nil {
			t.Fatal(err)
		}
		if n.Properties == nil {
			n.Properties = map[string]string{}
		}
		n.Properties[catalog.PropHoldPeriod] = "seven days"
		if err := st.UpdateNamespace(ctx, name, n); err != nil {
			t.Fatal(err)
		}
		status, out := call(t, "DELETE", tables(nsB)+"/b", shared.Token, nil)
		if status < 400 || status >= 500 {
			t.Fatalf("drop under a malformed hold period: %d %s, want a refusal", status, out)
		}
		if _, _, msg := errorModel(t, out); !strings.Contains(msg, catalog.PropHoldPeriod) {
			t.Errorf("the refusal does not name %s: %s", catalog.PropHoldPeriod, msg)
		}
		mustCall(t, 200, "GET", tables(nsB)+"/b", shared.Token, nil)
	})
}

// Defect: snapshot expiry read history.expire.* with iceberg-go's
// GetInt64, which takes a malformed value as the default (a max age of
// "30d" expired after 5 days) and a negative one as is ("-1" expired every
// snapshot but the head): numbers that decide deletions were never
// checked. They are 400 where they are set; one stored before that stops
// the table's expiry (an error the sweep reports) instead of deleting.
func TestExpiryPropertiesAreChecked(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	ns := uniq("expprops")
	cat := client(t, shared.Token)
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	tables := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/tables"
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "t", "schema": rawSchema})
	bad := []map[string]string{
		{"history.expire.max-snapshot-age-ms": "30d"},
		{"history.expire.max-snapshot-age-ms": "-1"},
		{"history.expire.max-snapshot-age-ms": "0"},
		{"history.expire.max-snapshot-age-ms": "9223372036854775808"},
		{"history.expire.max-ref-age-ms": "-5"},
		{"history.expire.min-snapshots-to-keep": "0"},
		{"history.expire.min-snapshots-to-keep": "99999999999"},
	}
	for _, props := range bad {
		raw, _ := json.Marshal(props)
		for _, tc := range []struct{ name, path, body string }{
			{"create", tables, `{"name":"u","schema":` + schemaJSON + `,"properties":` + string(raw) + `}`},
			{"commit", tables + "/t", `{"requirements":[],"updates":[{"action":"set-properties","updates":` + string(raw) + `}]}`},
		} {
			t.Run(tc.name+" "+string(raw), func(t *testing.T) {
				waitIdle(t, srv)
				before := storeDigest(t, srv)
				status, out := call(t, "POST", tc.path, shared.Token, tc.body)
				if status != 400 {
					t.Fatalf("status %d, want 400: %.300s", status, out)
				}
				if _, _, msg := errorModel(t, out); !strings.Contains(msg, "history.expire.") {
					t.Errorf("the message does not name the property: %s", msg)
				}
				if after := storeDigest(t, srv); after != before {
					t.Errorf("the store changed")
				}
			})
		}
	}

	t.Run("a stored one stops expiry", func(t *testing.T) {
		tbl := writtenTable(t, cat, ns, "w", nil, false)
		before := len(tbl.Metadata().Snapshots())
		e, err := srv.Catalog.Store().GetTable(ctx, shared.Catalog, []string{ns}, "w")
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := metadataWith(t, srv, shared.Catalog, ns, "w", map[string]string{"history.expire.max-snapshot-age-ms": "-1"})
		old := e.MetadataLocation
		e.MetadataLocation = meta
		if err := srv.Catalog.Store().CommitTable(ctx, shared.Catalog, e, old, nil); err != nil {
			t.Fatal(err)
		}
		res, err := srv.Partitions.ExpireSnapshots(ctx, shared.Catalog, catalog.Ident{Namespace: []string{ns}, Name: "w"}, e.TableUUID, time.Now())
		if err == nil || !strings.Contains(err.Error(), "history.expire.max-snapshot-age-ms") {
			t.Errorf("expiry under a stored max age of -1: %+v, %v; want an error naming the property", res, err)
		}
		if after := len(loadTable(t, cat, ns, "w").Metadata().Snapshots()); after != before || res.Snapshots != 0 {
			t.Errorf("%d snapshots before, %d after (%d expired)", before, after, res.Snapshots)
		}
	})
}
