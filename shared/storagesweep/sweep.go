// Package storagesweep finds the files engines wrote and never committed,
// and the noncurrent versions past their window, without listing the
// bucket (SPEC §3, storage sweep): it joins an S3 Inventory report against
// the ownership index and every table's reachable files, and deletes what
// it may through the delete pipeline, as a job of kind sweep.
//
// A sweep is planned in steps, one per run of the purge workflow's plan
// step (each bounded well inside Lambda's 15 minutes):
//
//	scan   one step per data file of the report: its rows, cut by a hash of the key into sections (working files)
//	list   the tables of every warehouse bucket (the ownership index), and why some must be kept
//	reach  the files each table reaches, hashed and cut the same way (steps bounded in time)
//	split  the sections grouped into join steps of bounded size
//	join   one step per group: every version of every key meets its reachability; deletions become batches
//
// Then the workflow sends the batches through the delete queue like any
// job's; each batch checks its files again before it deletes them.
package storagesweep

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// Service plans storage sweeps and checks their deletions.
type Service struct {
	Catalog *catalog.Service
	Purge   *purge.Service
	// S3 reads reports and reads and writes the sweep's working files (in
	// the report's destination bucket, under SpillPrefix).
	S3 S3
	// IOProps configure iceberg-go's FileIO (manifest lists and manifests).
	IOProps map[string]string
	// Buckets are the warehouse buckets whose tables count for
	// reachability; none: the buckets of every catalog's warehouse.
	Buckets []string
	// StepBudget is how long a reach step reads tables before it stops
	// (0: 5 minutes, half of what remains of Lambda's 15 with room).
	StepBudget time.Duration
	// Now is the sweep's clock (nil: time.Now).
	Now func() time.Time
}

// SpillPrefix is where a sweep's working files go in the report's
// destination bucket (the stack expires them after a week).
const SpillPrefix = "icehold-sweep/"

// The stages of a sweep's plan.
const (
	stageScan  = "scan"
	stageList  = "list"
	stageReach = "reach"
	stageSplit = "split"
	stageJoin  = "join"
	stageDone  = "done"
)

// Errors of a sweep request.
var (
	// ErrNoReport: no report was named and none has been recorded for the
	// catalog's bucket.
	ErrNoReport = errors.New("no inventory report")
	// ErrSweepRunning: a sweep of the catalog is already under way.
	ErrSweepRunning = errors.New("a storage sweep of this catalog is under way")
)

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Request is a sweep asked for: of a catalog, or of one table of it.
type Request struct {
	Catalog   string
	Namespace []string
	Table     string
	DryRun    bool
	// Report is the s3:// URI of a report's manifest.json; "": the newest
	// recorded for the catalog's bucket.
	Report string
}

// Start checks the report and the settings and creates the sweep's job
// (PENDING; its workflow plans it step by step). A refused report is an
// error naming why, and no job is made.
func (s *Service) Start(ctx context.Context, req Request) (store.Job, error) {
	st := s.Catalog.Store()
	c, err := s.Catalog.GetCatalog(ctx, req.Catalog)
	if err != nil {
		return store.Job{}, err
	}
	scope, err := objects.Prefix(c.Warehouse)
	if err != nil {
		return store.Job{}, fmt.Errorf("warehouse of catalog %s: %w", req.Catalog, err)
	}
	if req.Table != "" {
		e, err := s.Catalog.Entry(ctx, req.Catalog, catalog.Ident{Namespace: req.Namespace, Name: req.Table})
		if err != nil {
			return store.Job{}, err
		}
		if e.Hold == nil {
			return store.Job{}, fmt.Errorf("%w: table %s owns no location (it overlaps an older owner), so no file is its own to sweep",
				catalog.ErrBadRequest, catalog.Ident{Namespace: req.Namespace, Name: req.Table})
		}
	}
	orphan, version, err := Windows(c.Properties)
	if err != nil {
		return store.Job{}, err
	}
	if err := s.checkNoSweep(ctx, req.Catalog); err != nil {
		return store.Job{}, err
	}
	uri := req.Report
	if uri == "" {
		r, err := st.LatestReport(ctx, scope.Bucket)
		if errors.Is(err, store.ErrNotFound) {
			return store.Job{}, fmt.Errorf("%w recorded for bucket %s (S3 delivers the first within 48 hours of the inventory's configuration; name one with report)", ErrNoReport, scope.Bucket)
		}
		if err != nil {
			return store.Job{}, err
		}
		uri = r.Manifest
	}
	rep, err := ReadReport(ctx, s.S3, uri, scope.Bucket, s.now())
	if err != nil {
		return store.Job{}, err
	}
	j := store.Job{
		ID: purge.NewJobID(), Kind: store.KindSweep, Catalog: req.Catalog, Namespace: req.Namespace, Table: req.Table,
		State: store.JobPending, Attempts: 1, CreatedBy: authz.Principal(ctx), GCEnabled: true, Scope: scope.URI() + "/",
	}
	if j.CreatedBy == "" {
		j.CreatedBy = "icehold:storage-sweep"
	}
	j.Execution = j.ID
	j.StorageSweep = &store.StorageSweep{
		Report: uri, Bucket: scope.Bucket, ReportTime: rep.Created.UnixMilli(), Scope: scope.URI(),
		Spill: "s3://" + rep.Bucket + "/" + SpillPrefix + j.ID + "/", DryRun: req.DryRun,
		OrphanWindow: catalog.FormatDuration(orphan), VersionWindow: catalog.FormatDuration(version),
		Stage: stageScan, Items: len(rep.Manifest.Files),
	}
	if err := st.CreateJob(ctx, j, outbox.Record(purge.JobEvent(eventbus.PurgeStarted, j, map[string]any{"report": uri, "dry-run": req.DryRun}))); err != nil {
		return store.Job{}, err
	}
	s.Purge.Started(ctx, j)
	return st.GetJob(ctx, j.Catalog, j.ID) // as stored: its times are the store's
}

