package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
)

// Partition drop (SPEC §5, done-when 8): on a table of 1,000 day
// partitions × 50 data files, dropping the 100 oldest days with our route
// against iceberg-go's Transaction.Delete with the equivalent row filter
// (ts before the 101st day), on two identical copies. Both run against the
// same local server; S3 requests on the table's prefix are counted by the
// emulator (the catalog's own reads and writes of metadata files included,
// for both).
//
// The data files are metadata only (no object): each carries the bounds of
// its ts column, as any writer records them, so iceberg-go's strict metrics
// evaluator ends whole files without reading one (and a read would fail).

const (
	pdDays        = 1000
	pdFilesPerDay = 50
	pdDaysPerList = 10 // days per manifest: time-ordered appends, merged
	pdDrop        = 100
)

var pdSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
	iceberg.NestedField{ID: 2, Name: "v", Type: iceberg.PrimitiveTypes.Int64},
)

var pdSpec = iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}})

// pdEpoch is the first day (days since 1970: 2024-01-01).
const pdEpoch = 19723

// dayTable creates ns.name with pdDays × pdFilesPerDay data files in
// manifests of pdDaysPerList days, under one append snapshot, and returns
// its location.
func (e env) dayTable(b *testing.B, ns, name string) string {
	return e.daysTable(b, ns, name, pdDays, pdFilesPerDay, pdDaysPerList)
}

