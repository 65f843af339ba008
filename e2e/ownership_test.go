package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/store"
)

// under lists the bucket's objects (key → ETag) under a location prefix.
func under(t *testing.T, loc string) map[string]string {
	t.Helper()
	prefix := strings.TrimRight(strings.Replace(strings.Replace(loc, "s3a://", "s3://", 1), "s3n://", "s3://", 1), "/") + "/"
	out := map[string]string{}
	for k, etag := range bucketObjects(t, localOnly(t)) {
		if strings.HasPrefix(k, prefix) {
			out[k] = etag
		}
	}
	return out
}

func sameObjects(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, etag := range before {
		if after[k] != etag {
			t.Errorf("%s: %s was deleted or changed", what, k)
		}
	}
}

// Defect: a table registered from a live table's metadata purged the live
// table's files. Now the register is refused (the location is owned), from
// the same catalog and from another one; and a copy that predates the
// ownership index owns nothing once backfilled, so its purge deletes none
// of the live table's objects and says so in its counters.
func TestRegisteredCopyNeverPurgesTheLiveTable(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := newNamespace(t, "owner")
	src := writtenTable(t, cat, ns, "src", nil, true)
	rowsBefore := countRows(t, src)
	before := under(t, src.Location())
	if len(before) == 0 {
		t.Fatal("the source table has no objects")
	}

	t.Run("register a copy in the same catalog: 409 naming the owner", func(t *testing.T) {
		status, body := call(t, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/register", shared.Token,
			map[string]any{"name": "copy", "metadata-location": src.MetadataLocation()})
		if status != 409 {
			t.Fatalf("register a copy of a live table: %d %s, want 409", status, body)
		}
		typ, _, msg := errorModel(t, body)
		if typ != "LocationOwnedException" || !strings.Contains(msg, ns+".src") {
			t.Errorf("409 %s does not name the owner: %s", typ, msg)
		}
		if st, _ := call(t, "GET", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/copy", shared.Token, nil); st != 404 {
			t.Errorf("the refused copy exists: %d", st)
		}
	})

	t.Run("register a copy in another catalog: 400, outside its warehouse", func(t *testing.T) {
		other := uniq("sandbox")
		mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": other, "warehouse": "s3://icehold-warehouse/" + other})
		mustCall(t, 200, "POST", "/v1/"+other+"/namespaces", shared.Token, map[string]any{"namespace": []string{"ns"}})
		status, body := call(t, "POST", "/v1/"+other+"/namespaces/ns/register", shared.Token,
			map[string]any{"name": "copy", "metadata-location": src.MetadataLocation()})
		if status != 400 {
			t.Fatalf("register a copy into another catalog: %d %s, want 400", status, body)
		}
		if _, _, msg := errorModel(t, body); !strings.Contains(msg, "outside the catalog's warehouse") {
			t.Errorf("400 does not say the location is outside the warehouse: %s", msg)
		}
	})

	t.Run("a copy from before the ownership index purges nothing of the source", func(t *testing.T) {
		// What the landed code let a user make: a second entry on src's metadata.
		st := srv.Catalog.Store()
		entry := store.TableEntry{
			Namespace: []string{ns}, Name: "legacy_copy", MetadataLocation: src.MetadataLocation(),
			TableUUID: src.Metadata().TableUUID().String(), CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
		}
		if _, err := st.WriteTables(ctx, shared.Catalog, []store.TableWrite{{Entry: entry}}); err != nil {
			t.Fatal(err)
		}
		rep, err := srv.Catalog.BackfillOwnership(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c := strings.Join(rep.Conflicts, "\n"); !strings.Contains(c, "legacy_copy") || !strings.Contains(c, ns+".src") {
			t.Errorf("backfill did not report the copy as owning nothing: %+v", rep)
		}
		data, meta := reachable(t, src)
		job := waitJob(t, dropPurge(t, ns, "legacy_copy").ID, "SUCCEEDED", time.Minute)
		sameObjects(t, "purge of a copy", before, under(t, src.Location()))
		if job.FilesDeleted != 0 || job.FilesSkipped != int64(len(data)+len(meta)) {
			t.Errorf("counters: deleted %d skipped %d, want 0 and %d (every reachable file skipped)", job.FilesDeleted, job.FilesSkipped, len(data)+len(meta))
		}
	})

	again, err := cat.LoadTable(ctx, table.Identifier{ns, "src"})
	if err != nil {
		t.Fatalf("the source is gone: %v", err)
	}
	if n := countRows(t, again); n != rowsBefore {
		t.Errorf("the source scans %d rows, want %d", n, rowsBefore)
	}
	sameObjects(t, "source after everything", before, under(t, src.Location()))
}

var citySchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64},
	iceberg.NestedField{ID: 2, Name: "city", Type: iceberg.PrimitiveTypes.String},
)

var citySpec = iceberg.NewPartitionSpec(
	iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "city", Transform: iceberg.IdentityTransform{}},
)

var cities = []string{"München", "New York", "a/b", "50%off"}

