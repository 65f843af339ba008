package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/store"
)

// softCatalog makes a catalog with soft delete on (and props) and an
// iceberg-go client of it.
func softCatalog(t *testing.T, props map[string]string) (string, *rest.Catalog) {
	t.Helper()
	name := uniq("soft")
	p := map[string]string{"soft-delete.enabled": "true"}
	maps.Copy(p, props)
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": name, "warehouse": "s3://icehold-warehouse/" + name, "properties": p})
	cat, err := rest.NewCatalog(context.Background(), "icehold", shared.URL, rest.WithOAuthToken(shared.Token), rest.WithWarehouseLocation(name))
	if err != nil {
		t.Fatal(err)
	}
	return name, cat
}

type softList struct {
	Tables []softdelete.View `json:"tables"`
	Next   *string           `json:"next-page-token"`
}

func softDeleted(t *testing.T, cat, ns string) []softdelete.View {
	t.Helper()
	var l softList
	path := "/lifecycle/v1/catalogs/" + cat + "/soft-deleted-tables"
	if ns != "" {
		path += "?namespace=" + url.QueryEscape(ns)
	}
	mustDecode(t, mustCall(t, 200, "GET", path, shared.Token, nil), &l)
	return l.Tables
}

func lifecycleTablePath(cat, ns, name string) string {
	return "/lifecycle/v1/catalogs/" + cat + "/namespaces/" + ns + "/tables/" + name
}