// daysTable is dayTable with days × perDay files in manifests of perList days.
func (e env) daysTable(b *testing.B, ns, name string, days, perDay, perList int) string {
	b.Helper()
	out := e.call(b, "POST", "/v1/demo/namespaces/"+ns+"/tables", map[string]any{
		"name":           name,
		"schema":         json.RawMessage(`{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"ts","type":"timestamptz","required":false},{"id":2,"name":"v","type":"long","required":false}]}`),
		"partition-spec": map[string]any{"spec-id": 0, "fields": []any{map[string]any{"source-id": 1, "field-id": 1000, "name": "ts_day", "transform": "day"}}},
		"properties":     map[string]string{"format-version": "2"},
	})
	var created struct {
		Metadata struct {
			Location string `json:"location"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(out, &created)
	loc := created.Metadata.Location
	const sid = int64(1)
	var manifests []iceberg.ManifestFile
	for m := 0; m < days/perList; m++ {
		var buf bytes.Buffer
		w, err := iceberg.NewManifestWriter(2, &buf, pdSpec, pdSchema, sid)
		if err != nil {
			b.Fatal(err)
		}
		for d := m * perList; d < (m+1)*perList; d++ {
			day := int32(pdEpoch + d)
			lo, _ := iceberg.TimestampLiteral(iceberg.Timestamp(int64(day) * 86_400_000_000)).MarshalBinary()
			hi, _ := iceberg.TimestampLiteral(iceberg.Timestamp(int64(day+1)*86_400_000_000 - 1)).MarshalBinary()
			for f := range perDay {
				path := fmt.Sprintf("%s/data/ts_day=%d/%05d.parquet", loc, day, f)
				df, err := iceberg.NewDataFileBuilder(pdSpec, iceberg.EntryContentData, path, iceberg.ParquetFile,
					map[int]any{1000: iceberg.Date(day)}, map[int]string{1000: "date"}, nil, 1000, 64<<20)
				if err != nil {
					b.Fatal(err)
				}
				df.ValueCounts(map[int]int64{1: 1000, 2: 1000}).NullValueCounts(map[int]int64{1: 0, 2: 0}).
					LowerBoundValues(map[int][]byte{1: lo}).UpperBoundValues(map[int][]byte{1: hi})
				if err := w.Add(iceberg.NewManifestEntry(iceberg.EntryStatusADDED, new(sid), nil, nil, df.Build())); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		mpath := fmt.Sprintf("%s/metadata/m-%05d.avro", loc, m)
		mf, err := w.ToManifestFile(mpath, int64(buf.Len()))
		if err != nil {
			b.Fatal(err)
		}
		e.put(b, mpath, buf.Bytes())
		manifests = append(manifests, mf)
	}
	var lbuf bytes.Buffer
	seq := sid
	if err := iceberg.WriteManifestList(2, &lbuf, sid, nil, &seq, 0, manifests); err != nil {
		b.Fatal(err)
	}
	lpath := loc + "/metadata/snap-00001.avro"
	e.put(b, lpath, lbuf.Bytes())
	e.call(b, "POST", "/v1/demo/namespaces/"+ns+"/tables/"+name, map[string]any{"requirements": []any{}, "updates": []any{
		map[string]any{"action": "add-snapshot", "snapshot": map[string]any{"snapshot-id": sid, "sequence-number": sid,
			"timestamp-ms": time.Now().UnixMilli(), "manifest-list": lpath, "schema-id": 0,
			"summary": map[string]string{"operation": "append", "added-data-files": strconv.Itoa(days * perDay)}}},
		map[string]any{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": sid},
	}})
	return loc
}

// ioCount is what one run asked of S3 under a table's prefix.
type ioCount struct {
	mu                      sync.Mutex
	reads, writes           int
	readBytes, writtenBytes int64
	readKeys                []string
	dataReads, dataWrites   int
	elapsed                 time.Duration
	filesEnded              string
}

// countIO observes the emulator's requests under prefix (bucket/key) until
// the returned stop; GETs are sized afterwards from the objects read
// (a ranged GET by its range).
func (e env) countIO(prefix string) (*ioCount, func()) {
	c := &ioCount{}
	e.srv.S3Emulator.SetObserver(func(r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/"+prefix) {
			return
		}
		key := strings.TrimPrefix(r.URL.Path, "/"+e.srv.Info.Bucket+"/")
		data := !strings.Contains(key, "/metadata/")
		c.mu.Lock()
		defer c.mu.Unlock()
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			c.reads++
			if data {
				c.dataReads++
			}
			if rg := r.Header.Get("Range"); rg != "" {
				var from, to int64
				if _, err := fmt.Sscanf(rg, "bytes=%d-%d", &from, &to); err == nil {
					c.readBytes += to - from + 1
					return
				}
			}
			if r.Method == http.MethodGet {
				c.readKeys = append(c.readKeys, key)
			}
		case http.MethodPut, http.MethodPost:
			c.writes++
			if data {
				c.dataWrites++
			}
			n := r.ContentLength
			if d := r.Header.Get("X-Amz-Decoded-Content-Length"); d != "" {
				n, _ = strconv.ParseInt(d, 10, 64)
			}
			c.writtenBytes += max(n, 0)
		}
	})
	return c, func() {
		e.srv.S3Emulator.SetObserver(nil)
		for _, k := range c.readKeys {
			if obj, err := e.srv.S3Emulator.Store.HeadObject(e.srv.Info.Bucket, k, ""); err == nil {
				c.readBytes += obj.Size
			}
		}
	}
}

func kib(n int64) string { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

func BenchmarkPartitionDropVsIcebergDelete(b *testing.B) {
	e := start(b)
	ctx := context.Background()
	e.call(b, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"pd"}})
	began := time.Now()
	locs := map[string]string{"ours": e.dayTable(b, "pd", "ours"), "theirs": e.dayTable(b, "pd", "theirs")}
	build := time.Since(began)
	prefix := func(name string) string { return strings.TrimPrefix(locs[name], "s3://") + "/" }

	// Ours: one request with the 100 oldest days.
	tuples := make([]map[string]string, pdDrop)
	for d := range pdDrop {
		tuples[d] = map[string]string{"ts_day": time.Unix(int64(pdEpoch+d)*86400, 0).UTC().Format("2006-01-02")}
	}
	ours, stop := e.countIO(prefix("ours"))
	t0 := time.Now()
	out := e.call(b, "POST", "/lifecycle/v1/catalogs/demo/namespaces/pd/tables/ours/partitions/drop", map[string]any{"partitions": tuples})
	ours.elapsed = time.Since(t0)
	stop()
	var res struct {
		DataFiles int64 `json:"data-files-ended"`
	}
	_ = json.Unmarshal(out, &res)
	ours.filesEnded = strconv.FormatInt(res.DataFiles, 10)

	// iceberg-go: load the table, Delete with the row filter, commit.
	cat, err := rest.NewCatalog(ctx, "icehold", e.srv.Info.RESTURL, rest.WithOAuthToken(e.srv.Info.AdminToken), rest.WithWarehouseLocation("demo"))
	if err != nil {
		b.Fatal(err)
	}
	cutoff := iceberg.Timestamp(int64(pdEpoch+pdDrop) * 86_400_000_000)
	theirs, stop := e.countIO(prefix("theirs"))
	t0 = time.Now()
	tbl, err := cat.LoadTable(ctx, table.Identifier{"pd", "theirs"})
	if err != nil {
		b.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.Delete(ctx, iceberg.LessThan(iceberg.Reference("ts"), cutoff), nil); err != nil {
		b.Fatalf("iceberg-go Delete: %v", err)
	}
	tbl, err = tx.Commit(ctx)
	theirs.elapsed = time.Since(t0)
	stop()
	if err != nil {
		b.Fatalf("iceberg-go commit: %v", err)
	}
	theirs.filesEnded = tbl.CurrentSnapshot().Summary.Properties["deleted-data-files"]

	fmt.Printf("\n== partition drop: %d of %d day partitions × %d files (%d manifests of %d days; tables built in %s) ==\n",
		pdDrop, pdDays, pdFilesPerDay, pdDays/pdDaysPerList, pdDaysPerList, build.Round(time.Millisecond))
	fmt.Printf("%-34s %10s %8s %8s %12s %8s %12s %10s %12s\n", "", "time", "files", "reads", "read", "writes", "written", "data r/w", "ended files")
	row := func(name string, c *ioCount) {
		fmt.Printf("%-34s %10s %8d %8d %12s %8d %12s %10s %12s\n", name, c.elapsed.Round(time.Millisecond), pdDays*pdFilesPerDay,
			c.reads, kib(c.readBytes), c.writes, kib(c.writtenBytes), fmt.Sprintf("%d/%d", c.dataReads, c.dataWrites), c.filesEnded)
	}
	row("icehold partition drop (100 tuples)", ours)
	row("iceberg-go Transaction.Delete", theirs)
	fmt.Printf("(reads and writes: S3 requests on the table's prefix, by client and catalog alike; bytes read: the objects GET)\n")
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2f", a/max(b, 1)) }
	fmt.Printf("icehold / iceberg-go: time %s, reads %s, bytes read %s, writes %s, bytes written %s (target: each ≤ 1)\n",
		ratio(float64(ours.elapsed), float64(theirs.elapsed)), ratio(float64(ours.reads), float64(theirs.reads)),
		ratio(float64(ours.readBytes), float64(theirs.readBytes)), ratio(float64(ours.writes), float64(theirs.writes)),
		ratio(float64(ours.writtenBytes), float64(theirs.writtenBytes)))
	if ours.filesEnded != strconv.Itoa(pdDrop*pdFilesPerDay) || theirs.filesEnded != ours.filesEnded {
		b.Errorf("files ended: ours %s, iceberg-go %s, want %d each", ours.filesEnded, theirs.filesEnded, pdDrop*pdFilesPerDay)
	}
	b.ReportMetric(float64(ours.readBytes)/float64(max(theirs.readBytes, 1)), "read-ratio")
}
