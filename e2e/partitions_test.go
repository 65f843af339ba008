package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/partitions"
)

// Partition drop (SPEC §5) on a table partitioned by identity(team_id) and
// day(ts), written by iceberg-go: several files per partition, position
// deletes in some.

var teamSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "team_id", Type: iceberg.PrimitiveTypes.Int32, Required: false},
	iceberg.NestedField{ID: 2, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz, Required: false},
	iceberg.NestedField{ID: 3, Name: "v", Type: iceberg.PrimitiveTypes.Int64, Required: false},
)

var teamSpec = iceberg.NewPartitionSpec(
	iceberg.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "team_id", Transform: iceberg.IdentityTransform{}},
	iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1001, Name: "ts_day", Transform: iceberg.DayTransform{}},
)

// cell is one partition tuple of the team table.
type cell struct {
	team int32
	day  string
}

// teamRows builds n rows per (team, day), v numbered from base.
func teamRows(t testing.TB, teams []int32, days []string, n, base int) arrow.Table {
	t.Helper()
	var b strings.Builder
	b.WriteString("[")
	v := base
	for _, d := range days {
		for _, team := range teams {
			for i := 0; i < n; i++ {
				if v > base {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `{"team_id": %d, "ts": "%sT%02d:00:00Z", "v": %d}`, team, d, i%24, v)
				v++
			}
		}
	}
	b.WriteString("]")
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "team_id", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("build rows: %v", err)
	}
	defer rec.Release()
	return array.NewTableFromRecords(sc, []arrow.Record{rec})
}

var (
	day1, day2, day3 = "2026-09-14", "2026-09-15", "2026-09-16"
	allTeams         = []int32{1, 2, 3}
)

