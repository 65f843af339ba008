package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	icecatalog "github.com/icehold/icehold/shared/catalog"
)

// Defect (soak seed 1072 step 201): a copy-on-write table's delete rewrites
// the manifest that added an overwrite's file, which it carries on as
// EXISTING in a manifest of its own; once the overwrite's snapshot expired
// (it left another manifest the current snapshot lists), the purge counted
// that live file nowhere: its final listing deleted it as "unreferenced".
// Every file the current snapshot reads is the purge's to count (SPEC §3).
func TestPurgeCountsTheLiveFilesOfACopyOnWriteTable(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := newNamespace(t, "cow")
	props := iceberg.Properties{"format-version": "2", "write.delete.mode": "copy-on-write",
		table.MaxSnapshotAgeMsKey: "3600000", table.MinSnapshotsToKeepKey: "1"}
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, "t"}, teamSchema, catalog.WithPartitionSpec(&teamSpec), catalog.WithProperties(props))
	if err != nil {
		t.Fatal(err)
	}
	days := []string{"2026-11-01", "2026-11-02"}
	tbl = appendRows(t, tbl, teamRows(t, []int32{1}, days, 2, 0))
	tbl = appendRows(t, tbl, teamRows(t, []int32{1}, days, 2, 100))
	// An overwrite of one row of the first append's first day: that file
	// is rewritten and two new files added (one manifest adds all three),
	// and the first append's other file is carried on as EXISTING in a
	// manifest the overwrite writes too.
	tx := tbl.NewTransaction()
	if err := tx.OverwriteTable(ctx, teamRows(t, []int32{1}, days, 1, 200), 100, nil,
		table.WithOverwriteFilter(iceberg.EqualTo(iceberg.Reference("v"), int64(0)))); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A delete that ends one of the overwrite's new files: the manifest
	// that added both is rewritten, the other carried on as EXISTING.
	tx = tbl.NewTransaction()
	if err := tx.Delete(ctx, iceberg.EqualTo(iceberg.Reference("v"), int64(200)), nil); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := srv.Partitions.ExpireSnapshots(ctx, shared.Catalog, icecatalog.Ident{Namespace: []string{ns}, Name: "t"}, tbl.Metadata().TableUUID().String(), time.Now().Add(2*time.Hour))
	if err != nil || res.Snapshots != 3 || res.Job == "" {
		t.Fatalf("expire: %+v %v, want the three snapshots before the delete expired", res, err)
	}
	waitJob(t, res.Job, "SUCCEEDED", time.Minute)
	tbl = loadTable(t, cat, ns, "t")
	live := snapshotFiles(t, tbl, tbl.CurrentSnapshot().SnapshotID)
	before := objectsUnder(t, srv, tbl.Location())
	j := waitJob(t, dropPurge(t, ns, "t").ID, "SUCCEEDED", time.Minute)
	assertNothingLeft(t, srv, j, tbl.Location(), before, 0)
	if len(live) == 0 {
		t.Fatal("the current snapshot reads no file")
	}
}