// checkNoSweep refuses a second sweep of a catalog while one runs.
func (s *Service) checkNoSweep(ctx context.Context, cat string) error {
	st := s.Catalog.Store()
	token := ""
	for {
		page, next, err := st.ActiveJobs(ctx, token, 100)
		if err != nil {
			return err
		}
		for _, a := range page {
			if a.Catalog != cat {
				continue
			}
			j, err := st.GetJob(ctx, a.Catalog, a.ID)
			if err == nil && j.Kind == store.KindSweep && !store.Terminal(j.State) {
				return fmt.Errorf("%w: job %s (%s)", ErrSweepRunning, j.ID, j.State)
			}
		}
		if next == "" {
			return nil
		}
		token = next
	}
}

// ReportArrived is what the stack's EventBridge rule calls when S3 has
// delivered a report (its manifest.checksum, written with the manifest):
// it records the report as its bucket's newest and sweeps that bucket.
func (s *Service) ReportArrived(ctx context.Context, bucket, manifestKey string) ([]store.Job, error) {
	source, err := s.Record(ctx, "s3://"+bucket+"/"+manifestKey)
	if err != nil {
		return nil, err
	}
	return s.SweepBucket(ctx, source)
}

// Record remembers a report as the newest of the bucket it lists, which
// it returns.
func (s *Service) Record(ctx context.Context, uri string) (string, error) {
	bucket, key, err := objects.Split(uri)
	if err != nil {
		return "", refuse(uri, ErrMalformed, "not an s3:// URI")
	}
	m, err := get(ctx, s.S3, bucket, key, maxManifestBytes)
	if err != nil {
		return "", refuseMissing(uri, "manifest.json", err)
	}
	var man Manifest
	if err := json.Unmarshal(m, &man); err != nil || man.SourceBucket == "" {
		return "", refuse(uri, ErrMalformed, "manifest.json names no sourceBucket")
	}
	return man.SourceBucket, s.Catalog.Store().PutReport(ctx, store.SweepReport{Bucket: man.SourceBucket, Manifest: uri})
}

// SweepBucket starts a sweep, on the bucket's newest report, of every
// catalog whose warehouse lies in it and whose storage-sweep.enabled is
// not false, and answers the jobs started. A catalog whose sweep cannot
// start (one still running, a refused report) is logged and skipped.
func (s *Service) SweepBucket(ctx context.Context, bucket string) ([]store.Job, error) {
	cats, err := s.Catalog.Store().ListCatalogs(ctx)
	if err != nil {
		return nil, err
	}
	started := []store.Job{}
	for _, c := range cats {
		w, err := objects.Prefix(c.Warehouse)
		if err != nil || w.Bucket != bucket || !Enabled(c.Properties) {
			continue
		}
		j, err := s.Start(ctx, Request{Catalog: c.Name})
		if err != nil {
			slog.Warn("storage sweep not started", "catalog", c.Name, "bucket", bucket, "error", err)
			continue
		}
		started = append(started, j)
	}
	return started, nil
}