// teamTable writes, per day, two appends of 4 rows for each of three teams
// (2 files per partition, one manifest per append covering one day), then
// position deletes (merge-on-read) of one row in (1, day1) and (3, day1) in
// one commit and of one row in (2, day3) in another.
func teamTable(t testing.TB, cat *rest.Catalog, ns, name string) *table.Table {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, name}, teamSchema, catalog.WithPartitionSpec(&teamSpec),
		catalog.WithProperties(iceberg.Properties{"write.delete.mode": "merge-on-read", "format-version": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	base := 0
	for _, d := range []string{day1, day2, day3} {
		for range 2 {
			tbl = appendRows(t.(*testing.T), tbl, teamRows(t, allTeams, []string{d}, 4, base))
			base += 12
		}
	}
	// v of the first row of (1, day1) and (3, day1) in the first append, and
	// of (2, day3) in the fifth.
	for _, vs := range [][]int64{{0, 8}, {48 + 4}} {
		var filter iceberg.BooleanExpression = iceberg.AlwaysFalse{}
		for _, v := range vs {
			filter = iceberg.NewOr(filter, iceberg.EqualTo(iceberg.Reference("v"), v))
		}
		tx := tbl.NewTransaction()
		if err := tx.Delete(ctx, filter, nil); err != nil {
			t.Fatalf("position deletes: %v", err)
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

// cellCounts scans the table (its current snapshot unless opts say
// otherwise) and counts rows per partition tuple.
func cellCounts(t testing.TB, tbl *table.Table, opts ...table.ScanOption) map[cell]int {
	t.Helper()
	res, err := tbl.Scan(opts...).ToArrowTable(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer res.Release()
	out := map[cell]int{}
	tr := array.NewTableReader(res, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.Record()
		teams := rec.Column(0).(*array.Int32)
		ts := rec.Column(1).(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			day := ts.Value(i).ToTime(arrow.Microsecond).UTC().Format("2006-01-02")
			out[cell{teams.Value(i), day}]++
		}
	}
	return out
}

// dropResult is the answer of a drop.
type dropResult = partitions.DropResult

func dropPath(ns, tbl string) string {
	return "/lifecycle/v1/catalogs/" + shared.Catalog + "/namespaces/" + url.PathEscape(ns) + "/tables/" + tbl + "/partitions/drop"
}

func dropBody(cells ...cell) map[string]any {
	tuples := make([]map[string]any, len(cells))
	for i, c := range cells {
		tuples[i] = map[string]any{"team_id": c.team, "ts_day": c.day}
	}
	return map[string]any{"partitions": tuples}
}

func loadTable(t testing.TB, cat *rest.Catalog, ns, name string) *table.Table {
	t.Helper()
	tbl, err := cat.LoadTable(context.Background(), table.Identifier{ns, name})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// liveFiles lists the current snapshot's live entries by partition tuple:
// data files and delete files.
func liveFiles(t testing.TB, tbl *table.Table) (data, deletes map[cell]int) {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	data, deletes = map[cell]int{}, map[cell]int{}
	mfs, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		entries, err := mf.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := e.DataFile().Partition()
			c := cell{p[1000].(int32), fmt.Sprint(p[1001])}
			if d, ok := p[1001].(iceberg.Date); ok {
				c.day = iceberg.DateLiteral(d).String()
			}
			if e.DataFile().ContentType() == iceberg.EntryContentData {
				data[c]++
			} else {
				deletes[c]++
			}
		}
	}
	return data, deletes
}

// s3Requests counts the embedded S3's requests on one table's keys by
// method and object kind.
type s3Requests struct {
	mu     sync.Mutex
	prefix string
	counts map[string]int      // "GET manifest"
	keys   map[string][]string // "GET manifest" → keys
}

func countS3(srv *emulators.S3, tbl *table.Table) (*s3Requests, func()) {
	loc, _ := strings.CutPrefix(tbl.Location(), "s3://")
	c := &s3Requests{prefix: "/" + loc + "/", counts: map[string]int{}, keys: map[string][]string{}}
	srv.SetObserver(func(r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, c.prefix) {
			return
		}
		rel := strings.TrimPrefix(r.URL.Path, c.prefix)
		k := r.Method + " " + objectKind(rel)
		c.mu.Lock()
		c.counts[k]++
		c.keys[k] = append(c.keys[k], rel)
		c.mu.Unlock()
	})
	return c, func() { srv.SetObserver(nil) }
}

// objectKind: metadata files, manifest lists and manifests live in
// metadata/; everything else is a data or delete file.
func objectKind(rel string) string {
	switch {
	case strings.HasPrefix(rel, "metadata/") && strings.HasSuffix(rel, ".metadata.json"):
		return "metadata"
	case strings.HasPrefix(rel, "metadata/snap-"):
		return "manifest-list"
	case strings.HasPrefix(rel, "metadata/") && strings.HasSuffix(rel, ".avro"):
		return "manifest"
	}
	return "data-or-delete"
}

func (c *s3Requests) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Done when 1 and 2: one delete snapshot ends exactly the tuples' data and
// delete files; a scan shows no row of them and every other row; the
// answer's counts are right; a tuple matching nothing reports zeros; the
// drop read the manifest list and only the manifests whose summaries admit
// a tuple, wrote replacements only for those with matches, and touched no
// data or delete file.
func TestPartitionDropEndsTuplesInOneSnapshot(t *testing.T) {
	embeddedAWS(t)
	srv := localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := uniq("parts")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl := teamTable(t, cat, ns, "events")
	before := cellCounts(t, tbl)
	liveData, liveDeletes := liveFiles(t, tbl)
	if liveData[cell{1, day1}] != 2 || liveDeletes[cell{1, day1}] != 1 || liveDeletes[cell{2, day3}] != 1 {
		t.Fatalf("the table is not what the test needs: data files %v, delete files %v", liveData, liveDeletes)
	}
	snapsBefore := len(tbl.Metadata().Snapshots())
	parent := tbl.CurrentSnapshot().SnapshotID
	manifests, err := tbl.CurrentSnapshot().Manifests(mustFS(t, tbl))
	if err != nil {
		t.Fatal(err)
	}

	counter, stop := countS3(srv.S3Emulator, tbl)
	out := mustCall(t, 200, "POST", dropPath(ns, "events"), shared.Token, dropBody(cell{1, day1}, cell{2, day2}, cell{9, day2}))
	stop()
	var res dropResult
	mustDecode(t, out, &res)

	// The answer: per tuple and in total.
	type counts struct{ data, deletes, records int64 }
	want := []counts{{2, 1, 8}, {2, 0, 8}, {0, 0, 0}}
	for i, w := range want {
		p := res.Partitions[i]
		if got := (counts{p.DataFiles, p.DeleteFiles, p.Records}); got != w {
			t.Errorf("tuple %v: %+v, want %+v", p.Partition, got, w)
		}
	}
	if res.Partitions[0].Partition["ts_day"] != day1 || res.Partitions[0].Partition["team_id"] != float64(1) {
		t.Errorf("tuple echoed as %v", res.Partitions[0].Partition)
	}
	if res.DataFilesEnded != 4 || res.DeleteFilesEnded != 1 || res.RecordsEnded != 16 || !res.Committed || res.SnapshotID == nil {
		t.Errorf("totals: %+v", res)
	}

	// One new snapshot, operation delete, on the previous one.
	tbl = loadTable(t, cat, ns, "events")
	if n := len(tbl.Metadata().Snapshots()); n != snapsBefore+1 {
		t.Errorf("%d snapshots, want %d", n, snapsBefore+1)
	}
	cur := tbl.CurrentSnapshot()
	if cur.SnapshotID != *res.SnapshotID || cur.Summary.Operation != table.OpDelete || *cur.ParentSnapshotID != parent {
		t.Errorf("current snapshot %d (%s, parent %v), want %d (delete, parent %d)", cur.SnapshotID, cur.Summary.Operation, *cur.ParentSnapshotID, *res.SnapshotID, parent)
	}
	if p := cur.Summary.Properties; p["deleted-data-files"] != "4" || p["removed-delete-files"] != "1" || p["deleted-records"] != "16" || p["total-data-files"] != "14" {
		t.Errorf("summary %v", p)
	}

	// The event, recorded by the commit: PartitionsDropped once.
	uuid := tbl.Metadata().TableUUID().String()
	if got := eventually(func() []string { return tableEvents(t, uuid) }, func(got []string) bool { return len(got) > 0 }); !slices.Equal(got, []string{"PartitionsDropped"}) {
		t.Errorf("events of the drop: %v", got)
	}

	// The scan: no row of the dropped tuples, every other row intact.
	after := cellCounts(t, tbl)
	for c, n := range before {
		dropped := c == (cell{1, day1}) || c == (cell{2, day2})
		switch {
		case dropped && after[c] != 0:
			t.Errorf("%v: %d rows after the drop", c, after[c])
		case !dropped && after[c] != n:
			t.Errorf("%v: %d rows after the drop, %d before", c, after[c], n)
		}
	}
	data, deletes := liveFiles(t, tbl)
	if data[cell{1, day1}]+data[cell{2, day2}]+deletes[cell{1, day1}] != 0 || deletes[cell{3, day1}] != 1 || deletes[cell{2, day3}] != 1 || data[cell{3, day3}] != 2 {
		t.Errorf("live files after the drop: data %v, deletes %v", data, deletes)
	}

	// S3: the manifest list, the admitted manifests (days 1 and 2 of the
	// data manifests, the first delete manifest), nothing of day 3, no
	// data or delete file.
	got := counter.snapshot()
	t.Logf("S3 requests on the table during the drop: %v (manifests: %+v)", got, res.Manifests)
	if res.Manifests.Total != 8 || res.Manifests.Read != 5 || res.Manifests.Rewritten != 5 || res.Manifests.Written != 5 {
		t.Errorf("manifests %+v, want 8 in the list, 5 read, 5 rewritten and written", res.Manifests)
	}
	for k, n := range got {
		if strings.HasSuffix(k, "data-or-delete") || strings.HasPrefix(k, "DELETE") {
			t.Errorf("%d × %s during the drop: %v", n, k, counter.keys[k])
		}
	}
	if got["GET manifest-list"] != 1 || got["PUT manifest-list"] != 1 || got["PUT manifest"] != 5 || got["PUT metadata"] != 1 {
		t.Errorf("requests %v: want the one manifest list read, 5 manifests and 1 list written, 1 metadata file", got)
	}
	admitted := map[string]bool{}
	for _, m := range manifests {
		lo, hi := dayBounds(t, m)
		if lo <= day2 && hi >= day1 {
			admitted[relPath(tbl, m.FilePath())] = true
		}
	}
	read := map[string]bool{}
	for _, k := range counter.keys["GET manifest"] {
		read[k] = true
	}
	if fmt.Sprint(sortedKeys(read)) != fmt.Sprint(sortedKeys(admitted)) || len(admitted) != 5 {
		t.Errorf("manifests read %v, admitted by their summaries %v", sortedKeys(read), sortedKeys(admitted))
	}
}

// dayBounds decodes a manifest's ts_day summary.
func dayBounds(t testing.TB, m iceberg.ManifestFile) (lo, hi string) {
	t.Helper()
	s := m.Partitions()[1]
	l, err := iceberg.LiteralFromBytes(iceberg.PrimitiveTypes.Date, *s.LowerBound)
	if err != nil {
		t.Fatal(err)
	}
	h, err := iceberg.LiteralFromBytes(iceberg.PrimitiveTypes.Date, *s.UpperBound)
	if err != nil {
		t.Fatal(err)
	}
	return l.String(), h.String()
}

func relPath(tbl *table.Table, p string) string {
	return strings.TrimPrefix(p, strings.TrimRight(tbl.Location(), "/")+"/")
}

func mustFS(t testing.TB, tbl *table.Table) icebergio.IO {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// partitionedIn creates a table partitioned by identity(x) (no snapshot).
func partitionedIn(t *testing.T, ns, name string) {
	t.Helper()
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables", shared.Token, map[string]any{
		"name":           name,
		"schema":         rawSchema,
		"partition-spec": map[string]any{"spec-id": 0, "fields": []any{map[string]any{"source-id": 1, "field-id": 1000, "name": "x", "transform": "identity"}}},
	})
}

// metadataLocation is the table's current metadata pointer.
func metadataLocation(t testing.TB, ns, name string) string {
	t.Helper()
	var res struct {
		Loc string `json:"metadata-location"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/"+name, shared.Token, nil), &res)
	return res.Loc
}

// Done when 3: malformed tuples are a 400 and commit nothing; the guards
// answer 409; read-snapshot-id older only than appends is accepted.
func TestPartitionDropRefusals(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := uniq("partbad")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl := teamTable(t, cat, ns, "events")
	path := dropPath(ns, "events")
	ok := `{"team_id": 1, "ts_day": "2026-09-14"}`
	for _, c := range []struct{ name, body, says string }{
		{"unknown field", `{"partitions": [{"team_id": 1, "ts_day": "2026-09-14", "region": "eu"}]}`, `"region" is not a field`},
		{"missing field", `{"partitions": [{"team_id": 1}]}`, `"ts_day" is missing`},
		{"wrong type", `{"partitions": [` + ok + `, {"team_id": "2", "ts_day": "2026-09-14"}]}`, "not an integer"},
		{"day as a number", `{"partitions": [{"team_id": 1, "ts_day": 20710}]}`, "not a string"},
		{"wildcard", `{"partitions": [{"team_id": 1, "ts_day": "*"}]}`, "wildcards"},
		{"predicate", `{"partitions": [{"team_id": 1, "ts_day": {"lt": "2026-09-16"}}]}`, "not a single value"},
		{"empty list", `{"partitions": []}`, "partitions is empty"},
		{"no body", ``, "body"},
		{"unknown spec", `{"partitions": [` + ok + `], "spec-id": 7}`, "no partition spec 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := metadataLocation(t, ns, "events")
			status, out := call(t, "POST", path, shared.Token, c.body)
			typ, _, msg := errorModel(t, out)
			if status != 400 || typ != "BadRequestException" || !strings.Contains(msg, c.says) {
				t.Errorf("%d %s %q, want 400 saying %q", status, typ, msg, c.says)
			}
			if after := metadataLocation(t, ns, "events"); after != before {
				t.Errorf("the table moved: %s → %s", before, after)
			}
		})
	}

	t.Run("expected-table-uuid", func(t *testing.T) {
		before := metadataLocation(t, ns, "events")
		body := dropBody(cell{1, day1})
		body["expected-table-uuid"] = "00000000-0000-0000-0000-000000000000"
		status, out := call(t, "POST", path, shared.Token, body)
		if typ, _, msg := errorModel(t, out); status != 409 || !strings.Contains(msg, "table uuid mismatch") {
			t.Errorf("%d %s %s, want 409", status, typ, msg)
		}
		if metadataLocation(t, ns, "events") != before {
			t.Errorf("the table moved")
		}
	})

	// The table's last two snapshots are position deletes, which remove data.
	snaps := tbl.Metadata().Snapshots()
	beforeDeletes := snaps[len(snaps)-3].SnapshotID
	t.Run("read-snapshot-id before a delete", func(t *testing.T) {
		body := dropBody(cell{1, day1})
		body["read-snapshot-id"] = beforeDeletes
		status, out := call(t, "POST", path, shared.Token, body)
		if typ, _, msg := errorModel(t, out); status != 409 || typ != "CommitFailedException" || !strings.Contains(msg, "removed data") {
			t.Errorf("%d %s %s, want 409", status, typ, msg)
		}
	})
	t.Run("read-snapshot-id before appends only", func(t *testing.T) {
		read := tbl.CurrentSnapshot().SnapshotID
		appendRows(t, tbl, teamRows(t, []int32{4}, []string{day1}, 2, 1000))
		appendRows(t, loadTable(t, cat, ns, "events"), teamRows(t, []int32{5}, []string{day1}, 2, 2000))
		body := dropBody(cell{1, day1})
		body["read-snapshot-id"] = read
		body["expected-table-uuid"] = tbl.Metadata().TableUUID().String()
		var res dropResult
		mustDecode(t, mustCall(t, 200, "POST", path, shared.Token, body), &res)
		if !res.Committed || res.DataFilesEnded != 2 {
			t.Errorf("drop after appends: %+v", res)
		}
	})
}

// Done when 3: a partition drop racing an append, 20 times: both land, or
// the loser gets a 409; no append is lost, and the drop ends exactly its
// tuple.
func TestPartitionDropRacesAnAppend(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := uniq("partrace")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, "events"}, teamSchema, catalog.WithPartitionSpec(&teamSpec))
	if err != nil {
		t.Fatal(err)
	}
	const runs = 20
	var teams []int32
	for i := range runs {
		teams = append(teams, int32(100+i))
	}
	tbl = appendRows(t, tbl, teamRows(t, teams, []string{day1}, 3, 0)) // the tuples the drops end
	both, drops, appends := 0, 0, 0
	for i := range runs {
		if i == runs/2 {
			// The second half: the appender retries a lost commit as
			// iceberg-go does when told to (it plans again on the drop).
			tx := loadTable(t, cat, ns, "events").NewTransaction()
			if err := tx.SetProperties(iceberg.Properties{table.CommitNumRetriesKey: "3", table.CommitMinRetryWaitMsKey: "10"}); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		fresh := loadTable(t, cat, ns, "events")
		// The append's data file is written before the race: the two
		// commits start together.
		tx := fresh.NewTransaction()
		appendErr := tx.AppendTable(ctx, teamRows(t, []int32{int32(500 + i)}, []string{day2}, 2, 10000+10*i), 1000, nil)
		if appendErr != nil {
			t.Fatal(appendErr)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		var status int
		var out []byte
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, appendErr = tx.Commit(ctx)
		}()
		go func() {
			defer wg.Done()
			<-start
			status, out = call(t, "POST", dropPath(ns, "events"), shared.Token, dropBody(cell{int32(100 + i), day1}))
		}()
		close(start)
		wg.Wait()
		switch {
		case status == 200:
			drops++
		case status == 409:
		default:
			t.Fatalf("run %d: drop answered %d: %s", i, status, out)
		}
		if appendErr == nil {
			appends++
		} else if !strings.Contains(appendErr.Error(), "commit") {
			t.Fatalf("run %d: append failed otherwise than a lost commit: %v", i, appendErr)
		}
		if status == 200 && appendErr == nil {
			both++
		}
		if status != 200 && appendErr != nil {
			t.Errorf("run %d: both lost (drop %d, append %v)", i, status, appendErr)
		}
		counts := cellCounts(t, loadTable(t, cat, ns, "events"))
		if got, want := counts[cell{int32(100 + i), day1}], map[bool]int{true: 0, false: 3}[status == 200]; got != want {
			t.Errorf("run %d: %d rows in the dropped tuple, want %d", i, got, want)
		}
		if got, want := counts[cell{int32(500 + i), day2}], map[bool]int{true: 2, false: 0}[appendErr == nil]; got != want {
			t.Errorf("run %d: %d appended rows, want %d (append error %v)", i, got, want, appendErr)
		}
	}
	final := loadTable(t, cat, ns, "events")
	if n := countRows(t, final); n != int64(3*(runs-drops)+2*appends) {
		t.Errorf("%d rows at the end, want %d", n, 3*(runs-drops)+2*appends)
	}
	t.Logf("%d runs: %d drops and %d appends landed, %d both", runs, drops, appends, both)
	if appends < runs/2 {
		t.Errorf("an appender that retries lost its append")
	}
}

// Done when 4: the same key and payload replays the first answer (same
// snapshot id, no new snapshot), also reordered; another payload is a
// 422; concurrent requests with one key make one commit.
func TestPartitionDropIdempotency(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := uniq("partidem")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	teamTable(t, cat, ns, "events")
	path := dropPath(ns, "events")
	key := uniq("k")
	var first, again dropResult
	mustDecode(t, mustStatus(t, 200, "POST", path, `{"partitions": [{"team_id": 1, "ts_day": "2026-09-14"}, {"team_id": 2, "ts_day": "2026-09-15"}]}`, "Idempotency-Key", key), &first)
	loc := metadataLocation(t, ns, "events")
	// Another serialization of the same request: tuples reordered, keys too.
	mustDecode(t, mustStatus(t, 200, "POST", path, `{"partitions":[{"ts_day":"2026-09-15","team_id":2},{"ts_day":"2026-09-14","team_id":1}]}`, "Idempotency-Key", key), &again)
	if *again.SnapshotID != *first.SnapshotID || again.DataFilesEnded != first.DataFilesEnded || !first.Committed {
		t.Errorf("replay answered %+v, first %+v", again, first)
	}
	if metadataLocation(t, ns, "events") != loc {
		t.Errorf("the replay committed again")
	}
	if status, out := call(t, "POST", path, shared.Token, dropBody(cell{3, day3}), "Idempotency-Key", key); status != 422 {
		t.Errorf("same key, other tuples: %d %s, want 422", status, out)
	}

	// Eight at once under a new key: one commit.
	key2 := uniq("k")
	snapsBefore := len(loadTable(t, cat, ns, "events").Metadata().Snapshots())
	var wg sync.WaitGroup
	ids := make([]int64, 8)
	codes := make([]int, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b := call(t, "POST", path, shared.Token, dropBody(cell{3, day3}), "Idempotency-Key", key2)
			codes[i] = st
			if st == 200 {
				var r dropResult
				mustDecode(t, b, &r)
				ids[i] = *r.SnapshotID
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i, st := range codes {
		switch st {
		case 200:
			seen[ids[i]] = true
		case 409:
		default:
			t.Errorf("concurrent request %d: %d", i, st)
		}
	}
	if n := len(loadTable(t, cat, ns, "events").Metadata().Snapshots()); n != snapsBefore+1 || len(seen) != 1 {
		t.Errorf("%d new snapshots, answers with snapshot ids %v; want one commit", n-snapsBefore, seen)
	}
}

// mustStatus sends a raw body with headers and checks the status.
func mustStatus(t testing.TB, want int, method, path, body string, headers ...string) []byte {
	t.Helper()
	status, out := call(t, method, path, shared.Token, body, headers...)
	if status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, out)
	}
	return out
}

// callAt sends one JSON request to another server (a child process).
func callAt(t testing.TB, base, method, path, token string, body any, headers ...string) (int, []byte) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

// Done when 4: the receipt outlives a kill -9 of the server: after a
// restart the same key and payload replay the first answer, and the table
// has no second snapshot.
func TestPartitionDropReplaysAfterKill9(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	cmd, info := startChild(t, dir)
	open := func(info server.Info) *rest.Catalog {
		cat, err := rest.NewCatalog(ctx, "icehold", info.RESTURL, rest.WithOAuthToken(info.AdminToken), rest.WithWarehouseLocation(info.Catalog))
		if err != nil {
			t.Fatal(err)
		}
		return cat
	}
	cat := open(info)
	ns := uniq("partkill")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	teamTable(t, cat, ns, "events")
	path := "/lifecycle/v1/catalogs/" + info.Catalog + "/namespaces/" + ns + "/tables/events/partitions/drop"
	key := uniq("k")
	status, out := callAt(t, info.RESTURL, "POST", path, info.AdminToken, dropBody(cell{1, day1}, cell{3, day2}), "Idempotency-Key", key)
	if status != 200 {
		t.Fatalf("drop: %d %s", status, out)
	}
	var first dropResult
	mustDecode(t, out, &first)
	killHard(t, cmd)

	cmd, info = startChild(t, dir)
	defer killHard(t, cmd)
	cat = open(info)
	before, err := cat.LoadTable(ctx, table.Identifier{ns, "events"})
	if err != nil {
		t.Fatal(err)
	}
	status, out = callAt(t, info.RESTURL, "POST", path, info.AdminToken, dropBody(cell{1, day1}, cell{3, day2}), "Idempotency-Key", key)
	var again dropResult
	mustDecode(t, out, &again)
	if status != 200 || *again.SnapshotID != *first.SnapshotID || again.DataFilesEnded != first.DataFilesEnded || again.DataFilesEnded != 4 {
		t.Errorf("after the restart: %d %+v, first answer %+v", status, again, first)
	}
	after, err := cat.LoadTable(ctx, table.Identifier{ns, "events"})
	if err != nil {
		t.Fatal(err)
	}
	if after.MetadataLocation() != before.MetadataLocation() || after.CurrentSnapshot().SnapshotID != *first.SnapshotID {
		t.Errorf("the replay committed: %s → %s", before.MetadataLocation(), after.MetadataLocation())
	}
	if status, out := callAt(t, info.RESTURL, "POST", path, info.AdminToken, dropBody(cell{2, day2}), "Idempotency-Key", key); status != 422 {
		t.Errorf("same key, other payload after the restart: %d %s", status, out)
	}
}