// A soft drop hides the table and frees its name, touching no object; an
// undrop restores it exactly (uuid, metadata location, rows, grants).
func TestSoftDropAndUndrop(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	name, cat := softCatalog(t, nil)
	ns := uniq("sd")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl := writtenTable(t, cat, ns, "t", nil, true)
	rows := countRows(t, tbl)
	reader := grantTo(t, shared.Token, name, []authz.Privilege{authz.TableRead})
	before := bucketObjects(t, srv)
	tpath := "/v1/" + name + "/namespaces/" + ns + "/tables/t"

	mustCall(t, 204, "DELETE", tpath, shared.Token, nil)
	if st, _ := call(t, "GET", tpath, shared.Token, nil); st != 404 {
		t.Errorf("load after a soft drop: %d", st)
	}
	if st, _ := call(t, "HEAD", tpath, shared.Token, nil); st != 404 {
		t.Errorf("HEAD after a soft drop: %d", st)
	}
	var list struct {
		Identifiers []any `json:"identifiers"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/"+name+"/namespaces/"+ns+"/tables", shared.Token, nil), &list)
	if len(list.Identifiers) != 0 {
		t.Errorf("a soft-deleted table is listed: %v", list.Identifiers)
	}
	after := bucketObjects(t, srv)
	if len(after) != len(before) {
		t.Errorf("a soft drop changed the bucket: %d objects, was %d", len(after), len(before))
	}
	for k, etag := range before {
		if after[k] != etag {
			t.Errorf("a soft drop touched %s", k)
		}
	}
	recs := softDeleted(t, name, ns)
	if len(recs) != 1 || recs[0].TableUUID != tbl.Metadata().TableUUID().String() || recs[0].MetadataLocation != tbl.MetadataLocation() ||
		recs[0].DroppedBy != "local:admin" || recs[0].PurgeAt == "" || recs[0].HoldPeriod != "P7D" {
		t.Fatalf("soft-deleted listing: %+v", recs)
	}

	// The name is free: a new table takes it; the undrop is then a 409
	// naming the holder; undrop under another name works.
	fresh, err := cat.CreateTable(ctx, table.Identifier{ns, "t"}, eventSchema)
	if err != nil {
		t.Fatalf("create at a soft-deleted name: %v", err)
	}
	status, body := call(t, "POST", lifecycleTablePath(name, ns, "t")+"/undrop", shared.Token, map[string]any{})
	if status != 409 || !strings.Contains(string(body), fresh.Metadata().TableUUID().String()) || !strings.Contains(string(body), `"holder"`) {
		t.Errorf("undrop onto a taken name: %d %s, want a 409 naming the holder", status, body)
	}
	var back struct {
		Namespace        []string `json:"namespace"`
		Name             string   `json:"name"`
		TableUUID        string   `json:"table-uuid"`
		MetadataLocation string   `json:"metadata-location"`
	}
	mustDecode(t, mustCall(t, 200, "POST", lifecycleTablePath(name, ns, "t")+"/undrop", shared.Token,
		map[string]any{"rename-to": map[string]any{"namespace": []string{ns}, "name": "t_restored"}}), &back)
	if back.TableUUID != tbl.Metadata().TableUUID().String() || back.MetadataLocation != tbl.MetadataLocation() || back.Name != "t_restored" {
		t.Errorf("undrop answer %+v", back)
	}
	// Grants are the catalog's (icehold has no table-level grants): the
	// reader granted before the drop reads the restored table.
	readerCat, err := rest.NewCatalog(ctx, "icehold", shared.URL, rest.WithOAuthToken(reader), rest.WithWarehouseLocation(name))
	if err != nil {
		t.Fatal(err)
	}
	restored, err := readerCat.LoadTable(ctx, table.Identifier{ns, "t_restored"})
	if err != nil {
		t.Fatalf("the reader cannot load the restored table: %v", err)
	}
	if n := countRows(t, restored); n != rows || restored.Metadata().TableUUID() != tbl.Metadata().TableUUID() {
		t.Errorf("the restored table scans %d rows (want %d), uuid %s", n, rows, restored.Metadata().TableUUID())
	}
	if len(softDeleted(t, name, ns)) != 0 {
		t.Errorf("the record survived the undrop")
	}
	// Its location came back with it: nobody else may take it.
	if st, body := call(t, "POST", "/v1/"+name+"/namespaces/"+ns+"/register", shared.Token,
		map[string]any{"name": "copy", "metadata-location": tbl.MetadataLocation()}); st != 409 {
		t.Errorf("register a copy of the undropped table: %d %s", st, body)
	}
}

// Generations: two soft-deleted tables of one name are listed apart, an
// undrop without a uuid is a 409 listing both, with a uuid it restores that
// one. An undrop racing a create of the same name: exactly one wins.
func TestSoftDeletedGenerationsAndRaces(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	name, cat := softCatalog(t, nil)
	ns := uniq("gen")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tpath := "/v1/" + name + "/namespaces/" + ns + "/tables"
	var uuids []string
	for range 2 {
		out := mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": "g", "schema": rawSchema})
		var res struct {
			Metadata struct {
				UUID string `json:"table-uuid"`
			} `json:"metadata"`
		}
		mustDecode(t, out, &res)
		uuids = append(uuids, res.Metadata.UUID)
		mustCall(t, 204, "DELETE", tpath+"/g", shared.Token, nil)
	}
	recs := softDeleted(t, name, ns)
	if len(recs) != 2 || recs[0].TableUUID == recs[1].TableUUID {
		t.Fatalf("two generations: %+v", recs)
	}
	status, body := call(t, "POST", lifecycleTablePath(name, ns, "g")+"/undrop", shared.Token, map[string]any{})
	if status != 409 || !strings.Contains(string(body), uuids[0]) || !strings.Contains(string(body), uuids[1]) || !strings.Contains(string(body), `"generations"`) {
		t.Errorf("undrop of an ambiguous name: %d %s", status, body)
	}
	mustCall(t, 200, "POST", lifecycleTablePath(name, ns, "g")+"/undrop", shared.Token, map[string]any{"table-uuid": uuids[0]})
	var loaded struct {
		Metadata struct {
			UUID string `json:"table-uuid"`
		} `json:"metadata"`
	}
	mustDecode(t, mustCall(t, 200, "GET", tpath+"/g", shared.Token, nil), &loaded)
	if loaded.Metadata.UUID != uuids[0] {
		t.Errorf("undrop with a uuid restored %s, want %s", loaded.Metadata.UUID, uuids[0])
	}

	// Races: undrop vs create of the same name, 20 times.
	for round := range 20 {
		n := fmt.Sprintf("race%d", round)
		mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": n, "schema": rawSchema})
		mustCall(t, 204, "DELETE", tpath+"/"+n, shared.Token, nil)
		var wg sync.WaitGroup
		var undrop, create int
		wg.Add(2)
		go func() {
			defer wg.Done()
			undrop, _ = call(t, "POST", lifecycleTablePath(name, ns, n)+"/undrop", shared.Token, map[string]any{})
		}()
		go func() {
			defer wg.Done()
			create, _ = call(t, "POST", tpath, shared.Token, map[string]any{"name": n, "schema": rawSchema})
		}()
		wg.Wait()
		won := 0
		for _, st := range []int{undrop, create} {
			switch st {
			case 200:
				won++
			case 409:
			default:
				t.Errorf("round %d: answer %d", round, st)
			}
		}
		gens := 0
		for _, r := range softDeleted(t, name, ns) {
			if r.Name == n {
				gens++
			}
		}
		// Exactly one holds the name; the loser changed nothing (a lost
		// undrop leaves its record, a lost create leaves no table).
		if won != 1 || (undrop == 200) == (gens == 1) {
			t.Errorf("round %d: undrop %d, create %d, %d records left", round, undrop, create, gens)
		}
	}
}

// Force purge on a soft-delete catalog needs TABLE_DROP_WITH_PURGE; purge-now
// ends a record into a purge job; legal hold blocks purge-now and a drop
// with purge of an active table.
func TestForcePurgePurgeNowAndLegalHold(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	name, cat := softCatalog(t, nil)
	ns := uniq("force")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tpath := "/v1/" + name + "/namespaces/" + ns + "/tables"
	mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": "f", "schema": rawSchema})
	dropper := grantTo(t, shared.Token, name, []authz.Privilege{authz.TableDrop, authz.TableRead})
	if st, _ := call(t, "DELETE", tpath+"/f?purgeRequested=true", dropper, nil); st != 403 {
		t.Errorf("force purge without TABLE_DROP_WITH_PURGE: %d", st)
	}
	mustCall(t, 200, "GET", tpath+"/f", shared.Token, nil)
	mustCall(t, 204, "DELETE", tpath+"/f?purgeRequested=true", shared.Token, nil)
	if len(softDeleted(t, name, ns)) != 0 {
		t.Errorf("a force purge left a soft-deleted record")
	}

	// Legal hold on an active table: no drop with purge; a soft drop keeps it.
	mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": "h", "schema": rawSchema, "properties": map[string]string{"icehold.legal-hold": "true"}})
	if st, body := call(t, "DELETE", tpath+"/h?purgeRequested=true", shared.Token, nil); st != 409 || !strings.Contains(string(body), "LegalHold") {
		t.Errorf("drop with purge of a legal-held table: %d %s", st, body)
	}
	mustCall(t, 204, "DELETE", tpath+"/h", shared.Token, nil)
	recs := softDeleted(t, name, ns)
	if len(recs) != 1 || !recs[0].LegalHold {
		t.Fatalf("the soft-deleted legal-held table: %+v", recs)
	}
	if st, body := call(t, "POST", lifecycleTablePath(name, ns, "h")+"/purge-now", shared.Token, map[string]any{}); st != 409 {
		t.Errorf("purge-now under legal hold: %d %s", st, body)
	}
	hold := "/lifecycle/v1/catalogs/" + name + "/soft-deleted-tables/" + recs[0].TableUUID + "/legal-hold"
	mustCall(t, 200, "POST", hold, shared.Token, map[string]any{"enabled": false})
	var j jobJSON
	mustDecode(t, mustCall(t, 202, "POST", lifecycleTablePath(name, ns, "h")+"/purge-now", shared.Token, map[string]any{}), &j)
	if j.ID == "" || len(softDeleted(t, name, ns)) != 0 {
		t.Fatalf("purge-now: job %+v, records %v", j, softDeleted(t, name, ns))
	}
	var done jobJSON
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+name+"/purge-jobs/"+j.ID, shared.Token, nil), &done)
		if done.State == "SUCCEEDED" || time.Now().After(deadline) {
			break
		}
	}
	if done.State != "SUCCEEDED" || done.FilesDeleted == 0 {
		t.Errorf("the purge-now job ended %s with %d files deleted", done.State, done.FilesDeleted)
	}
}

// The hold period: the table's property over the namespace's over the
// catalog's; malformed durations are refused where they are set.
func TestHoldPeriodInheritance(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	name, cat := softCatalog(t, map[string]string{"soft-delete.hold-period": "P3D"})
	nsCat, nsOwn := uniq("inh"), uniq("inh")
	if err := cat.CreateNamespace(ctx, table.Identifier{nsCat}, nil); err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(ctx, table.Identifier{nsOwn}, map[string]string{"soft-delete.hold-period": "PT12H"}); err != nil {
		t.Fatal(err)
	}
	mk := func(ns, tbl string, props map[string]string) {
		body := map[string]any{"name": tbl, "schema": rawSchema}
		if props != nil {
			body["properties"] = props
		}
		mustCall(t, 200, "POST", "/v1/"+name+"/namespaces/"+ns+"/tables", shared.Token, body)
		mustCall(t, 204, "DELETE", "/v1/"+name+"/namespaces/"+ns+"/tables/"+tbl, shared.Token, nil)
	}
	mk(nsCat, "a", nil)
	mk(nsOwn, "b", nil)
	mk(nsOwn, "c", map[string]string{"soft-delete.hold-period": "P30D"})
	want := map[string]string{"a": "P3D", "b": "PT12H", "c": "P30D"}
	for _, ns := range []string{nsCat, nsOwn} {
		for _, r := range softDeleted(t, name, ns) {
			if r.HoldPeriod != want[r.Name] {
				t.Errorf("%s: hold %s, want %s", r.Name, r.HoldPeriod, want[r.Name])
			}
			dropped, _ := time.Parse(time.RFC3339, r.DroppedAt)
			purge, _ := time.Parse(time.RFC3339, r.PurgeAt)
			if d := purge.Sub(dropped); r.Name == "b" && d != 12*time.Hour {
				t.Errorf("b: purge-at %v after the drop", d)
			}
		}
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/" + name + "/namespaces", `{"namespace":["bad1"],"properties":{"soft-delete.hold-period":"7 days"}}`},
		{"POST", "/v1/" + name + "/namespaces/" + nsOwn + "/properties", `{"updates":{"soft-delete.hold-period":"P"}}`},
		{"POST", "/v1/" + name + "/namespaces/" + nsOwn + "/tables", `{"name":"bad","schema":` + schemaJSON + `,"properties":{"soft-delete.hold-period":"-1d"}}`},
		{"POST", "/v1/" + name + "/namespaces/" + nsOwn + "/tables", `{"name":"bad2","schema":` + schemaJSON + `,"properties":{"icehold.legal-hold":"maybe"}}`},
		{"POST", "/lifecycle/v1/catalogs/" + name + "/properties", `{"updates":{"soft-delete.hold-period":"P1Y"}}`},
	} {
		if st, body := call(t, c.method, c.path, shared.Token, c.body); st != 400 {
			t.Errorf("%s %s with %s: %d %s, want 400", c.method, c.path, c.body, st, body)
		}
	}
	// A table property set by a commit is validated too.
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces/"+nsOwn+"/tables", shared.Token, map[string]any{"name": "d", "schema": rawSchema})
	if st, _ := call(t, "POST", "/v1/"+name+"/namespaces/"+nsOwn+"/tables/d", shared.Token,
		`{"requirements":[],"updates":[{"action":"set-properties","updates":{"soft-delete.hold-period":"soon"}}]}`); st != 400 {
		t.Errorf("a commit setting a malformed hold period: %d", st)
	}
}

// The hold-expiry sweep on a controlled clock: exactly the records past
// their purge time go (their files to the purge pipeline), legal-held ones
// stay, a new table that took the name is never touched.
func TestHoldExpirySweep(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	name, cat := softCatalog(t, map[string]string{"soft-delete.hold-period": "P1D"})
	ns := uniq("exp")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tpath := "/v1/" + name + "/namespaces/" + ns + "/tables"
	mk := func(tbl string, props map[string]string) string {
		body := map[string]any{"name": tbl, "schema": rawSchema}
		if props != nil {
			body["properties"] = props
		}
		out := mustCall(t, 200, "POST", tpath, shared.Token, body)
		var res struct {
			Metadata struct {
				UUID string `json:"table-uuid"`
			} `json:"metadata"`
		}
		mustDecode(t, out, &res)
		mustCall(t, 204, "DELETE", tpath+"/"+tbl, shared.Token, nil)
		return res.Metadata.UUID
	}
	short := mk("short", map[string]string{"soft-delete.hold-period": "PT1H"})
	mk("long", nil)
	held := mk("held", map[string]string{"soft-delete.hold-period": "PT1H", "icehold.legal-hold": "true"})
	// The name "short" is taken again by a new table.
	mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": "short", "schema": rawSchema})

	now := time.Now()
	sweep := &softdelete.Service{Catalog: srv.Catalog, Purge: srv.Purge, Now: func() time.Time { return now.Add(2 * time.Hour) }}
	rep, err := sweep.Expire(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, r := range softDeleted(t, name, ns) {
		left[r.Name] = true
	}
	if left["short"] || !left["long"] || !left["held"] {
		t.Errorf("after 2 hours: left %v (report %+v), want long and held", left, rep)
	}
	mustCall(t, 200, "GET", tpath+"/short", shared.Token, nil) // the new table is untouched
	jobs := jobsIn(t, name, ns)
	if len(jobs) != 1 || jobs[0].TableUUID != short || jobs[0].Table != "short" {
		t.Fatalf("purge jobs after the sweep: %+v", jobs)
	}
	j := waitJobIn(t, name, jobs[0].ID, "SUCCEEDED")
	if j.FilesDeleted != 1 {
		t.Errorf("the expired table's purge deleted %d files, want its metadata file", j.FilesDeleted)
	}
	if _, err := (&softdelete.Service{Catalog: srv.Catalog, Now: func() time.Time { return now.Add(30 * 24 * time.Hour) }}).Expire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	left = map[string]bool{}
	for _, r := range softDeleted(t, name, ns) {
		left[r.Name] = true
	}
	if !left["held"] || left["long"] || len(left) != 1 {
		t.Errorf("after 30 days: left %v, want only the legal-held one (%s)", left, held)
	}
}

func jobsIn(t *testing.T, cat, ns string) []jobJSON {
	t.Helper()
	var res struct {
		Jobs []jobJSON `json:"jobs"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+cat+"/purge-jobs?namespace="+url.QueryEscape(ns), shared.Token, nil), &res)
	return res.Jobs
}