// Plan runs the next step of a sweep job's plan (purge.Planner): true
// once its deletion batches are written.
func (s *Service) Plan(ctx context.Context, j store.Job) (bool, error) {
	sw := j.StorageSweep
	if sw == nil {
		return false, fmt.Errorf("job %s: %w: no storage sweep state", j.ID, purge.ErrRefused)
	}
	if sw.Stage == stageDone {
		return true, nil
	}
	// A report that went stale while the sweep ran is refused: nothing
	// was deleted yet (the batches go out once the plan is done).
	if age := s.now().Sub(time.UnixMilli(sw.ReportTime)); age > MaxReportAge {
		return false, refuse(sw.Report, ErrStale, "created %s, %s ago by the sweep's %s step; a report older than %s is not used",
			time.UnixMilli(sw.ReportTime).UTC().Format(time.RFC3339), age.Round(time.Minute), sw.Stage, MaxReportAge)
	}
	next := *sw
	next.Counts = clone(sw.Counts)
	var err error
	switch sw.Stage {
	case stageScan:
		err = s.scan(ctx, j, &next)
	case stageList:
		err = s.list(ctx, j, &next)
	case stageReach:
		err = s.reach(ctx, j, &next)
	case stageSplit:
		err = s.split(ctx, j, &next)
	case stageJoin:
		err = s.join(ctx, j, &next)
	default:
		return false, fmt.Errorf("job %s: %w: stage %q", j.ID, purge.ErrRefused, sw.Stage)
	}
	if err != nil {
		return false, err
	}
	if len(next.Counts) == 0 {
		// Not written as an empty map: the embedded DynamoDB (minidyn)
		// answers an empty M set by UpdateItem as a number.
		next.Counts = nil
	}
	set := map[string]any{"storage_sweep": next, "storage_sweep_step": j.StorageSweepStep + 1}
	if next.Stage == stageDone {
		set["planned"], set["batches_total"] = true, next.Batches
	}
	err = s.Catalog.Store().UpdateJob(ctx, j, store.JobUpdate{
		Set: set, States: []string{store.JobRunning},
		Cond: "storage_sweep_step = :st", CondValues: map[string]any{":st": j.StorageSweepStep},
	})
	if errors.Is(err, store.ErrConditionFailed) {
		return false, nil // a concurrent run of this step got there first
	}
	return next.Stage == stageDone, err
}

// scan reads one data file of the report into working files.
func (s *Service) scan(ctx context.Context, j store.Job, next *store.StorageSweep) error {
	sw := j.StorageSweep
	rep, err := ReadReport(ctx, s.S3, sw.Report, sw.Bucket, s.now())
	if err != nil {
		return err
	}
	if len(rep.Manifest.Files) != sw.Items {
		return refuse(sw.Report, ErrMalformed, "it names %d data files, %d when the sweep started", len(rep.Manifest.Files), sw.Items)
	}
	scope := scopeKey(sw.Scope)
	sp := s.spill(ctx, j, next)
	if sw.Item < sw.Items {
		err := rep.Rows(ctx, s.S3, sw.Item, func(r Row) error {
			if !strings.HasPrefix(r.Key, scope) {
				return nil
			}
			return sp.addRow(r, hashOf(r.Key))
		})
		if err != nil {
			return err
		}
		if err := sp.flush(); err != nil {
			return err
		}
	}
	next.Item++
	if next.Item >= sw.Items {
		next.Stage, next.Item, next.Items = stageList, 0, 1
	}
	return nil
}

// list records the tables whose reachable files count.
func (s *Service) list(ctx context.Context, j store.Job, next *store.StorageSweep) error {
	buckets := s.Buckets
	if len(buckets) == 0 {
		cats, err := s.Catalog.Store().ListCatalogs(ctx)
		if err != nil {
			return err
		}
		for _, c := range cats {
			if w, err := objects.Prefix(c.Warehouse); err == nil && !slices.Contains(buckets, w.Bucket) {
				buckets = append(buckets, w.Bucket)
			}
		}
	}
	tables, err := s.listTables(ctx, buckets, j.ID)
	if err != nil {
		return err
	}
	sortTables(tables)
	pages := 0
	for len(tables) > 0 {
		n := min(tablePage, len(tables))
		if err := s.Catalog.Store().PutSweepTables(ctx, j.ID, pages, tables[:n]); err != nil {
			return err
		}
		tables, pages = tables[n:], pages+1
	}
	next.Dirs = pages
	next.Stage, next.Item, next.Offset, next.Items = stageReach, 0, 0, pages
	if pages == 0 {
		next.Stage, next.Items = stageSplit, 1
	}
	return nil
}

