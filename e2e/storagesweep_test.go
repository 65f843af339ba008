package e2e

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/storagesweep"
	"github.com/icehold/icehold/shared/store"
)

// sweepEnv is a server of its own whose clock (the catalog's and S3's:
// objects' LastModified) the test moves days ahead, with a versioned
// warehouse bucket.
type sweepEnv struct {
	srv  *server.Server
	cat  *rest.Catalog
	mu   sync.Mutex
	now  time.Time
	base string // the REST URL
}

func (e *sweepEnv) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *sweepEnv) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
}

func newSweepEnv(t *testing.T) *sweepEnv {
	t.Helper()
	localOnly(t)
	embeddedAWS(t)
	e := &sweepEnv{now: time.Now().UTC()}
	o := testOptions(t.TempDir())
	o.Now = e.clock
	o.ReconcileEvery = time.Hour // a job the test makes stays PENDING
	srv, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	e.srv, e.base = srv, srv.Info.RESTURL
	srv.S3Emulator.Store.SetClock(e.clock)
	if err := srv.S3Emulator.Store.SetVersioning(srv.Info.Bucket, emulators.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	e.cat, err = rest.NewCatalog(context.Background(), "icehold", e.base, rest.WithWarehouseLocation(srv.Info.Catalog), rest.WithOAuthToken(srv.Info.AdminToken))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *sweepEnv) call(t *testing.T, want int, method, path string, body any) []byte {
	t.Helper()
	code, out := callAt(t, e.base, method, path, e.srv.Info.AdminToken, body)
	if code != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, out)
	}
	return out
}

