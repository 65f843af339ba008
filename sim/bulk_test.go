package sim

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Tables past a listing page: many small files, cheaply. A bulk commit adds
// 1,010 one-row data files in one snapshot (iceberg-go's AddFiles: a
// manifest of 1,010 entries, a purge that deletes 1,000 keys a call); a
// bulk of strays writes 1,010 or 10,050 objects the table never commits (a
// failed job's output), which only a purge's final listing, page after
// page, can find.

// fieldIDs: the parquet column ids of the simulation's schema (id 1, d 2).
var bulkSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{"1"})},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true, Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{"2"})},
}, nil)

// oneRowParquet is a parquet file of one row.
func oneRowParquet(id int64, day string) ([]byte, error) {
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, bulkSchema, strings.NewReader(fmt.Sprintf(`[{"id": %d, "d": %q}]`, id, day)))
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	tbl := array.NewTableFromRecords(bulkSchema, []arrow.Record{rec})
	defer tbl.Release()
	var buf bytes.Buffer
	if err := pqarrow.WriteTable(tbl, &buf, 1024, nil, pqarrow.DefaultWriterProps()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// putMany writes body under each key, 16 at a time.
func (s *Sim) putMany(keys []string, body []byte) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	ch := make(chan string)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ch {
				_, err := s.w.s3.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(body)})
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, k := range keys {
		ch <- k
	}
	close(ch)
	wg.Wait()
	return first
}

// opBulk commits 1,010 data files of one row each to a live table, or
// writes strays under it.
func (s *Sim) opBulk() *Op {
	var cands []*Gen
	for _, g := range s.m.inState(live) {
		if !g.forged && plainLocation(g.location) && strings.HasPrefix(g.location, "s3://") {
			cands = append(cands, g)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	g := pick(s, cands)
	n := 1010
	if s.chance(0.2) {
		n = 10050
	}
	// Committed bulks are the big-purge template's (it purges them soon:
	// every scan of 1,010 files costs).
	return s.bulkOf(g, false, n)
}

// bulkOf commits n one-row files to g, or writes n strays under it.
func (s *Sim) bulkOf(g *Gen, commit bool, n int) *Op {
	s.m.nextRow++
	id, day := s.m.nextRow, s.day()
	_, prefix := bucketKey(g.location)
	tag := fmt.Sprintf("bulk%d", id)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/data/%s/%05d.parquet", prefix, tag, i)
	}
	ns, name := g.ns, g.name
	op := &Op{kind: "bulk", keys: append(tableKeys(ns, name), "uuid:"+g.uuid), tolerateErr: true, want: []int{200}}
	if commit {
		op.desc = fmt.Sprintf("admin commits %d one-row data files (row %d, %s) to %s", n, id, day, g)
	} else {
		op.desc = fmt.Sprintf("an engine writes %d objects it never commits under %s", n, g)
	}
	var res appendResult
	op.run = func() Outcome {
		body, err := oneRowParquet(id, day)
		if err != nil {
			return Outcome{Err: err}
		}
		if err := s.putMany(keys, body); err != nil {
			return Outcome{Err: err}
		}
		if !commit {
			return Outcome{Status: 200}
		}
		t, _ := time.Parse("2006-01-02", day)
		days := int32(t.Unix() / 86400)
		res = s.withTable(admin, ns, name, func(tbl *table.Table) (*table.Table, error) {
			// The data files as an engine that wrote them names them (no
			// footer read back: 1,010 reads cost more than the test).
			dfs := make([]iceberg.DataFile, n)
			for i, k := range keys {
				b, err := iceberg.NewDataFileBuilder(tbl.Spec(), iceberg.EntryContentData, "s3://"+bucket+"/"+k, iceberg.ParquetFile,
					map[int]any{1000: days}, map[int]string{1000: "date"}, nil, 1, int64(len(body)))
				if err != nil {
					return nil, err
				}
				dfs[i] = b.Build()
			}
			tx := tbl.NewTransaction()
			if err := tx.AddDataFiles(s.ctx, dfs, nil, table.WithoutAutoNameMapping(), table.WithoutDuplicateCheck()); err != nil {
				return nil, err
			}
			return tx.Commit(s.ctx)
		})
		return res.out
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 || !commit {
			return nil
		}
		if err := s.committed(res.uuid, ns, name, res.meta, map[int64]string{id: day}, nil, contended); err != nil {
			return err
		}
		if g := s.genByUUID(res.uuid, "", "", live); g != nil {
			g.bulk = true // its rows are not scanned (1,010 files a scan)
		}
		return nil
	}
	return op
}