// cityRows builds n rows over the cities (escaped in partition paths).
func cityRows(t *testing.T, from, n int) arrow.Table {
	t.Helper()
	fields := []arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	var b strings.Builder
	b.WriteString("[")
	for i := from; i < from+n; i++ {
		if i > from {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id": %d, "city": %q}`, i, cities[i%len(cities)])
	}
	b.WriteString("]")
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, arrow.NewSchema(fields, nil), strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	return array.NewTableFromRecords(rec.Schema(), []arrow.Record{rec})
}

// Defect: object keys were URL-decoded, so escaped partition paths were
// "deleted" under keys that do not exist and the job SUCCEEDED with the data
// still there.
func TestPurgeDeletesEscapedPartitionPaths(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := newNamespace(t, "escaped")
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, "cities"}, citySchema, catalog.WithPartitionSpec(&citySpec))
	if err != nil {
		t.Fatal(err)
	}
	tbl = appendRows(t, tbl, cityRows(t, 0, 8))
	tbl = appendRows(t, tbl, cityRows(t, 8, 8))
	data, meta := reachable(t, tbl)
	objs := under(t, tbl.Location())
	escaped := 0
	for k := range objs {
		if strings.Contains(k, "%C3%BC") || strings.Contains(k, "%2F") || strings.Contains(k, "%25") || strings.Contains(k, "New+York") {
			escaped++
		}
	}
	if escaped < 8 {
		t.Fatalf("only %d objects with escaped partition values: %v", escaped, objs)
	}
	for p := range data {
		if _, ok := objs[p]; !ok {
			t.Fatalf("a data file is not in the bucket under its manifest path: %s", p)
		}
	}
	job := waitJob(t, dropPurge(t, ns, "cities").ID, "SUCCEEDED", time.Minute)
	if left := under(t, tbl.Location()); len(left) != 0 {
		t.Errorf("%d objects left under the location after the purge: %v", len(left), left)
	}
	if want := int64(len(data) + len(meta)); job.FilesDeleted != want || job.FilesSkipped != 0 {
		t.Errorf("files-deleted %d skipped %d, want %d (%d data files, %d metadata) and 0", job.FilesDeleted, job.FilesSkipped, want, len(data), len(meta))
	}
}

// Defect: a table whose metadata says s3a:// was not purged at all (the
// scope stayed s3a:// while files were normalized to s3://).
func TestPurgeOfAnS3ATable(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := newNamespace(t, "hadoop")
	tbl, loc := s3aTable(t, cat, ns)
	if !strings.HasPrefix(tbl.MetadataLocation(), "s3a://") {
		t.Fatalf("metadata location %s is not s3a://", tbl.MetadataLocation())
	}
	// Dropped without purge and registered back, as a migrated table is.
	if err := cat.DropTable(ctx, table.Identifier{ns, "h"}); err != nil {
		t.Fatal(err)
	}
	reg, err := cat.RegisterTable(ctx, table.Identifier{ns, "h"}, tbl.MetadataLocation())
	if err != nil {
		t.Fatalf("register an s3a table: %v", err)
	}
	data, meta := reachable(t, reg)
	if len(under(t, loc)) == 0 {
		t.Fatal("no objects under the s3a location")
	}
	job := waitJob(t, dropPurge(t, ns, "h").ID, "SUCCEEDED", time.Minute)
	if left := under(t, loc); len(left) != 0 {
		t.Errorf("%d objects left under %s: %v", len(left), loc, left)
	}
	if want := int64(len(data) + len(meta)); job.FilesDeleted != want || job.FilesSkipped != 0 {
		t.Errorf("files-deleted %d skipped %d, want %d and 0", job.FilesDeleted, job.FilesSkipped, want)
	}
}

// Defect: verify called every file of an s3a:// table missing (it looked
// the metadata's s3a:// paths up among listed s3:// URIs), so an intact
// Hadoop-written table failed files-intact and repair had nothing to do
// (soak seed 1031 step 244).
func TestVerifyOfAnS3ATable(t *testing.T) {
	localOnly(t)
	ns := newNamespace(t, "hadoopv")
	s3aTable(t, client(t, shared.Token), ns)
	if c := verifyFiles(t, shared.Catalog, ns, "h"); !c.OK {
		t.Errorf("verify of an intact s3a table: %+v", c)
	}
}

// s3aTable creates ns.h at an s3a:// location (as a Hadoop engine names
// it) and appends to it twice.
func s3aTable(t *testing.T, cat *rest.Catalog, ns string) (tbl *table.Table, loc string) {
	t.Helper()
	loc = "s3a://icehold-warehouse/" + shared.Catalog + "/" + ns + "/written_by_hadoop"
	tbl, err := cat.CreateTable(context.Background(), table.Identifier{ns, "h"}, eventSchema, catalog.WithPartitionSpec(&eventSpec), catalog.WithLocation(loc))
	if err != nil {
		t.Fatal(err)
	}
	tbl = appendRows(t, tbl, rows(t, 0, 10, false))
	return appendRows(t, tbl, rows(t, 10, 10, false)), loc
}

