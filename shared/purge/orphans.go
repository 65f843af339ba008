package purge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/store"
)

// IntentTTL is how old a pending-write intent must be before the sweep takes
// its files for orphans. A request that wrote them has ended long before (API
// Gateway gives up after 29 s; the API function's timeout is 30 s).
const IntentTTL = time.Hour

// MaxSweepIntents is one page of a sweep run: the intents one job per
// catalog takes. A run takes pages until none is left, up to
// maxSweepPages (the next run takes the rest: More).
const MaxSweepIntents = 1000

const maxSweepPages = 20

// OrphanReport says what one orphan sweep did.
type OrphanReport struct {
	Intents int      `json:"intents"`
	Files   int      `json:"files"`
	Jobs    []string `json:"jobs"`
	// More: stale intents were left for the next run.
	More bool `json:"more,omitempty"`
}

// SweepOrphans turns the files of stale intents (older than IntentTTL at now) (metadata files a request
// wrote but never made current: a lost create, a lost commit) into one job
// of kind orphans per catalog. The job goes through the delete queue like a
// purge; its delete step re-checks each file against the ownership index
// and the owner's metadata, so a file something references is never
// deleted (a registered copy of a lost commit's file, say).
func (s *Service) SweepOrphans(ctx context.Context, now time.Time) (OrphanReport, error) {
	var rep OrphanReport
	for page := 0; ; page++ {
		if page == maxSweepPages {
			rep.More = true
			return rep, nil
		}
		n, err := s.sweepPage(ctx, now, &rep)
		if err != nil || n < MaxSweepIntents {
			return rep, err
		}
	}
}

// sweepPage sweeps the oldest page of stale intents (a run deletes each
// page's intents before it reads the next) and returns how many it took.
func (s *Service) sweepPage(ctx context.Context, now time.Time, rep *OrphanReport) (int, error) {
	stale, err := s.Store.StaleIntents(ctx, now.Add(-IntentTTL), MaxSweepIntents)
	if err != nil || len(stale) == 0 {
		return 0, err
	}
	byCatalog := map[string][]store.Intent{}
	for _, in := range stale {
		byCatalog[in.Catalog] = append(byCatalog[in.Catalog], in)
	}
	for _, cat := range slices.Sorted(maps.Keys(byCatalog)) {
		intents := byCatalog[cat]
		j, files, err := s.orphanJob(ctx, cat, intents)
		if err != nil {
			return 0, fmt.Errorf("orphans of catalog %s: %w", cat, err)
		}
		// The job is the record now: a crash before the intents go makes
		// the next run send the same files again (deleting twice is harmless).
		for _, in := range intents {
			if err := s.Store.DeleteIntent(ctx, in); err != nil {
				return 0, err
			}
		}
		rep.Intents += len(intents)
		rep.Files += files
		if j.ID != "" {
			rep.Jobs = append(rep.Jobs, j.ID)
			s.Started(ctx, j)
		}
	}
	return len(stale), nil
}

// orphanJob writes one catalog's orphans job: its batches (one bucket each,
// at most a DeleteObjects call of keys) and then the job, already planned.
func (s *Service) orphanJob(ctx context.Context, cat string, intents []store.Intent) (store.Job, int, error) {
	var files []store.ListedFile
	for _, in := range intents {
		for _, f := range in.Files {
			files = append(files, store.ListedFile{Path: f})
		}
	}
	j := store.Job{
		ID: NewJobID(), Kind: store.KindOrphans, Catalog: cat, State: store.JobPending, Attempts: 1,
		CreatedBy: "icehold:orphan-sweep", Planned: true, GCEnabled: true,
	}
	j.Execution = j.ID
	batches, n := fileBatches(j.ID, files)
	if len(batches) == 0 {
		return store.Job{}, 0, nil
	}
	j.BatchesTotal = len(batches)
	if err := s.Store.PutBatches(ctx, batches); err != nil {
		return j, 0, err
	}
	if err := s.crash("orphans.batches-written"); err != nil {
		return j, 0, err
	}
	return j, n, s.Store.CreateJob(ctx, j, outbox.Record(JobEvent(eventbus.PurgeStarted, j, nil)))
}

// maxBatchPathBytes keeps a batch record well under DynamoDB's 400 KB item
// limit whatever its paths' lengths (S3 keys run to 1,024 bytes).
const maxBatchPathBytes = 300 << 10

