package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/partitions"
)

// Partition retention and verify (SPEC §5) on a server of their own: the
// sweep walks every policy of the store, and the tests drive its clock.

func retentionServer(t *testing.T) *server.Server {
	t.Helper()
	localOnly(t)
	srv, err := server.Start(context.Background(), server.Options{DemoProperties: map[string]string{}, RetentionEvery: -1, DeleteWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func lifecyclePath(srv *server.Server, ns, tbl, rest string) string {
	return "/lifecycle/v1/catalogs/" + srv.Info.Catalog + "/namespaces/" + ns + "/tables/" + tbl + rest
}

// Done when 5 and 7: P7D on a day field drops exactly the expired days
// (delete files included) in one snapshot; a rerun commits nothing; a table
// without a policy is never touched. Verify passes on both, and reports a
// file an append put into a dropped day behind the policy's back.
func TestRetentionDropsExpiredDaysAndVerifyFindsStragglers(t *testing.T) {
	srv := retentionServer(t)
	ctx := context.Background()
	cat, err := rest.NewCatalog(ctx, "icehold", srv.Info.RESTURL, rest.WithOAuthToken(srv.Info.AdminToken), rest.WithWarehouseLocation(srv.Info.Catalog))
	if err != nil {
		t.Fatal(err)
	}
	ns := uniq("ret")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	events := teamTable(t, cat, ns, "events")
	teamTable(t, cat, ns, "other")
	before := cellCounts(t, events)
	admin := srv.Info.AdminToken

	for _, c := range []struct{ name, body, says string }{
		{"identity int field", `{"field": "team_id", "keep": "P7D"}`, "not a time"},
		{"unknown field", `{"field": "ts", "keep": "P7D"}`, "not a partition field"},
		{"bad keep", `{"field": "ts_day", "keep": "a week"}`, "ISO-8601"},
		{"no keep", `{"field": "ts_day"}`, "required"},
	} {
		status, out := callAt(t, srv.Info.RESTURL, "PUT", lifecyclePath(srv, ns, "events", "/partition-retention"), admin, json.RawMessage(c.body))
		if status != 400 || !strings.Contains(string(out), c.says) {
			t.Errorf("%s: %d %s, want 400 saying %q", c.name, status, out, c.says)
		}
	}
	if status, out := callAt(t, srv.Info.RESTURL, "GET", lifecyclePath(srv, ns, "events", "/partition-retention"), admin, nil); status != 404 {
		t.Errorf("policy before it is set: %d %s", status, out)
	}
	status, out := callAt(t, srv.Info.RESTURL, "PUT", lifecyclePath(srv, ns, "events", "/partition-retention"), admin, map[string]string{"field": "ts_day", "keep": "P7D"})
	if status != 200 {
		t.Fatalf("set policy: %d %s", status, out)
	}
	otherLoc := loadTable(t, cat, ns, "other").MetadataLocation()

	// 2026-09-23 12:00 minus 7 days, down to the day: 2026-09-16. Days 14
	// and 15 end by then; day 16 does not.
	now := time.Date(2026, 9, 23, 12, 0, 0, 0, time.UTC)
	res, err := srv.Partitions.SweepRetention(ctx, now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tables != 1 || res.Dropped != 1 || res.DataFilesEnded != 12 || res.DeleteFilesEnded != 2 || len(res.Failed) > 0 {
		t.Errorf("sweep: %+v, want 1 table, 12 data files and 2 delete files ended", res)
	}
	events = loadTable(t, cat, ns, "events")
	after := cellCounts(t, events)
	for c, n := range before {
		want := n
		if c.day != day3 {
			want = 0
		}
		if after[c] != want {
			t.Errorf("%v: %d rows after the sweep, want %d", c, after[c], want)
		}
	}
	cur := events.CurrentSnapshot()
	if cur.Summary.Operation != table.OpDelete || cur.Summary.Properties[partitions.PropRetentionCutoff] != "2026-09-16T00:00:00Z" ||
		!strings.HasPrefix(cur.Summary.Properties[partitions.PropIdempotencyKey], "retention:"+events.Metadata().TableUUID().String()) {
		t.Errorf("the sweep's snapshot: %s %v", cur.Summary.Operation, cur.Summary.Properties)
	}
	var policy partitions.RetentionPolicy
	_, out = callAt(t, srv.Info.RESTURL, "GET", lifecyclePath(srv, ns, "events", "/partition-retention"), admin, nil)
	mustDecode(t, out, &policy)
	if policy.Field != "ts_day" || policy.Keep != "P7D" || policy.AppliedCutoff != "2026-09-16T00:00:00Z" {
		t.Errorf("policy after the sweep: %+v", policy)
	}

	// A rerun (same day, and an hour later) commits nothing.
	loc := events.MetadataLocation()
	for _, at := range []time.Time{now, now.Add(time.Hour)} {
		res, err := srv.Partitions.SweepRetention(ctx, at, 0)
		if err != nil || res.Dropped != 0 || len(res.Failed) > 0 {
			t.Errorf("rerun at %s: %+v %v", at, res, err)
		}
	}
	if got := loadTable(t, cat, ns, "events").MetadataLocation(); got != loc {
		t.Errorf("a rerun committed: %s → %s", loc, got)
	}
	if got := loadTable(t, cat, ns, "other").MetadataLocation(); got != otherLoc {
		t.Errorf("the table without a policy moved: %s → %s", otherLoc, got)
	}

	verify := func(tbl string) partitions.Report {
		var rep partitions.Report
		status, out := callAt(t, srv.Info.RESTURL, "GET", lifecyclePath(srv, ns, tbl, "/verify"), admin, nil)
		if status != 200 {
			t.Fatalf("verify %s: %d %s", tbl, status, out)
		}
		mustDecode(t, out, &rep)
		return rep
	}
	for _, tbl := range []string{"events", "other"} {
		// Every check verify makes, each passing, each once.
		rep := verify(tbl)
		var names []string
		for _, c := range rep.Checks {
			names = append(names, c.Name)
		}
		want := []string{partitions.CheckMetadata, partitions.CheckRetention, partitions.CheckLocation, partitions.CheckFiles}
		if !rep.OK || !slices.Equal(names, want) {
			t.Errorf("verify %s on a clean table: checks %v (want %v): %+v", tbl, names, want, rep)
		}
	}
	// An append into a dropped day, behind the policy's back.
	appendRows(t, loadTable(t, cat, ns, "events"), teamRows(t, []int32{7}, []string{day1}, 3, 5000))
	rep := verify("events")
	var ret partitions.Check
	for _, c := range rep.Checks {
		if c.Name == partitions.CheckRetention {
			ret = c
		}
	}
	if rep.OK || ret.OK || ret.Violations != 1 || len(ret.Examples) != 1 || !strings.Contains(ret.Examples[0], "ts_day=2026-09-14") {
		t.Errorf("verify after a straggler: %+v", rep)
	}
	// The next sweep drops it; verify passes again.
	if res, err := srv.Partitions.SweepRetention(ctx, now, 0); err != nil || res.DataFilesEnded != 1 {
		t.Errorf("sweep after the straggler: %+v %v", res, err)
	}
	if rep := verify("events"); !rep.OK {
		t.Errorf("verify after the sweep: %+v", rep)
	}
	if status, _ := callAt(t, srv.Info.RESTURL, "DELETE", lifecyclePath(srv, ns, "events", "/partition-retention"), admin, nil); status != 204 {
		t.Errorf("clear policy: %d", status)
	}
	if status, _ := callAt(t, srv.Info.RESTURL, "DELETE", lifecyclePath(srv, ns, "events", "/partition-retention"), admin, nil); status != 404 {
		t.Errorf("clear a cleared policy: %d", status)
	}
}

// Done when 5: 1,000 tables with policies are worked through in bounded
// runs, each looking at no more than its bound, every table once a round.
func TestRetentionSweepIsBoundedAcrossThousandTables(t *testing.T) {
	srv := retentionServer(t)
	admin := srv.Info.AdminToken
	ns := uniq("many")
	if status, out := callAt(t, srv.Info.RESTURL, "POST", "/v1/"+srv.Info.Catalog+"/namespaces", admin, map[string]any{"namespace": []string{ns}}); status != 200 {
		t.Fatalf("namespace: %d %s", status, out)
	}
	const tables = 1000
	// Straight through the services (the HTTP path is covered above): the
	// subject is the sweep, and 2,000 requests under -race take a minute.
	ctx := authz.WithPrincipal(context.Background(), server.AdminPrincipal)
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz})
	spec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}})
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := fmt.Sprintf("t%04d", i)
				if _, err := srv.Catalog.CreateTable(ctx, srv.Info.Catalog, []string{ns}, catalog.CreateTableRequest{Name: name, Schema: schema, PartitionSpec: &spec}); err != nil {
					t.Errorf("create %s: %v", name, err)
					continue
				}
				if _, err := srv.Partitions.SetRetention(ctx, srv.Info.Catalog, catalog.Ident{Namespace: []string{ns}, Name: name}, "ts_day", "30d"); err != nil {
					t.Errorf("policy %s: %v", name, err)
				}
			}
		}()
	}
	for i := range tables {
		work <- i
	}
	close(work)
	wg.Wait()

	now := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	seen, runs := 0, 0
	began := time.Now()
	defer func() { t.Logf("%d runs in %v", runs, time.Since(began)) }()
	for {
		res, err := srv.Partitions.SweepRetention(ctx, now, 200)
		if err != nil {
			t.Fatal(err)
		}
		runs++
		if res.Tables > 200 || len(res.Failed) > 0 || len(res.Skipped) > 0 {
			t.Fatalf("run %d: %+v", runs, res)
		}
		seen += res.Tables
		if !res.More || runs > 10 {
			break
		}
	}
	if seen != tables || runs != 5 {
		t.Errorf("%d runs looked at %d policies, want 5 runs of 200 and %d", runs, seen, tables)
	}
	policies, _, err := srv.Catalog.Store().ListRetention(ctx, "", tables+1)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, p := range policies {
		if p.AppliedCutoff != "" {
			applied++
		}
	}
	if len(policies) != tables || applied != tables {
		t.Errorf("%d policies, %d applied", len(policies), applied)
	}
	// The next round starts over.
	if res, err := srv.Partitions.SweepRetention(ctx, now, 200); err != nil || res.Tables != 200 || !res.More {
		t.Errorf("the next round: %+v %v", res, err)
	}
}

