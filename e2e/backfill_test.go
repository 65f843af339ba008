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