// fileBatches cuts files into the batches of a job whose batches name
// their files: each file once, one bucket per batch (a DeleteObjects call),
// at most MaxKeysPerCall files and maxBatchPathBytes of paths each. Paths
// that are not S3 objects are left out. It returns the batches and the
// number of files in them.
func fileBatches(jobID string, files []store.ListedFile) ([]store.Batch, int) {
	perBucket := map[string][]store.ListedFile{}
	for _, f := range files {
		if obj, err := objects.Parse(f.Path); err == nil && obj.Key != "" {
			perBucket[obj.Bucket] = append(perBucket[obj.Bucket], f)
		}
	}
	var batches []store.Batch
	n := 0
	for _, b := range slices.Sorted(maps.Keys(perBucket)) {
		fs := perBucket[b]
		slices.SortFunc(fs, func(x, y store.ListedFile) int { return strings.Compare(x.Path, y.Path) })
		fs = slices.CompactFunc(fs, func(x, y store.ListedFile) bool { return x.Path == y.Path })
		n += len(fs)
		for len(fs) > 0 {
			end, size := 0, 0
			for end < len(fs) && end < MaxKeysPerCall && (end == 0 || size+len(fs[end].Path) <= maxBatchPathBytes) {
				size += len(fs[end].Path)
				end++
			}
			batch := store.Batch{JobID: jobID, Number: len(batches)}
			described := false
			for _, f := range fs[:end] {
				batch.Files = append(batch.Files, f.Path)
				batch.Sizes = append(batch.Sizes, f.Size)
				batch.Kinds = append(batch.Kinds, f.Kind)
				described = described || f.Size > 0 || f.Kind != ""
			}
			if !described {
				batch.Sizes, batch.Kinds = nil, nil
			}
			batches = append(batches, batch)
			fs = fs[end:]
		}
	}
	return batches, n
}

// runFilesBatch deletes, in one call, the files of a batch that names them
// (orphans, expire) which the job's check lets go, and closes the batch.
// What the check keeps is counted skipped.
func (s *Service) runFilesBatch(ctx context.Context, j store.Job, b store.Batch) error {
	if b.Done {
		return nil
	}
	var may func(context.Context, int) (objects.Location, bool, error)
	switch j.Kind {
	case store.KindOrphans:
		may = byPath(b, (&orphanCheck{s: s, dirs: map[string]*references{}}).unreferenced)
	case store.KindExpire:
		may = byPath(b, newClaimCheck(s.Store, j).owned)
	default:
		check := s.FileChecks[j.Kind]
		if check == nil {
			return fmt.Errorf("job %s of kind %q has no files to delete", j.ID, j.Kind)
		}
		var err error
		if may, err = check(ctx, j, b); err != nil {
			return err
		}
	}
	var objs []object
	bucket, skipped := "", int64(0)
	for i := range b.Files {
		obj, ok, err := may(ctx, i)
		if err != nil {
			return err
		}
		if !ok {
			skipped++
			continue
		}
		bucket = obj.Bucket
		o := object{key: obj.Key, kind: kindOfPath(obj.Key)}
		if i < len(b.Sizes) {
			o.size = b.Sizes[i]
		}
		if i < len(b.Kinds) && listedKinds[b.Kinds[i]] != "" {
			o.kind = listedKinds[b.Kinds[i]]
		}
		if i < len(b.Versions) {
			o.version = b.Versions[i]
		}
		objs = append(objs, o)
	}
	t, err := s.deleteObjects(ctx, bucket, j.Scope, objs)
	if err != nil {
		return err
	}
	if err := s.crash("delete.before-checkpoint"); err != nil {
		return err
	}
	counters := t.counters(skipped)
	err = s.Store.StepBatch(ctx, j, b, store.BatchStep{From: [2]int{b.Manifest, b.Entry}, To: [2]int{1, 0}, Done: true, Counters: counters, WasDead: b.Dead})
	if errors.Is(err, store.ErrConditionFailed) {
		return nil // another delivery closed it
	}
	if err != nil {
		return err
	}
	if b.Dead {
		return s.revive(ctx, BatchMessage{Catalog: j.Catalog, JobID: j.ID})
	}
	return nil
}

// byPath checks a batch's files by their paths.
func byPath(b store.Batch, check func(context.Context, string) (objects.Location, bool, error)) func(context.Context, int) (objects.Location, bool, error) {
	return func(ctx context.Context, i int) (objects.Location, bool, error) { return check(ctx, b.Files[i]) }
}