// reach reads the reachable files of the tables of one page, from the
// step's offset, until its time budget is spent.
func (s *Service) reach(ctx context.Context, j store.Job, next *store.StorageSweep) error {
	sw := j.StorageSweep
	st := s.Catalog.Store()
	tables, err := st.SweepTables(ctx, j.ID, sw.Item)
	if err != nil {
		return err
	}
	budget := s.StepBudget
	if budget == 0 {
		budget = 5 * time.Minute
	}
	start := time.Now()
	sp := s.spill(ctx, j, next)
	changed := false
	i := sw.Offset
	for ; i < len(tables) && (i == sw.Offset || time.Since(start) < budget); i++ {
		t := &tables[i]
		if t.View {
			continue // a view's location holds metadata files only
		}
		var addErr error
		err := s.reachable(ctx, t.Metadata, func(path string) {
			if obj, err := objects.Parse(path); err == nil && obj.Bucket == sw.Bucket && addErr == nil {
				addErr = sp.addHash(hashOf(obj.Key))
			}
		})
		if addErr != nil {
			return addErr
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Its reachable files are unknown: none of them may go.
			slog.Warn("storage sweep: a table's files are kept, its metadata is unreadable", "job", j.ID, "table", t.Name, "metadata", t.Metadata, "error", err)
			t.Protected, changed = protectUnreadable+": "+err.Error(), true
		}
	}
	if changed {
		if err := st.PutSweepTables(ctx, j.ID, sw.Item, tables); err != nil {
			return err
		}
	}
	if err := sp.flush(); err != nil {
		return err
	}
	next.Offset = i
	if i >= len(tables) {
		next.Item, next.Offset = sw.Item+1, 0
	}
	if next.Item >= sw.Items {
		next.Stage, next.Item, next.Items = stageSplit, 0, 1
	}
	return nil
}

// joinBudget bounds the bytes of working files one join step reads (its
// memory is a small multiple of it).
const joinBudget = 32 << 20

// split groups the sections into join steps of at most joinBudget bytes
// (a section larger than that is a step of its own).
func (s *Service) split(ctx context.Context, j store.Job, next *store.StorageSweep) error {
	chunks, err := s.Catalog.Store().SweepChunks(ctx, j.ID, j.StorageSweep.Chunks)
	if err != nil {
		return err
	}
	sizes := make([]int64, Sections)
	for _, c := range chunks {
		off, err := decodeOffsets(c.Offsets)
		if err != nil {
			return fmt.Errorf("working file %s: %w", c.Key, err)
		}
		for sec := range Sections {
			sizes[sec] += off[sec+1] - off[sec]
		}
	}
	ranges := []int{0}
	var acc int64
	for sec, n := range sizes {
		if acc > 0 && acc+n > joinBudget {
			ranges = append(ranges, sec)
			acc = 0
		}
		acc += n
	}
	ranges = append(ranges, Sections)
	next.Ranges = ranges
	next.Stage, next.Item, next.Items = stageJoin, 0, len(ranges)-1
	return nil
}

