package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

var eventSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: false},
	iceberg.NestedField{ID: 2, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz, Required: false},
	iceberg.NestedField{ID: 3, Name: "region", Type: iceberg.PrimitiveTypes.String, Required: false},
)

var eventSpec = iceberg.NewPartitionSpec(
	iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}},
	iceberg.PartitionField{SourceIDs: []int{3}, FieldID: 1001, Name: "region", Transform: iceberg.IdentityTransform{}},
)

// rows builds an Arrow table of n events starting at id from, spread over
// days and regions; withNote adds the column the schema evolution adds.
func rows(t *testing.T, from, n int, withNote bool) arrow.Table {
	t.Helper()
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	if withNote {
		fields = append(fields, arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true})
	}
	var b strings.Builder
	b.WriteString("[")
	for i := from; i < from+n; i++ {
		if i > from {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id": %d, "ts": "2026-09-%02dT10:00:00Z", "region": "%s"`, i, 10+i%3, []string{"eu", "us"}[i%2])
		if withNote {
			fmt.Fprintf(&b, `, "note": "n%d"`, i)
		}
		b.WriteString("}")
	}
	b.WriteString("]")
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, arrow.NewSchema(fields, nil), strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("build rows: %v", err)
	}
	defer rec.Release()
	return array.NewTableFromRecords(rec.Schema(), []arrow.Record{rec})
}

func appendRows(t *testing.T, tbl *table.Table, data arrow.Table) *table.Table {
	t.Helper()
	defer data.Release()
	tx := tbl.NewTransaction()
	if err := tx.AppendTable(context.Background(), data, 1000, nil); err != nil {
		t.Fatalf("append: %v", err)
	}
	out, err := tx.Commit(context.Background())
	if err != nil {
		t.Fatalf("commit append: %v", err)
	}
	return out
}

func countRows(t *testing.T, tbl *table.Table) int64 {
	t.Helper()
	res, err := tbl.Scan().ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer res.Release()
	return res.NumRows()
}

// A partitioned table's life through the REST catalog: appends, schema
// evolution, scan, rename, register, multi-table commit.
func TestTableLifeThroughRESTCatalog(t *testing.T) {
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := table.Identifier{uniq("life")}
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{ns[0], "events"}
	tbl, err := cat.CreateTable(ctx, ident, eventSchema, catalog.WithPartitionSpec(&eventSpec))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !strings.Contains(tbl.Location(), "/events-"+tbl.Metadata().TableUUID().String()) {
		t.Errorf("location %s is not unique per table uuid", tbl.Location())
	}

	tbl = appendRows(t, tbl, rows(t, 0, 10, false))
	tbl = appendRows(t, tbl, rows(t, 10, 10, false))

	tx := tbl.NewTransaction()
	if err := tx.UpdateSchema(true, false).AddColumn([]string{"note"}, iceberg.PrimitiveTypes.String, "", false, nil).Commit(); err != nil {
		t.Fatalf("evolve schema: %v", err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatalf("commit schema: %v", err)
	}
	tbl = appendRows(t, tbl, rows(t, 20, 5, true))

	loaded, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(loaded.Metadata().Snapshots()); n != 3 {
		t.Errorf("snapshots = %d, want 3 (three appends)", n)
	}
	if _, ok := loaded.Schema().FindFieldByName("note"); !ok {
		t.Errorf("evolved column missing from loaded schema")
	}
	if n := countRows(t, loaded); n != 25 {
		t.Errorf("scanned %d rows, want 25", n)
	}

	renamed := table.Identifier{ns[0], "events_renamed"}
	if _, err := cat.RenameTable(ctx, ident, renamed); err != nil {
		t.Fatalf("rename: %v", err)
	}
	if _, err := cat.LoadTable(ctx, ident); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("old name after rename: err = %v, want ErrNoSuchTable", err)
	}
	afterRename, err := cat.LoadTable(ctx, renamed)
	if err != nil {
		t.Fatalf("load renamed: %v", err)
	}
	if afterRename.MetadataLocation() != loaded.MetadataLocation() {
		t.Errorf("rename changed the metadata pointer")
	}

	// Register takes a table's metadata back into the catalog: here after a
	// drop that kept the files (a live table's location is its own: a copy
	// of it is refused, see ownership_test.go).
	if err := cat.DropTable(ctx, renamed); err != nil {
		t.Fatalf("drop: %v", err)
	}
	copyIdent := table.Identifier{ns[0], "events_copy"}
	reg, err := cat.RegisterTable(ctx, copyIdent, afterRename.MetadataLocation())
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	if n := countRows(t, reg); n != 25 {
		t.Errorf("registered table scans %d rows, want 25", n)
	}
	renamed = table.Identifier{ns[0], "events_b"}
	if _, err := cat.CreateTable(ctx, renamed, eventSchema, catalog.WithPartitionSpec(&eventSpec)); err != nil {
		t.Fatalf("create b: %v", err)
	}

	t.Run("multi-table commit is atomic", func(t *testing.T) {
		a, _ := cat.LoadTable(ctx, renamed)
		b, _ := cat.LoadTable(ctx, copyIdent)
		mt, err := catalog.NewMultiTableTransaction(cat)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range []*table.Table{a, b} {
			tx := tb.NewTransaction()
			if err := tx.SetProperties(iceberg.Properties{"owner": "both"}); err != nil {
				t.Fatal(err)
			}
			if err := mt.AddTransaction(tx); err != nil {
				t.Fatal(err)
			}
		}
		if err := mt.Commit(ctx); err != nil {
			t.Fatalf("multi-table commit: %v", err)
		}
		for _, id := range []table.Identifier{renamed, copyIdent} {
			tb, _ := cat.LoadTable(ctx, id)
			if tb.Properties()["owner"] != "both" {
				t.Errorf("%v: owner = %q after multi-table commit", id, tb.Properties()["owner"])
			}
		}

		// A stale transaction on one table fails the whole commit.
		staleA, _ := cat.LoadTable(ctx, renamed)
		freshB, _ := cat.LoadTable(ctx, copyIdent)
		appendRows(t, staleA, rows(t, 100, 2, false)) // moves a's main branch
		mt, _ = catalog.NewMultiTableTransaction(cat)
		txA := staleA.NewTransaction()
		_ = txA.AppendTable(ctx, rows(t, 200, 2, false), 1000, nil)
		txB := freshB.NewTransaction()
		_ = txB.SetProperties(iceberg.Properties{"owner": "only-b"})
		_ = mt.AddTransaction(txA)
		_ = mt.AddTransaction(txB)
		if err := mt.Commit(ctx); !errors.Is(err, table.ErrCommitFailed) {
			t.Fatalf("stale multi-table commit: err = %v, want commit failed", err)
		}
		b2, _ := cat.LoadTable(ctx, copyIdent)
		if b2.MetadataLocation() != freshB.MetadataLocation() || b2.Properties()["owner"] != "both" {
			t.Errorf("table b changed although the transaction failed")
		}
		a2, _ := cat.LoadTable(ctx, renamed)
		if n := countRows(t, a2); n != 2 {
			t.Errorf("table a has %d rows, want 2 (only the separate append)", n)
		}
	})
}