func waitJobIn(t *testing.T, cat, id, state string) jobJSON {
	t.Helper()
	var j jobJSON
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+cat+"/purge-jobs/"+id, shared.Token, nil), &j)
		if j.State == state || time.Now().After(deadline) {
			return j
		}
	}
}

// Expired records are worked off in bounded runs (600 in runs of 200); two
// sweeps running at once end each record once.
func TestHoldExpiryBoundedAndConcurrent(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	srv, _ := ownServer(t, server.Options{Dir: memoryDir, DeleteWorkers: -1, ReconcileEvery: time.Hour})
	st := srv.Catalog.Store()
	if _, err := srv.Catalog.CreateCatalog(authz.WithPrincipal(ctx, "local:admin"), "bulk", "s3://icehold-warehouse/bulk",
		map[string]string{"soft-delete.enabled": "true", "soft-delete.purge-on-expiry": "false"}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Catalog.CreateNamespace(ctx, "bulk", []string{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// Entries written 40 to a transaction, then soft-deleted one by one (as
	// drops do), all due an hour after start.
	records := func(prefix string, n int) {
		var batch []store.TableWrite
		flush := func() {
			if _, err := st.WriteTables(ctx, "bulk", batch); err != nil {
				t.Fatal(err)
			}
			for _, w := range batch {
				if err := st.SoftDelete(ctx, "bulk", w.Entry, store.SoftDeleted{PurgeAt: store.ExpiryTime(start.Add(time.Hour)), HoldPeriod: "PT1H"}); err != nil {
					t.Fatal(err)
				}
			}
			batch = batch[:0]
		}
		for i := range n {
			batch = append(batch, store.TableWrite{Entry: store.TableEntry{Namespace: []string{"ns"}, Name: fmt.Sprintf("%s%05d", prefix, i),
				MetadataLocation: fmt.Sprintf("s3://icehold-warehouse/bulk/%s%d/m.json", prefix, i), TableUUID: fmt.Sprintf("%s-%08d", prefix, i)}})
			if len(batch) == 40 {
				flush()
			}
		}
		if len(batch) > 0 {
			flush()
		}
	}
	// 600 records: the local DynamoDB (minidyn) spends time in proportion to
	// the table's size on every request, so 5,000 would take minutes here.
	records("r", 600)
	sweep := &softdelete.Service{Catalog: srv.Catalog, Now: func() time.Time { return start.Add(2 * time.Hour) }}
	total := 0
	for run := 1; ; run++ {
		rep, err := sweep.Expire(ctx, 200)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: %d expired, more: %v", run, rep.Expired, rep.More)
		total += rep.Expired
		if !rep.More {
			break
		}
		if run > 10 {
			t.Fatal("the sweep does not finish")
		}
	}
	if total != 600 {
		t.Errorf("%d records expired, want 600", total)
	}
	// Two sweeps at once over 200 records: each record once.
	records("c", 200)
	var wg sync.WaitGroup
	reps := make([]softdelete.ExpiryReport, 2)
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := sweep.Expire(ctx, 0)
			if err != nil {
				t.Error(err)
			}
			reps[i] = r
		}()
	}
	wg.Wait()
	if reps[0].Expired+reps[1].Expired != 200 {
		t.Errorf("two concurrent sweeps expired %d + %d records, want 200 in all", reps[0].Expired, reps[1].Expired)
	}
	if left, _, _ := st.ListSoftDeleted(ctx, "bulk", nil, "", 10); len(left) != 0 {
		t.Errorf("%d records left", len(left))
	}
}

// tableEvents reads the local event bus (events.log) for one table uuid:
// the types in order, each checked for the documented fields.
func tableEvents(t *testing.T, uuid string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(localOnly(t).Info.StateDir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e struct {
			Type   string `json:"detail-type"`
			Source string `json:"source"`
			Detail struct {
				Catalog   string   `json:"catalog"`
				Namespace []string `json:"namespace"`
				Table     string   `json:"table"`
				TableUUID string   `json:"table-uuid"`
				Actor     string   `json:"actor"`
				Time      string   `json:"time"`
			} `json:"detail"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Detail.TableUUID != uuid {
			continue
		}
		if e.Source != "icehold" || e.Detail.Catalog == "" || len(e.Detail.Namespace) == 0 || e.Detail.Table == "" || e.Detail.Actor == "" || e.Detail.Time == "" {
			t.Errorf("event lacks actor/catalog/identifier/uuid/time: %s", line)
		}
		types = append(types, e.Type)
	}
	return types
}

// Each soft-delete step publishes its event once, with actor, catalog,
// identifier, table uuid and time.
func TestSoftDeleteEvents(t *testing.T) {
	localOnly(t)
	name, _ := softCatalog(t, nil)
	ns := uniq("ev")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	tpath := "/v1/" + name + "/namespaces/" + ns + "/tables"
	out := mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": "e", "schema": rawSchema})
	var res struct {
		Metadata struct {
			UUID string `json:"table-uuid"`
		} `json:"metadata"`
	}
	mustDecode(t, out, &res)
	uuid := res.Metadata.UUID
	mustCall(t, 204, "DELETE", tpath+"/e", shared.Token, nil)
	mustCall(t, 200, "POST", lifecycleTablePath(name, ns, "e")+"/undrop", shared.Token, map[string]any{})
	mustCall(t, 204, "DELETE", tpath+"/e", shared.Token, nil)
	hold := "/lifecycle/v1/catalogs/" + name + "/soft-deleted-tables/" + uuid + "/legal-hold"
	mustCall(t, 200, "POST", hold, shared.Token, map[string]any{"enabled": true})
	mustCall(t, 200, "POST", hold, shared.Token, map[string]any{"enabled": true}) // no change: no event
	mustCall(t, 200, "POST", hold, shared.Token, map[string]any{"enabled": false})
	var j jobJSON
	mustDecode(t, mustCall(t, 202, "POST", lifecycleTablePath(name, ns, "e")+"/purge-now", shared.Token, map[string]any{}), &j)
	waitJobIn(t, name, j.ID, "SUCCEEDED")
	want := []string{"TableSoftDeleted", "TableUndropped", "TableSoftDeleted", "LegalHoldChanged", "LegalHoldChanged",
		"TablePermanentlyDeleted", "PurgeStarted", "PurgeCompleted"}
	if got := eventually(func() []string { return tableEvents(t, uuid) }, func(got []string) bool { return slices.Equal(got, want) }); !slices.Equal(got, want) {
		t.Errorf("events: %v\nwant    %v", got, want)
	}
}