// retentionIn creates a table partitioned by day(ts), with a P7D policy
// when withPolicy.
func retentionIn(t *testing.T, ns, name string, withPolicy bool) {
	t.Helper()
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables", shared.Token, map[string]any{
		"name":           name,
		"schema":         json.RawMessage(`{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"ts","type":"timestamptz","required":false}]}`),
		"partition-spec": map[string]any{"spec-id": 0, "fields": []any{map[string]any{"source-id": 1, "field-id": 1000, "name": "ts_day", "transform": "day"}}},
	})
	if withPolicy {
		mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+shared.Catalog+"/namespaces/"+ns+"/tables/"+name+"/partition-retention", shared.Token,
			map[string]string{"field": "ts_day", "keep": "P7D"})
	}
}

// Durations are stored, and answered, in ISO-8601 whatever form they were
// written in: a retention's keep and a catalog's hold period.
func TestDurationsAreStoredInISO8601(t *testing.T) {
	ns := newNamespace(t, "iso")
	retentionIn(t, ns, "t", false)
	for _, c := range []struct{ keep, want string }{{"7d", "P7D"}, {"36h", "P1DT12H"}, {"P2W", "P14D"}, {"90m", "PT1H30M"}, {"PT0H45M", "PT45M"}} {
		path := "/lifecycle/v1/catalogs/" + shared.Catalog + "/namespaces/" + ns + "/tables/t/partition-retention"
		var set, got partitions.RetentionPolicy
		mustDecode(t, mustCall(t, 200, "PUT", path, shared.Token, map[string]string{"field": "ts_day", "keep": c.keep}), &set)
		mustDecode(t, mustCall(t, 200, "GET", path, shared.Token, nil), &got)
		if set.Keep != c.want || got.Keep != c.want {
			t.Errorf("keep %q: answered %q, stored %q, want %q", c.keep, set.Keep, got.Keep, c.want)
		}
	}
	name := uniq("isocat")
	var info struct {
		Properties map[string]string `json:"properties"`
	}
	mustDecode(t, mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": name,
		"warehouse": "s3://icehold-warehouse/" + name, "properties": map[string]string{"soft-delete.enabled": "true", "soft-delete.hold-period": "36h"}}), &info)
	if got := info.Properties["soft-delete.hold-period"]; got != "P1DT12H" {
		t.Errorf("catalog created with hold period 36h: %q, want P1DT12H", got)
	}
	mustDecode(t, mustCall(t, 200, "POST", "/lifecycle/v1/catalogs/"+name+"/properties", shared.Token,
		map[string]any{"updates": map[string]string{"soft-delete.hold-period": "2d"}}), &info)
	mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+name, shared.Token, nil), &info)
	if got := info.Properties["soft-delete.hold-period"]; got != "P2D" {
		t.Errorf("hold period set to 2d: %q, want P2D", got)
	}
}