// put writes an object into the warehouse bucket (as an engine does).
func (e *sweepEnv) put(t *testing.T, key string, body []byte) {
	t.Helper()
	if _, err := e.srv.S3Emulator.Store.PutObject(e.srv.Info.Bucket, key, bytes.NewReader(body), emulators.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *sweepEnv) read(t *testing.T, bucket, key string) []byte {
	t.Helper()
	_, rc, err := e.srv.S3Emulator.Store.GetObject(bucket, key, "")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return b
}

// versions lists every version and delete marker of the warehouse bucket
// as "key@version".
func (e *sweepEnv) versions(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	o := emulators.ListVersionsOptions{MaxKeys: 1000}
	for {
		page, err := e.srv.S3Emulator.Store.ListObjectVersions(e.srv.Info.Bucket, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			out[v.Key+"@"+v.VersionID] = true
		}
		if !page.IsTruncated {
			return out
		}
		o.KeyMarker, o.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
	}
}

// versionsOf are the versions of key, newest first.
func (e *sweepEnv) versionsOf(t *testing.T, key string) []string {
	t.Helper()
	page, err := e.srv.S3Emulator.Store.ListObjectVersions(e.srv.Info.Bucket, emulators.ListVersionsOptions{Prefix: key, MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range page.Versions {
		if v.Key == key {
			out = append(out, key+"@"+v.VersionID)
		}
	}
	return out
}

// sweep starts a sweep (path: "" for the catalog, or a table's) and waits
// for its job to end.
func (e *sweepEnv) sweep(t *testing.T, table string, body map[string]any) router.JobView {
	t.Helper()
	path := "/lifecycle/v1/catalogs/" + e.srv.Info.Catalog + table + "/storage-sweep"
	var j router.JobView
	mustDecode(t, e.call(t, 202, "POST", path, body), &j)
	return e.wait(t, j.ID)
}

func (e *sweepEnv) wait(t *testing.T, id string) router.JobView {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var j router.JobView
		mustDecode(t, e.call(t, 200, "GET", "/lifecycle/v1/catalogs/"+e.srv.Info.Catalog+"/purge-jobs/"+id, nil), &j)
		if store.Terminal(j.State) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s: %+v", id, j.State, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *sweepEnv) runSchedule(t *testing.T, name string, out any) {
	t.Helper()
	var res struct {
		Report json.RawMessage `json:"report"`
	}
	mustDecode(t, e.call(t, 200, "POST", server.SchedulePath(name), nil), &res)
	if err := json.Unmarshal(res.Report, out); err != nil {
		t.Fatal(err)
	}
}

// Done when (issue 33): on a warehouse where engines left uncommitted files
// older and younger than the orphan window, and noncurrent versions older
// and younger than the version window, the sweep deletes exactly the older
// uncommitted files (every version of them) and the expired noncurrent
// versions; its dry run predicted exactly that; every table scans the same
// rows; unowned objects are reported, not deleted; nothing of a legal-held,
// soft-deleted or busy table goes; files of tables whose locations are
// spelled s3a:// and s3n:// stay; and a file written before the report and
// committed after it (while the sweep's batches wait) survives.
func TestStorageSweepDeletesExactlyWhatItPredicted(t *testing.T) {
	e := newSweepEnv(t)
	ctx := context.Background()
	cat := e.srv.Info.Catalog
	e.call(t, 200, "POST", "/v1/"+cat+"/namespaces", map[string]any{"namespace": []string{"sw"}})
	create := func(name, loc string, props iceberg.Properties) *table.Table {
		opts := []catalog.CreateTableOpt{catalog.WithPartitionSpec(&citySpec), catalog.WithProperties(props)}
		if loc != "" {
			opts = append(opts, catalog.WithLocation(loc))
		}
		tbl, err := e.cat.CreateTable(ctx, table.Identifier{"sw", name}, citySchema, opts...)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		tbl = appendRows(t, tbl, cityRows(t, 0, 8))
		return appendRows(t, tbl, cityRows(t, 8, 8))
	}
	wh := "s3://" + e.srv.Info.Bucket + "/" + cat
	tables := map[string]*table.Table{
		"live": create("live", "", nil),
		"held": create("held", "", iceberg.Properties{"icehold.legal-hold": "true"}),
		"busy": create("busy", "", nil),
		"s3a":  create("s3a", "s3a"+strings.TrimPrefix(wh, "s3")+"/sw/s3a-table", nil),
		"s3n":  create("s3n", "s3n"+strings.TrimPrefix(wh, "s3")+"/sw/s3n-table", nil),
		"soft": create("soft", "", nil),
	}
	rows := map[string]int64{}
	for name, tbl := range tables {
		rows[name] = countRows(t, tbl)
	}
	keyOf := func(tbl *table.Table, rel string) string {
		loc := tbl.Location()
		return strings.SplitN(loc[strings.Index(loc, "://")+3:], "/", 2)[1] + "/" + rel
	}
	live := tables["live"]

	// Day 0: engines leave uncommitted files in every table, a file they
	// will commit late, and versions: a committed file rewritten with the
	// same bytes, a scratch file deleted.
	old := map[string]bool{}
	for name, tbl := range tables {
		k := keyOf(tbl, "data/uncommitted-old.parquet")
		e.put(t, k, []byte("old "+name))
		if name == "live" || name == "s3a" || name == "s3n" {
			old[k] = true
		}
	}
	e.put(t, keyOf(live, "data/uncommitted-old.parquet"), []byte("its second version"))
	lateKey := keyOf(live, "data/late.parquet")
	files, fileRows := planFiles(t, live)
	e.put(t, lateKey, e.read(t, e.srv.Info.Bucket, files[0]))
	e.put(t, files[1], e.read(t, e.srv.Info.Bucket, files[1])) // rewritten: its first version is noncurrent
	scratch := keyOf(live, "data/scratch.tmp")
	e.put(t, scratch, []byte("scratch"))
	if _, err := e.srv.S3Emulator.Store.DeleteObject(e.srv.Info.Bucket, scratch, ""); err != nil {
		t.Fatal(err)
	}
	e.put(t, cat+"/stray/left-by-someone", []byte("no table's"))
	rewrittenOld := e.versionsOf(t, files[1])[1]
	scratchOld := e.versionsOf(t, scratch)[1]
	var stale server.InventoryRun
	e.advance(24 * time.Hour)
	e.runSchedule(t, server.ScheduleInventory, &stale) // a report that will be stale

	// Day 5: a version replaced now is still within the version window at
	// the report; day 7: uncommitted files younger than the orphan window.
	e.advance(4 * 24 * time.Hour)
	recentRewrite := keyOf(live, "data/rewritten-recently.tmp")
	e.put(t, recentRewrite, []byte("v1"))
	e.put(t, recentRewrite, []byte("v2"))
	e.advance(2 * 24 * time.Hour)
	for _, tbl := range tables {
		e.put(t, keyOf(tbl, "data/uncommitted-young.parquet"), []byte("young"))
	}
	// The table busy has a job in flight (never started: reconcile waits
	// an hour); soft is soft-deleted.
	busy := store.Job{ID: "pj-busy", Kind: store.KindExpire, Catalog: cat, Namespace: []string{"sw"}, Table: "busy", State: store.JobPending, Planned: true}
	if err := e.srv.Catalog.Store().CreateJob(ctx, busy); err != nil {
		t.Fatal(err)
	}
	e.call(t, 200, "POST", "/lifecycle/v1/catalogs/"+cat+"/properties", map[string]any{"updates": map[string]string{"soft-delete.enabled": "true"}})
	e.call(t, 204, "DELETE", "/v1/"+cat+"/namespaces/sw/tables/soft", nil)

	// Day 8: the report.
	e.advance(24 * time.Hour)
	var inv server.InventoryRun
	e.runSchedule(t, server.ScheduleInventory, &inv)
	before := e.versions(t)

	// Reports refused by name delete nothing: stale, of another bucket,
	// malformed; a partial one fails its job.
	refused := func(report, reason string) {
		t.Helper()
		code, out := callAt(t, e.base, "POST", "/lifecycle/v1/catalogs/"+cat+"/storage-sweep", e.srv.Info.AdminToken, map[string]any{"report": report})
		if typ, _, msg := errorModel(t, out); code != 422 || typ != "InventoryReportRefusedException" || !strings.Contains(msg, reason) || !strings.Contains(msg, report) {
			t.Fatalf("report %s: %d %s; want 422 naming it %s", report, code, out, reason)
		}
	}
	refused(stale.Manifest, "refused as stale")
	foreign, err := e.srv.S3Emulator.Store.WriteInventory(server.InventoryBucket, emulators.InventoryConfig{ID: "x", DestinationBucket: server.InventoryBucket}, e.clock())
	if err != nil {
		t.Fatal(err)
	}
	refused("s3://"+server.InventoryBucket+"/"+foreign.ManifestKey, "refused as of another bucket")
	badKey := strings.Replace(foreign.ManifestKey, "manifest.json", "bad/manifest.json", 1)
	writeManifest(t, e, badKey, func(m map[string]any) { m["fileFormat"] = "ORC"; m["sourceBucket"] = e.srv.Info.Bucket })
	refused("s3://"+server.InventoryBucket+"/"+badKey, "refused as malformed")
	partialKey := strings.Replace(foreign.ManifestKey, "manifest.json", "partial/manifest.json", 1)
	writeManifest(t, e, partialKey, func(m map[string]any) {
		m["sourceBucket"] = e.srv.Info.Bucket
		m["files"] = []map[string]any{{"key": "inventory/gone.csv.gz", "size": 10, "MD5checksum": strings.Repeat("0", 32)}}
	})
	j := e.sweep(t, "", map[string]any{"report": "s3://" + server.InventoryBucket + "/" + partialKey})
	if j.State != store.JobFailed || j.LastError == nil || !strings.Contains(*j.LastError, "refused as partial") {
		t.Fatalf("partial report: job %s %v, want FAILED naming it partial", j.State, j.LastError)
	}
	if got := e.versions(t); !maps.Equal(got, before) {
		t.Fatal("a refused report deleted something")
	}

	// The dry run predicts; nothing goes.
	dry := e.sweep(t, "", map[string]any{"dry-run": true})
	if dry.State != store.JobSucceeded || dry.FilesDeleted != 0 || !maps.Equal(e.versions(t), before) {
		t.Fatalf("dry run: %s, %d deleted, or objects changed", dry.State, dry.FilesDeleted)
	}
	want := map[string]bool{rewrittenOld: true, scratchOld: true}
	for k := range old {
		for _, v := range e.versionsOf(t, k) {
			want[v] = true
		}
	}
	late := e.versionsOf(t, lateKey)
	cls := dry.StorageSweep.Classes
	if n := cls[storagesweep.ClassOrphan].Objects + cls[storagesweep.ClassNoncurrentExpired].Objects; n != int64(len(want)+len(late)) {
		t.Fatalf("dry run predicts %d deletions, want %d (and the late file): %+v", n, len(want), cls)
	}
	if cls[storagesweep.ClassRecent].Objects != 4 || cls[storagesweep.ClassNoncurrentKept].Objects != 2 ||
		cls[storagesweep.ClassUnowned].Objects != 1 || !slices.Contains(dry.StorageSweep.Unowned, cat+"/stray") {
		t.Fatalf("dry run classes %+v, unowned %q", cls, dry.StorageSweep.Unowned)
	}
	if cls[storagesweep.ClassProtected].Objects == 0 {
		t.Fatalf("dry run protected nothing: %+v", cls)
	}

	// One table's dry run counts that table's objects only.
	one := e.sweep(t, "/namespaces/sw/tables/live", map[string]any{"dry-run": true})
	if c := one.StorageSweep.Classes; c[storagesweep.ClassProtected].Objects != 0 || c[storagesweep.ClassUnowned].Objects != 0 || c[storagesweep.ClassOrphan].Objects != 3 {
		t.Fatalf("the table's dry run: %+v", c)
	}

	// The sweep: the late file is committed while its batch waits to run.
	var once sync.Once
	e.srv.Purge.SetCrash(func(p string) error {
		if p == "delete.start" {
			once.Do(func() {
				tbl := loadAt(t, e, "live")
				tx := tbl.NewTransaction()
				if err := tx.AddFiles(ctx, []string{"s3://" + e.srv.Info.Bucket + "/" + lateKey}, nil, false); err != nil {
					t.Errorf("commit the late file: %v", err)
				}
				if _, err := tx.Commit(ctx); err != nil {
					t.Errorf("commit the late file: %v", err)
				}
			})
		}
		return nil
	})
	defer e.srv.Purge.SetCrash(nil)
	run := e.sweep(t, "", map[string]any{})
	if run.State != store.JobSucceeded || run.FilesDeleted != int64(len(want)) || run.FilesSkipped != int64(len(late)) {
		t.Errorf("sweep: %s, %d deleted, %d skipped; want %d deleted, the late file skipped (%s)", run.State, run.FilesDeleted, run.FilesSkipped, len(want), strOf(run.LastError))
	}
	after := e.versions(t)
	var gone []string
	for v := range before {
		if !after[v] {
			gone = append(gone, v)
		}
	}
	slices.Sort(gone)
	if !slices.Equal(gone, slices.Sorted(maps.Keys(want))) {
		t.Fatalf("deleted:\n%s\nwant:\n%s", strings.Join(gone, "\n"), strings.Join(slices.Sorted(maps.Keys(want)), "\n"))
	}
	for name := range tables {
		if name == "soft" {
			continue
		}
		wantRows := rows[name]
		if name == "live" {
			wantRows += fileRows[files[0]] // the late file's rows (a copy of files[0])
		}
		if n := countRows(t, loadAt(t, e, name)); n != wantRows {
			t.Errorf("table %s scans %d rows, want %d", name, n, wantRows)
		}
	}
}

// planFiles are the keys of a table's live data files, and their rows.
func planFiles(t *testing.T, tbl *table.Table) ([]string, map[string]int64) {
	t.Helper()
	var out []string
	rows := map[string]int64{}
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		p := task.File.FilePath()
		k := strings.SplitN(p[strings.Index(p, "://")+3:], "/", 2)[1]
		out = append(out, k)
		rows[k] = task.File.Count()
	}
	slices.Sort(out)
	return out, rows
}

func loadAt(t *testing.T, e *sweepEnv, name string) *table.Table {
	t.Helper()
	tbl, err := e.cat.LoadTable(context.Background(), table.Identifier{"sw", name})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// writeManifest writes a manifest.json (from the foreign report's, changed)
// and its checksum at key.
func writeManifest(t *testing.T, e *sweepEnv, key string, change func(map[string]any)) {
	t.Helper()
	var m map[string]any
	src := strings.Replace(strings.Replace(key, "bad/", "", 1), "partial/", "", 1)
	if err := json.Unmarshal(e.read(t, server.InventoryBucket, src), &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	raw, _ := json.Marshal(m)
	st := e.srv.S3Emulator.Store
	if _, err := st.PutObject(server.InventoryBucket, key, bytes.NewReader(raw), emulators.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	sum := fmt.Sprintf("%x", md5.Sum(raw))
	if _, err := st.PutObject(server.InventoryBucket, strings.TrimSuffix(key, "json")+"checksum", strings.NewReader(sum), emulators.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

func strOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
