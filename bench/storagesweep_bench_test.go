package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/store"
)

// sweepScaleEnv sets the storage sweep benchmark's scale: "tables,rows,rows…"
// (issue 33's is 1000,1000000,10000000: about 20 minutes and several GB
// here). The default keeps make bench within its budget.
const sweepScaleEnv = "ICEHOLD_BENCH_SWEEP"

// reqCount counts the emulator's S3 requests by kind.
type reqCount struct {
	mu                     sync.Mutex
	gets, puts, lists, all int
}

func (e env) countRequests() (*reqCount, func()) {
	c := &reqCount{}
	e.srv.S3Emulator.SetObserver(func(r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.all++
		q := r.URL.Query()
		switch {
		case r.Method == http.MethodGet && (q.Has("list-type") || q.Has("versions") || strings.Count(strings.Trim(r.URL.Path, "/"), "/") == 0):
			c.lists++
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			c.gets++
		case r.Method == http.MethodPut || r.Method == http.MethodPost:
			c.puts++
		}
	})
	return c, func() { e.srv.S3Emulator.SetObserver(nil) }
}

// BenchmarkStorageSweepVsListing: the storage sweep's dry run over an
// inventory report of every table's data files and 1% orphans, at two
// report sizes over the same tables, beside iceberg-go's listing-based
// Table.PlanOrphanFiles (what DeleteOrphanFiles plans with) on sample tables
// whose files exist, scaled to the same number of objects.
func BenchmarkStorageSweepVsListing(b *testing.B) {
	tables, sizes := 1000, []int{100_000, 1_000_000}
	if v := os.Getenv(sweepScaleEnv); v != "" {
		f := strings.Split(v, ",")
		n, err := strconv.Atoi(f[0])
		if err != nil || len(f) < 2 {
			b.Fatalf("%s=%q: want tables,rows[,rows…]", sweepScaleEnv, v)
		}
		tables, sizes = n, nil
		for _, s := range f[1:] {
			r, err := strconv.Atoi(s)
			if err != nil {
				b.Fatalf("%s=%q: %v", sweepScaleEnv, v, err)
			}
			sizes = append(sizes, r)
		}
	}
	largest := sizes[len(sizes)-1]
	perTable := max(largest/tables, 1)
	e := start(b)
	e.call(b, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"sw"}})
	began := time.Now()
	locs := make([]string, tables)
	for i := range tables {
		meta := e.synthTable(b, "sw", fmt.Sprintf("t%05d", i), perTable, min(perTable, 10_000), false)
		locs[i] = strings.TrimPrefix(meta[:strings.Index(meta, "/metadata/")], "s3://"+e.srv.Info.Bucket+"/")
	}
	build := time.Since(began)

	type run struct {
		rows    int
		elapsed time.Duration
		req     *reqCount
		peak    uint64
		base    uint64 // RSS as the sweep started
		orphans int64
	}
	var runs []run
	for range b.N {
		runs = runs[:0]
		for _, rows := range sizes {
			uri, orphans := e.syntheticReport(b, locs, rows/tables)
			cnt, stop := e.countRequests()
			// What building the tables left is returned to the OS first:
			// the peak is then the sweep's (and the emulators' live data).
			debug.FreeOSMemory()
			resetPeakRSS()
			base := peakRSS()
			t0 := time.Now()
			var j router.JobView
			_ = json.Unmarshal(e.call(b, "POST", "/lifecycle/v1/catalogs/demo/storage-sweep", map[string]any{"dry-run": true, "report": uri}), &j)
			j = e.awaitJob(b, j.ID)
			r := run{rows: rows, elapsed: time.Since(t0), req: cnt, peak: peakRSS(), base: base}
			stop()
			if j.State != store.JobSucceeded || j.StorageSweep == nil {
				b.Fatalf("sweep %s: %s %v", j.ID, j.State, j.LastError)
			}
			r.orphans = j.StorageSweep.Classes["orphan"].Objects
			if r.orphans != int64(orphans) {
				b.Errorf("sweep of %d rows found %d orphans, want %d", rows, r.orphans, orphans)
			}
			runs = append(runs, r)
		}
	}

	// iceberg-go: list the table's location, anti-join its reachable files.
	const sample = 5
	past := time.Now().Add(-10 * 24 * time.Hour)
	e.srv.S3Emulator.Store.SetClock(func() time.Time { return past })
	e.call(b, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"ls"}})
	for i := range sample {
		meta := e.synthTable(b, "ls", fmt.Sprintf("t%d", i), perTable, min(perTable, 10_000), true)
		loc := meta[:strings.Index(meta, "/metadata/")]
		for o := range max(perTable/100, 1) {
			e.put(b, fmt.Sprintf("%s/data/orphan-%08d.parquet", loc, o), []byte{})
		}
	}
	e.srv.S3Emulator.Store.SetClock(time.Now)
	ctx := context.Background()
	cat, err := rest.NewCatalog(ctx, "icehold", e.srv.Info.RESTURL, rest.WithOAuthToken(e.srv.Info.AdminToken), rest.WithWarehouseLocation("demo"))
	if err != nil {
		b.Fatal(err)
	}
	theirs, stop := e.countRequests()
	t0 := time.Now()
	found := 0
	for i := range sample {
		tbl, err := cat.LoadTable(ctx, table.Identifier{"ls", fmt.Sprintf("t%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		plan, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(72*time.Hour))
		if err != nil {
			b.Fatalf("iceberg-go PlanOrphanFiles: %v", err)
		}
		found += len(plan.Files())
	}
	theirTime := time.Since(t0)
	stop()
	if want := sample * max(perTable/100, 1); found < want {
		b.Errorf("iceberg-go found %d orphans on %d tables, want at least %d", found, sample, want)
	}

	fmt.Printf("\n== storage sweep: inventory join vs listing (%d tables of %d files; built in %s) ==\n", tables, perTable, build.Round(time.Second))
	fmt.Printf("%-44s %12s %10s %8s %8s %8s %12s %12s\n", "", "rows", "time", "GET", "PUT", "LIST", "peak RSS", "above start")
	for _, r := range runs {
		fmt.Printf("%-44s %12d %10s %8d %8d %8d %12s %12s\n", "icehold storage sweep (dry run, join)", r.rows+int(r.orphans), r.elapsed.Round(time.Millisecond),
			r.req.gets, r.req.puts, r.req.lists, mib(r.peak), mib(r.peak-min(r.base, r.peak)))
	}
	scale := float64(largest) / float64(sample*perTable)
	fmt.Printf("%-44s %12d %10s %8.0f %8.0f %8.0f %12s %12s\n", fmt.Sprintf("iceberg-go PlanOrphanFiles (%d tables, ×%.0f)", sample, scale), largest,
		time.Duration(float64(theirTime)*scale).Round(time.Millisecond), float64(theirs.gets)*scale, float64(theirs.puts)*scale, float64(theirs.lists)*scale, "-", "-")
	fmt.Printf("(S3 requests at the embedded S3 by anyone, the catalog's included; peak RSS: this process, emulators and catalog included;\n")
	fmt.Printf(" iceberg-go measured on %d tables whose files exist, scaled linearly: its listing is one LIST per 1,000 keys per table)\n", sample)
	if len(runs) > 1 {
		a, z := runs[0], runs[len(runs)-1]
		fmt.Printf("peak RSS %d rows / %d rows: %.2f (target ≤ 1.5); above start: %.2f; LIST requests: %d (target 0)\n", z.rows, a.rows,
			float64(z.peak)/float64(max(a.peak, 1)), float64(z.peak-min(z.base, z.peak))/float64(max(a.peak-min(a.base, a.peak), 1)), z.req.lists)
		b.ReportMetric(float64(z.peak)/float64(max(a.peak, 1)), "rss-ratio")
	}
}

// syntheticReport writes an inventory report of the warehouse bucket into
// the inventory bucket, as S3 delivers one: per table, its first per data
// files (reachable) and 1 orphan in 100, every one ten days old. It
// returns the manifest's URI and the orphans it lists.
func (e env) syntheticReport(b failer, locs []string, per int) (string, int) {
	st := e.srv.S3Emulator.Store
	bucket, dest := e.srv.Info.Bucket, server.InventoryBucket
	now := time.Now().UTC()
	base := fmt.Sprintf("bench/%s/icehold/%d/", bucket, now.UnixNano())
	modified := now.Add(-10 * 24 * time.Hour).Format("2006-01-02T15:04:05.000Z")
	m := map[string]any{"sourceBucket": bucket, "destinationBucket": "arn:aws:s3:::" + dest, "version": "2016-11-30",
		"creationTimestamp": strconv.FormatInt(now.UnixMilli(), 10), "fileFormat": "CSV", "fileSchema": emulators.InventorySchema}
	var files []map[string]any
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	rows, orphans := 0, 0
	flush := func() {
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
		key := fmt.Sprintf("%sdata/%05d.csv.gz", base, len(files))
		sum := md5.Sum(buf.Bytes())
		files = append(files, map[string]any{"key": key, "size": buf.Len(), "MD5checksum": hex.EncodeToString(sum[:])})
		if _, err := st.PutObject(dest, key, bytes.NewReader(buf.Bytes()), emulators.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		buf.Reset()
		zw.Reset(&buf)
		rows = 0
	}
	row := func(key string) {
		fmt.Fprintf(zw, "%q,%q,\"\",\"true\",\"false\",\"4096\",%q\n", bucket, key, modified)
		if rows++; rows == 1_000_000 {
			flush()
		}
	}
	for _, loc := range locs {
		for n := range per {
			row(fmt.Sprintf("%s/data/%08d.parquet", loc, n))
			if n%100 == 99 {
				row(fmt.Sprintf("%s/data/orphan-%08d.parquet", loc, n))
				orphans++
			}
		}
	}
	flush()
	m["files"] = files
	raw, _ := json.Marshal(m)
	if _, err := st.PutObject(dest, base+"manifest.json", bytes.NewReader(raw), emulators.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	sum := md5.Sum(raw)
	if _, err := st.PutObject(dest, base+"manifest.checksum", strings.NewReader(hex.EncodeToString(sum[:])), emulators.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	return "s3://" + dest + "/" + base + "manifest.json", orphans
}

// awaitJob polls a job until it ends.
func (e env) awaitJob(b failer, id string) router.JobView {
	for {
		var j router.JobView
		_ = json.Unmarshal(e.call(b, "GET", "/lifecycle/v1/catalogs/demo/purge-jobs/"+id, nil), &j)
		if store.Terminal(j.State) {
			return j
		}
		time.Sleep(100 * time.Millisecond)
	}
}
