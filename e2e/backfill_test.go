package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/server"
	icecat "github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

// Defect: the ownership backfill claimed warehouses, live tables and
// active jobs but not soft-deleted tables: such a table owned nothing, and
// a create at its location took the claim (whose purge then deletes the
// soft-deleted table's files). Now the backfill claims it and records the
// claim on the record, so the create is refused and an undrop carries it.
func TestBackfillClaimsSoftDeletedTables(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	srv, cat := ownServer(t, server.Options{Dir: memoryDir, DeleteWorkers: -1, ReconcileEvery: time.Hour})
	st := srv.Catalog.Store()
	demo := srv.Info.Catalog
	if err := cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	old, err := cat.CreateTable(ctx, table.Identifier{"ns", "old"}, eventSchema)
	if err != nil {
		t.Fatal(err)
	}
	old = appendRows(t, old, rows(t, 0, 10, false))
	// What a soft drop from before the ownership index left: a record
	// without a claim (the entry is made again without one, then dropped).
	e, err := srv.Catalog.DropTable(ctx, demo, icecat.Ident{Namespace: []string{"ns"}, Name: "old"})
	if err != nil {
		t.Fatal(err)
	}
	e.Hold = nil
	if _, err := st.WriteTables(ctx, demo, []store.TableWrite{{Entry: e}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SoftDelete(ctx, demo, e, store.SoftDeleted{PurgeAt: store.ExpiryTime(time.Now().AddDate(1, 0, 0))}); err != nil {
		t.Fatal(err)
	}

	rep, err := srv.Catalog.BackfillOwnership(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backfill: %+v", rep)
	_, err = cat.CreateTable(ctx, table.Identifier{"ns", "intruder"}, eventSchema, catalog.WithLocation(old.Location()))
	if err == nil || !strings.Contains(err.Error(), "soft-deleted table ns.old") {
		t.Fatalf("create at the soft-deleted table's location: %v, want a 409 naming it", err)
	}
	recs, err := st.SoftDeletedByName(ctx, demo, []string{"ns"}, "old")
	if err != nil || len(recs) != 1 || recs[0].Entry.Hold == nil {
		t.Fatalf("the record after the backfill: %+v (%v), want its claim on it", recs, err)
	}
	if again, err := srv.Catalog.BackfillOwnership(ctx); err != nil || len(again.Conflicts) != 0 || again.Tables+again.SoftDeleted != 0 {
		t.Errorf("a second backfill: %+v (%v), want nothing to do", again, err)
	}
	// The undrop carries the claim: the restored table owns its location.
	if _, err := st.Undrop(ctx, recs[0], recs[0].Entry); err != nil {
		t.Fatal(err)
	}
	back, err := st.GetTable(ctx, demo, []string{"ns"}, "old")
	if err != nil || back.Hold == nil || back.Hold.ID != recs[0].Entry.Hold.ID {
		t.Fatalf("the undropped entry: %+v (%v), want the record's claim", back, err)
	}
	probe := *back.Hold
	probe.ID = "probe"
	if owner, err := st.Conflict(ctx, probe); err != nil || owner.ID != back.Hold.ID || owner.SoftDeleted {
		t.Errorf("the claim after the undrop: %+v (%v), want the live table's", owner, err)
	}
}

// Defect (issue 30): the backfill claimed a moved table's former
// locations in one transaction with its location, and when one of them
// was an older table's, it claimed the location alone: the other former
// locations (which its snapshots still reach) stayed unowned, and another
// table could take them and purge its files. Now each free one is
// claimed; only the older owner's is left to it, and reported.
func TestBackfillClaimsEveryFreeFormerLocation(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	srv, cat := ownServer(t, server.Options{Dir: memoryDir, DeleteWorkers: -1, ReconcileEvery: time.Hour})
	st := srv.Catalog.Store()
	demo := srv.Info.Catalog
	info, err := srv.Catalog.GetCatalog(ctx, demo)
	if err != nil {
		t.Fatal(err)
	}
	wh := strings.TrimRight(info.Warehouse, "/") + "/ns"
	if err := cat.CreateNamespace(ctx, table.Identifier{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	m, err := cat.CreateTable(ctx, table.Identifier{"ns", "m"}, eventSchema, catalog.WithLocation(wh+"/a"))
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, m, rows(t, 0, 5, false))
	for _, to := range []string{"/b", "/c"} {
		st, body := callAt(t, srv.Info.RESTURL, "POST", "/v1/"+demo+"/namespaces/ns/tables/m", srv.Info.AdminToken,
			map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-location", "location": wh + to}}})
		if st != 200 {
			t.Fatalf("set-location %s: %d %s", to, st, body)
		}
		if m, err = cat.LoadTable(ctx, table.Identifier{"ns", "m"}); err != nil {
			t.Fatal(err)
		}
		appendRows(t, m, rows(t, 0, 5, false))
	}
	// What a table moved before the ownership index has: no claim.
	e, err := st.GetTable(ctx, demo, []string{"ns"}, "m")
	if err != nil || len(e.Extra) != 2 {
		t.Fatalf("the moved table: %+v (%v), want its two former locations held", e, err)
	}
	for _, h := range e.Holds() {
		if err := st.ReleaseClaim(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	bare := e
	bare.Hold, bare.Extra = nil, nil
	if _, err := st.WriteTables(ctx, demo, []store.TableWrite{{Entry: bare, Expected: e.MetadataLocation}}); err != nil {
		t.Fatal(err)
	}
	// An older owner of one former location (created now, its claim taken).
	if _, err := cat.CreateTable(ctx, table.Identifier{"ns", "o"}, eventSchema, catalog.WithLocation(wh+"/a")); err != nil {
		t.Fatal(err)
	}

	rep, err := srv.Catalog.BackfillOwnership(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("backfill: %+v", rep)
	bucket, key, _ := strings.Cut(strings.TrimPrefix(wh, "s3://"), "/")
	base, _, _ := strings.Cut(key, "/") // the warehouse's: the chain starts below it
	for at, want := range map[string]string{"/a": "o", "/b": "m", "/c": "m"} {
		owner, err := st.Conflict(ctx, store.Hold{ID: "probe", Bucket: bucket, Prefix: key + at, Based: true, Base: base})
		if err != nil || owner.Name != want {
			t.Errorf("owner of %s after the backfill: %+v (%v), want table %s", wh+at, owner, err, want)
		}
	}
	if len(rep.Conflicts) != 1 || !strings.Contains(rep.Conflicts[0], wh+"/a") {
		t.Errorf("conflicts %q, want the one former location table o owns", rep.Conflicts)
	}
}