// Defect: rename into a name held by a purge job overwrote the job's
// tombstone (the first job could never finish).
func TestRenameIntoAPurgingNameIsRefused(t *testing.T) {
	srv := localOnly(t)
	ns := newNamespace(t, "tomb")
	create := func(name string) {
		mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables", shared.Token, map[string]any{"name": name, "schema": rawSchema})
	}
	create("t")
	create("u")
	// The job stays PENDING (its execution cannot start) so it holds the name.
	srv.Purge.SetCrash(func(p string) error {
		if p == "start" || p == "drop.before-start" {
			return errors.New("workflow unavailable")
		}
		return nil
	})
	t.Cleanup(func() { srv.Purge.SetCrash(nil) })
	job := dropPurge(t, ns, "t")
	status, body := call(t, "POST", "/v1/"+shared.Catalog+"/tables/rename", shared.Token, map[string]any{
		"source": map[string]any{"namespace": []string{ns}, "name": "u"}, "destination": map[string]any{"namespace": []string{ns}, "name": "t"},
	})
	if status != 409 || !strings.Contains(string(body), job.ID) {
		t.Errorf("rename into a purging name: %d %s, want 409 naming %s", status, body, job.ID)
	}
	if st, _ := call(t, "GET", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/u", shared.Token, nil); st != 200 {
		t.Errorf("the refused rename moved u: %d", st)
	}
	srv.Purge.SetCrash(nil)
	waitJob(t, job.ID, "SUCCEEDED", time.Minute)

	// Two drops with purge of one name at once: one job.
	for round := range 5 {
		name := fmt.Sprintf("twice%d", round)
		create(name)
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = call(t, "DELETE", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/"+name+"?purgeRequested=true", shared.Token, nil)
			}()
		}
		wg.Wait()
		oneEach := codes[0]+codes[1] == 204+404 && (codes[0] == 204 || codes[1] == 204)
		if n := len(jobsOf(t, ns, name)); n != 1 || !oneEach {
			t.Errorf("round %d: %d jobs, answers %v; want 1 job, one 204 and one 404", round, n, codes)
		}
	}
}

// Nested warehouses, a table at the warehouse root, set-location into
// another table's prefix and racing creates of overlapping locations.
func TestOneOwnerPerPrefixThroughTheAPI(t *testing.T) {
	localOnly(t)
	base := "s3://icehold-warehouse/" + uniq("wh")
	name := uniq("nest")
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": name, "warehouse": base})
	for _, w := range []string{base + "/inner", base, base + "/", "s3://icehold-warehouse", "s3://icehold-warehouse/" + shared.Catalog + "/x"} {
		status, body := call(t, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": uniq("nested"), "warehouse": w})
		if status != 409 {
			t.Errorf("warehouse %s overlapping another: %d %s, want 409", w, status, body)
		}
	}
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{"ns"}})
	tables := "/v1/" + name + "/namespaces/ns/tables"
	if st, body := call(t, "POST", tables, shared.Token, map[string]any{"name": "root", "location": base, "schema": rawSchema}); st != 400 {
		t.Errorf("table at the warehouse root: %d %s, want 400", st, body)
	}
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "a", "location": base + "/shared/a", "schema": rawSchema})
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "b", "location": base + "/shared/b", "schema": rawSchema})
	for _, loc := range []string{base + "/shared/a/inside", base + "/shared/a", base + "/shared"} {
		st, body := call(t, "POST", tables+"/b", shared.Token, map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-location", "location": loc}}})
		if st != 409 {
			t.Errorf("set-location to %s: %d %s, want 409", loc, st, body)
		}
	}
	// b moves to a free prefix; its old one is free again.
	mustCall(t, 200, "POST", tables+"/b", shared.Token, map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-location", "location": base + "/moved/b"}}})
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "c", "location": base + "/shared/b", "schema": rawSchema})
	// A plain drop lets the location go.
	mustCall(t, 204, "DELETE", tables+"/a", shared.Token, nil)
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "a2", "location": base + "/shared/a/deeper", "schema": rawSchema})

	for round := range 20 {
		locs := []string{fmt.Sprintf("%s/race%d", base, round), fmt.Sprintf("%s/race%d/x", base, round), fmt.Sprintf("%s/race%d/x/y", base, round)}
		var wg sync.WaitGroup
		codes := make([]int, len(locs))
		for i, loc := range locs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = call(t, "POST", tables, shared.Token, map[string]any{"name": fmt.Sprintf("r%d_%d", round, i), "location": loc, "schema": rawSchema})
			}()
		}
		wg.Wait()
		won := 0
		for _, c := range codes {
			switch c {
			case 200:
				won++
			case 409:
			default:
				t.Errorf("round %d: answer %d", round, c)
			}
		}
		if won != 1 {
			t.Errorf("round %d: %d creates of overlapping locations won (%v), want exactly 1", round, won, codes)
		}
	}
}

// rawSchema is schemaJSON as a JSON value inside a request body.
var rawSchema = json.RawMessage(schemaJSON)