// orphanCheck decides, per file of an orphans batch, whether it may go. The
// files of one directory share an owner, so each directory is looked up once.
type orphanCheck struct {
	s    *Service
	dirs map[string]*references
}

// references is what the owner of a directory references: free (nobody,
// or only a warehouse, owns it), or the files its metadata names.
type references struct {
	free  bool
	files map[string]bool
}

// unreferenced says whether a file of a stale intent may go: nobody owns its
// location, or its owner's metadata (current file and metadata log) does not
// name it. Whatever cannot be decided keeps the file.
func (c *orphanCheck) unreferenced(ctx context.Context, path string) (objects.Location, bool, error) {
	obj, ok := candidate(path)
	if !ok {
		return obj, false, nil
	}
	dir := obj.Bucket + "/" + obj.Key[:max(strings.LastIndexByte(obj.Key, '/'), 0)]
	refs, ok := c.dirs[dir]
	if !ok {
		var err error
		if refs, err = c.referencesAt(ctx, obj, path); err != nil {
			return obj, false, err
		}
		c.dirs[dir] = refs
	}
	if refs == nil {
		return obj, false, nil // undecided: keep
	}
	return obj, refs.free || !refs.files[path], nil
}

// referencesAt reads the owner of obj and what it references; nil when that
// cannot be decided (the owner vanished meanwhile, its metadata unreadable).
func (c *orphanCheck) referencesAt(ctx context.Context, obj objects.Location, path string) (*references, error) {
	s := c.s
	owner, err := s.Store.OwnerAt(ctx, obj.Bucket, obj.Key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &references{free: true}, nil
	case err != nil:
		return nil, err
	case owner.Kind == store.OwnerWarehouse:
		return &references{free: true}, nil // in a warehouse, under no table's location
	}
	var current []string
	switch {
	case owner.JobID != "":
		j, err := s.Store.GetJob(ctx, owner.Catalog, owner.JobID)
		if err != nil {
			return nil, ignoreMissing(err)
		}
		current = []string{j.MetadataLocation}
	case owner.Unregistered:
		// Its claim names it by a name a new table may hold now: the
		// record that keeps the claim says what it references.
		u, err := s.Store.UnregisteredByClaim(ctx, owner.Catalog, owner.ID)
		if err != nil {
			return nil, ignoreMissing(err)
		}
		current = []string{u.MetadataLocation}
	case owner.SoftDeleted:
		recs, err := s.Store.SoftDeletedByName(ctx, owner.Catalog, owner.Namespace, owner.Name)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Entry.IsView() == (owner.Kind == store.OwnerView) {
				current = append(current, r.Entry.MetadataLocation)
			}
		}
	default:
		e, err := s.Store.GetEntry(ctx, owner.Catalog, owner.Namespace, owner.Name)
		if err != nil {
			return nil, ignoreMissing(err)
		}
		current = []string{e.MetadataLocation}
	}
	if len(current) == 0 {
		return nil, nil
	}
	refs := &references{files: map[string]bool{}}
	for _, loc := range current {
		refs.files[loc] = true
		if owner.Kind == store.OwnerView {
			// A view's metadata keeps no log: every file of its intents
			// was current once and retired its intent, so a stale intent's
			// file that is not the current one is a lost commit's.
			continue
		}
		meta, err := s.Catalog.ReadMetadata(ctx, loc)
		if err != nil {
			slog.Warn("orphan check: owner's metadata unreadable; keeping the file", "file", path, "owner", owner.String(), "error", err)
			return nil, nil
		}
		for prev := range meta.PreviousFiles() {
			refs.files[prev.MetadataFile] = true
		}
	}
	return refs, nil
}

// ignoreMissing: an owner that vanished between the index read and this one
// keeps the file until the next sweep decides.
func ignoreMissing(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// listedKinds: a batch's file kinds as the job's counters name them.
var listedKinds = map[string]string{store.FileData: kindData, store.FileDeletes: kindDeletes, store.FileMetadata: kindMetadata}

// kindOfPath is what a batch that names files without their kinds (an
// orphans batch) counts a file as: Iceberg writers put manifests, manifest
// lists and metadata files under a table's metadata/ folder, data and
// delete files elsewhere (a path cannot tell those two apart).
func kindOfPath(key string) string {
	if strings.Contains("/"+key, "/metadata/") {
		return kindMetadata
	}
	return kindData
}
