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

// Defect (found by the simulation: "fatal error: concurrent map writes" in
// a snapshot expiry): expiry reads the retained manifests in parallel, and
// each reader adds the files it finds to what is kept under a lock, while
// the loop starting them marked each manifest kept without it. A table
// whose expiry retains several manifests crashed the process (a Lambda's
// whole invocation) at random. Run under -race (make test's race group):
// the detector names the write whatever the timing.
func TestExpiryReadsManifestsConcurrently(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := newNamespace(t, "exr")
	props := iceberg.Properties{"format-version": "2", table.MaxSnapshotAgeMsKey: "3600000", table.MinSnapshotsToKeepKey: "1"}
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, "t"}, teamSchema, catalog.WithPartitionSpec(&teamSpec), catalog.WithProperties(props))
	if err != nil {
		t.Fatal(err)
	}
	// Twenty appends: the last snapshot lists twenty manifests, all
	// retained; the nineteen before it expire. Two readers at a time: the
	// loop waits for a free one, and marks the next manifest kept while
	// the other still reads.
	for i := range 20 {
		tbl = appendRows(t, tbl, teamRows(t, []int32{1}, []string{"2026-11-01"}, 1, i*10))
	}
	p := *srv.Partitions // a copy: the shared server's own runs on
	p.Workers = 2
	res, err := p.ExpireSnapshots(ctx, shared.Catalog, icecatalog.Ident{Namespace: []string{ns}, Name: "t"}, tbl.Metadata().TableUUID().String(), time.Now().Add(2*time.Hour))
	if err != nil || res.Snapshots != 19 || res.Job == "" {
		t.Fatalf("expire: %+v %v, want the nineteen snapshots before the last expired", res, err)
	}
	waitJob(t, res.Job, "SUCCEEDED", time.Minute)
	if got := countRows(t, loadTable(t, cat, ns, "t")); got != 20 {
		t.Errorf("after the expiry the table reads %d rows, want the 20 appended", got)
	}
}