// join classifies the keys of one group of sections and writes the
// deletion batches of what goes.
func (s *Service) join(ctx context.Context, j store.Job, next *store.StorageSweep) error {
	sw := j.StorageSweep
	st := s.Catalog.Store()
	lo, hi := sw.Ranges[sw.Item], sw.Ranges[sw.Item+1]
	chunks, err := st.SweepChunks(ctx, j.ID, sw.Chunks)
	if err != nil {
		return err
	}
	spill, err := objects.Prefix(sw.Spill)
	if err != nil {
		return err
	}
	var rows []Row
	var reached []uint64
	for _, c := range chunks {
		off, err := decodeOffsets(c.Offsets)
		if err != nil {
			return fmt.Errorf("working file %s: %w", c.Key, err)
		}
		b, err := readRange(ctx, s.S3, spill.Bucket, c.Key, off[lo], off[hi])
		if err != nil {
			return err
		}
		for sec := lo; sec < hi; sec++ {
			part := b[off[sec]-off[lo] : off[sec+1]-off[lo]]
			if c.Hashes {
				for k := 0; k+8 <= len(part); k += 8 {
					reached = append(reached, binary.LittleEndian.Uint64(part[k:]))
				}
				continue
			}
			if rows, err = decodeRows(part, rows); err != nil {
				return fmt.Errorf("working file %s: %w", c.Key, err)
			}
		}
	}
	slices.Sort(reached)
	sortRows(rows)
	claims, err := st.ClaimsIn(ctx, sw.Bucket)
	if err != nil {
		return err
	}
	tables := map[string]*store.SweepTable{}
	var only *store.SweepTable
	for n := range sw.Dirs {
		page, err := st.SweepTables(ctx, j.ID, n)
		if err != nil {
			return err
		}
		for i := range page {
			t := &page[i]
			for _, h := range t.Holds {
				tables[h] = t
			}
		}
	}
	if j.Table != "" {
		only = &store.SweepTable{Catalog: j.Catalog, Namespace: j.Namespace, Name: j.Table}
	}
	orphanWindow, _ := catalog.ParseDuration(sw.OrphanWindow)
	versionWindow, _ := catalog.ParseDuration(sw.VersionWindow)
	report := time.UnixMilli(sw.ReportTime)
	var cands []candidate
	jd := &judge{
		owners: newOwnerIndex(claims), tables: tables, reached: reached, only: only, scope: scopeKey(sw.Scope),
		orphanBefore: report.Add(-orphanWindow).UnixMilli(), versionBefore: report.Add(-versionWindow).UnixMilli(),
		counts: next.Counts, unowned: next.Unowned,
		emit: func(c candidate) { cands = append(cands, c) },
	}
	each(rows, jd.key)
	next.Unowned = jd.unowned
	if !sw.DryRun && len(cands) > 0 {
		batches := sweepBatches(j.ID, sw.Batches, sw.Bucket, cands)
		if err := st.PutBatches(ctx, batches); err != nil {
			return err
		}
		next.Batches += len(batches)
	}
	next.Item++
	if next.Item >= sw.Items {
		next.Stage = stageDone
	}
	return nil
}

// maxBatchPathBytes keeps a batch record well under DynamoDB's 400 KB.
const maxBatchPathBytes = 250 << 10

// sweepBatches cuts candidates (in key order) into deletion batches
// numbered from first: at most a DeleteObjects call of versions each.
func sweepBatches(job string, first int, bucket string, cands []candidate) []store.Batch {
	var out []store.Batch
	for len(cands) > 0 {
		b := store.Batch{JobID: job, Number: first + len(out), Sweep: &store.SweepBatch{}}
		owners := map[store.SweepOwner]int{}
		size := 0
		n := 0
		for n < len(cands) && n < purge.MaxKeysPerCall && (n == 0 || size+len(cands[n].key) <= maxBatchPathBytes) {
			c := cands[n]
			o := store.SweepOwner{Claim: c.owner, Metadata: c.metadata}
			at, ok := owners[o]
			if !ok {
				at = len(b.Sweep.Owners)
				owners[o] = at
				b.Sweep.Owners = append(b.Sweep.Owners, o)
			}
			b.Files = append(b.Files, "s3://"+bucket+"/"+c.key)
			b.Versions = append(b.Versions, c.version)
			b.Sizes = append(b.Sizes, c.size)
			b.Sweep.Of = append(b.Sweep.Of, at)
			b.Sweep.Noncurrent = append(b.Sweep.Noncurrent, c.noncurrent)
			size += len(c.key) + len(c.version)
			n++
		}
		out = append(out, b)
		cands = cands[n:]
	}
	return out
}

// spill is a step's working-file writer: each file it writes is recorded
// under the next chunk number.
func (s *Service) spill(ctx context.Context, j store.Job, next *store.StorageSweep) *spill {
	loc, _ := objects.Prefix(next.Spill)
	return &spill{write: func(body []byte, offsets []int64, hashes bool) error {
		n := next.Chunks
		key := loc.Key + "/" + strconv.Itoa(n) + ".bin"
		if err := put(ctx, s.S3, loc.Bucket, key, body); err != nil {
			return fmt.Errorf("write working file %s: %w", key, err)
		}
		c := store.SweepChunk{Number: n, Key: key, Hashes: hashes, Offsets: encodeOffsets(offsets)}
		if err := s.Catalog.Store().PutSweepChunk(ctx, j.ID, c); err != nil {
			return err
		}
		next.Chunks++
		return nil
	}}
}

// scopeKey is the key prefix (with its '/') under an s3:// prefix ("" for
// a whole bucket).
func scopeKey(uri string) string {
	l, err := objects.Prefix(uri)
	if err != nil || l.Key == "" {
		return ""
	}
	return l.Key + "/"
}

func clone(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m)+2*len(Classes))
	for k, v := range m {
		out[k] = v
	}
	return out
}
