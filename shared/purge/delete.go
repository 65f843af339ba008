package purge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"strconv"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/store"
)

// MaxKeysPerCall is S3's DeleteObjects limit.
const MaxKeysPerCall = 1000

// maxThrottleRetries bounds retries of one throttled call inside one
// invocation; past it the batch fails and SQS redelivers it later.
const maxThrottleRetries = 12

// ErrThrottled: S3 kept answering SlowDown.
var ErrThrottled = errors.New("s3 throttled")

// DeleteBatch handles one delivery of a delete-queue message. On the last
// receive SQS allows, a failure dead-letters the batch and the job.
func (s *Service) DeleteBatch(ctx context.Context, m BatchMessage, receiveCount, maxReceives int) error {
	j, err := s.job(ctx, Input{Catalog: m.Catalog, JobID: m.JobID})
	if err != nil {
		return err
	}
	if store.Terminal(j.State) {
		return nil
	}
	b, err := s.Store.GetBatch(ctx, m.JobID, m.Batch)
	if err != nil {
		return fmt.Errorf("batch %s/%d: %w", m.JobID, m.Batch, err)
	}
	if b.Done {
		return nil // a duplicate delivery
	}
	if err := s.crash("delete.start"); err != nil {
		return err
	}
	// And a point per batch: a fault can kill one batch of a job while
	// the others go on.
	if err := s.crash(fmt.Sprintf("delete.start/%d", b.Number)); err != nil {
		return err
	}
	err = s.runBatch(ctx, j, b)
	if err != nil && !errors.Is(err, errContinue) && (maxReceives == 0 || receiveCount < maxReceives) {
		s.noteRetry(ctx, j, b, receiveCount, maxReceives, err)
	}
	if err != nil && !errors.Is(err, errContinue) && maxReceives > 0 && receiveCount >= maxReceives {
		reason := fmt.Sprintf("batch %d failed %d times: %v", b.Number, receiveCount, err)
		derr := s.Store.MarkBatchDead(ctx, j, b, reason, nil,
			outbox.Record(JobEvent(eventbus.PurgeDeadLettered, j, map[string]any{"batch": b.Number, "reason": reason})))
		if derr != nil && !errors.Is(derr, store.ErrConditionFailed) {
			return errors.Join(err, derr)
		}
	}
	if err == nil {
		s.callbackIfDone(ctx, m.Catalog, m.JobID)
	}
	return err
}

// noteRetry records a failed delivery that SQS will retry as the job's last
// error, so that a job whose batches keep failing says why while it runs.
// Best effort: the retry happens whether or not the note is written.
func (s *Service) noteRetry(ctx context.Context, j store.Job, b store.Batch, receiveCount, maxReceives int, cause error) {
	of := ""
	if maxReceives > 0 {
		of = fmt.Sprintf(" of %d", maxReceives)
	}
	msg := fmt.Sprintf("batch %d, delivery %d%s failed, retrying: %v", b.Number, receiveCount, of, cause)
	err := s.Store.UpdateJob(ctx, j, store.JobUpdate{Set: map[string]any{"last_error": msg}, States: []string{store.JobRunning}})
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		slog.Warn("note a batch retry on its job", "job", j.ID, "error", err)
	}
}

// revive returns a dead-lettered job to RUNNING once no batch is dead.
func (s *Service) revive(ctx context.Context, m BatchMessage) error {
	j, err := s.job(ctx, Input{Catalog: m.Catalog, JobID: m.JobID})
	if err != nil || j.State != store.JobDeadLettered || j.BatchesDead > 0 {
		return err
	}
	err = s.Store.UpdateJob(ctx, j, store.JobUpdate{
		Set: map[string]any{"state": store.JobRunning}, States: []string{store.JobDeadLettered},
		Cond: "batches_dead = :z", CondValues: map[string]any{":z": 0},
	})
	if errors.Is(err, store.ErrConditionFailed) {
		return nil
	}
	return err
}

// owner decides which manifest entry deletes and counts a file: the entry
// that added it, when the adding snapshot is still in the metadata (its
// manifest is then in some batch); otherwise every entry that references it.
type owner struct {
	snapshots map[int64]bool
	sequences map[int64]bool
	// writers: expired snapshots whose manifests are still listed.
	writers map[int64]bool
}

func newOwner(meta table.Metadata, j store.Job) owner {
	o := owner{snapshots: map[int64]bool{}, sequences: map[int64]bool{}, writers: map[int64]bool{}}
	for _, sn := range meta.Snapshots() {
		o.snapshots[sn.SnapshotID] = true
		if sn.SequenceNumber > 0 {
			o.sequences[sn.SequenceNumber] = true
		}
	}
	for _, id := range j.ExpiredWriters {
		if n, err := strconv.ParseInt(id, 10, 64); err == nil {
			o.writers[n] = true
		}
	}
	return o
}

func (o owner) owns(e iceberg.ManifestEntry) bool {
	switch e.Status() {
	case iceberg.EntryStatusADDED:
		return true
	case iceberg.EntryStatusEXISTING:
		return !o.snapshots[e.SnapshotID()]
	default: // DELETED: its snapshot id is the deleting one; the sequence number says who added it
		if fsn := e.FileSequenceNum(); fsn != nil && *fsn > 0 {
			return !o.sequences[*fsn]
		}
		return true
	}
}

// counts says whether an entry the owner owns deletes and counts its file
// under the prefix the final listing covers. An ADDED entry always does. So
// does an EXISTING one in the current snapshot's list whose adding snapshot
// expired without leaving a manifest behind: that list names each live
// file once, and nothing else reachable adds it (a table that drops
// partitions and expires snapshots carries most of its files so; left to
// the listing they were counted unreferenced and deleted by one function).
// Any other entry may share its file with another manifest: the listing
// takes it, once.
func (o owner) counts(e iceberg.ManifestEntry, ref store.ManifestRef) bool {
	switch e.Status() {
	case iceberg.EntryStatusADDED:
		return true
	case iceberg.EntryStatusEXISTING:
		return ref.Current && !o.snapshots[e.SnapshotID()] && !o.writers[e.SnapshotID()]
	}
	return false
}

func manifestOf(r store.ManifestRef) iceberg.ManifestFile {
	return iceberg.NewManifestFile(r.Version, r.Path, r.Length, r.SpecID, r.AddedSnapshotID).
		SequenceNum(r.SequenceNum, r.MinSequenceNum).
		Content(iceberg.ManifestContent(r.Content)).Build()
}

// object is one key to delete (exact, never decoded), its size and what it
// is (the job counts data, delete and metadata files apart).
type object struct {
	key  string
	size int64
	kind string // kindData, kindDeletes or kindMetadata ("": metadata)
	// version: one version (or delete marker) of the key; "" the key
	// itself (on a versioned bucket a delete marker is added).
	version string
}

// id is the object's identity in a DeleteObjects call.
func (o object) id() string { return o.key + "\x00" + o.version }

// The kinds of deleted files, as the job's counters name them.
const (
	kindData     = "data_files_deleted"
	kindDeletes  = "delete_files_deleted"
	kindMetadata = "metadata_files_deleted"
)

// tally is what one DeleteObjects round did.
type tally struct {
	deleted, missing, bytes int64
	byKind                  map[string]int64 // deleted, per kind
}

// add counts another round's tally in t.
func (t *tally) add(u tally) {
	t.deleted, t.missing, t.bytes = t.deleted+u.deleted, t.missing+u.missing, t.bytes+u.bytes
	for k, n := range u.byKind {
		t.byKind[k] += n
	}
}

// counters are the job counters a tally adds.
func (t tally) counters(skipped int64) map[string]int64 {
	c := map[string]int64{"files_deleted": t.deleted, "files_missing": t.missing, "files_skipped": skipped, "bytes": t.bytes}
	for k, n := range t.byKind {
		c[k] = n
	}
	return c
}

// runBatch streams the batch's manifests from its checkpoint and deletes what
// the entries reference, 1000 keys a call, checkpointing after every call.
func (s *Service) runBatch(ctx context.Context, j store.Job, b store.Batch) error {
	if store.ListsFiles(j.Kind) {
		return s.runFilesBatch(ctx, j, b)
	}
	meta, err := s.Catalog.ReadMetadata(ctx, j.MetadataLocation)
	if err != nil {
		return fmt.Errorf("read metadata: %w", err)
	}
	own := newOwner(meta, j)
	fs, err := icebergio.LoadFS(ctx, s.IOProps, j.Location)
	if err != nil {
		return fmt.Errorf("file io: %w", err)
	}
	g := newGuard(s.Store, j)
	listed := listedBy(j)
	cp := [2]int{b.Manifest, b.Entry}
	var chunk []object
	skipped := int64(0)
	step := func(to [2]int, done bool) error {
		// By key: the table's own files lie under the prefix the final
		// listing prunes of every version (versions.go). A file outside it
		// (purge.delete-scope=warehouse) goes with its versions: no listing
		// comes after it.
		var inside, outside []object
		for _, o := range chunk {
			if listed(objects.Location{Bucket: g.bucket(), Key: o.key}) {
				inside = append(inside, o)
			} else {
				outside = append(outside, o)
			}
		}
		t, err := s.deleteKeys(ctx, g.bucket(), j.Scope, inside)
		if err != nil {
			return err
		}
		u, err := s.deleteObjects(ctx, g.bucket(), j.Scope, outside)
		if err != nil {
			return err
		}
		t.add(u)
		if err := s.crash("delete.before-checkpoint"); err != nil {
			return err
		}
		counters := t.counters(skipped)
		err = s.Store.StepBatch(ctx, j, b, store.BatchStep{From: cp, To: to, Done: done, Counters: counters, WasDead: b.Dead})
		if errors.Is(err, store.ErrConditionFailed) {
			now, gerr := s.Store.GetBatch(ctx, b.JobID, b.Number)
			if gerr == nil && now.Done {
				return errStopDuplicate
			}
			return errors.New("checkpoint moved by a concurrent delivery; retrying later")
		}
		if err != nil {
			return err
		}
		if b.Dead {
			// The first step of a redriven batch brought it back to life.
			b.Dead = false
			if err := s.revive(ctx, BatchMessage{Catalog: j.Catalog, JobID: j.ID}); err != nil {
				return err
			}
		}
		cp, chunk, skipped = to, chunk[:0], 0
		if !done && s.nearDeadline(ctx) {
			return errContinue
		}
		return nil
	}
	last := len(b.Manifests) - 1
	for mi := b.Manifest; mi <= last; mi++ {
		start := 0
		if mi == b.Manifest {
			start = b.Entry
		}
		err := s.streamManifest(fs, b.Manifests[mi], start, func(idx int, e iceberg.ManifestEntry) error {
			if s.nearDeadline(ctx) {
				return step([2]int{mi, idx}, false) // checkpoint before this entry and stop
			}
			if !own.owns(e) {
				return nil
			}
			df := e.DataFile()
			obj, ok, err := g.allows(ctx, df.FilePath())
			if err != nil {
				return err
			}
			switch {
			case !ok:
				skipped++
			case listed(obj) && !own.counts(e, b.Manifests[mi]):
				// A file a snapshot removed (DELETED), or one carried over
				// (EXISTING) from a removed snapshot: its ADDED entry may
				// be in another reachable manifest, or it went with its
				// snapshot's expiry. Under the listed prefix the final
				// listing deletes it if it is still there, counted once
				// (as unreferenced): a purge never counts a file twice nor
				// one that was gone before it.
			default:
				kind := kindData
				if df.ContentType() != iceberg.EntryContentData {
					kind = kindDeletes
				}
				chunk = append(chunk, object{key: obj.Key, size: df.FileSizeBytes(), kind: kind})
			}
			if len(chunk) == MaxKeysPerCall {
				return step([2]int{mi, idx + 1}, false)
			}
			return nil
		})
		if errors.Is(err, errStopDuplicate) {
			return nil
		}
		if err != nil {
			return err
		}
		// The end of a manifest is always a checkpoint; the last one closes the batch.
		if err := step([2]int{mi + 1, 0}, mi == last); err != nil {
			if errors.Is(err, errStopDuplicate) {
				return nil
			}
			return err
		}
	}
	if last < 0 {
		return step([2]int{0, 0}, true)
	}
	return nil
}

var errStopDuplicate = errors.New("batch finished by another delivery")

// errContinue: the invocation's deadline is near; the batch is checkpointed
// and continues in a new message (a new delivery, not another receive of
// this one, so a long batch is never dead-lettered for being long).
var errContinue = errors.New("deadline near: checkpointed, continuing in a new message")

// nearDeadline reports whether the invocation must stop now to checkpoint
// before its deadline (Lambda's timeout).
func (s *Service) nearDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	margin := s.DeadlineMargin
	if margin == 0 {
		margin = 15 * time.Second
	}
	return time.Until(dl) < margin
}

// streamManifest calls fn for every entry from index start on, without
// holding the manifest's entries in memory.
func (s *Service) streamManifest(fs icebergio.IO, ref store.ManifestRef, start int, fn func(int, iceberg.ManifestEntry) error) error {
	f, err := fs.Open(ref.Path)
	if errors.Is(err, iofs.ErrNotExist) {
		// Gone already (a lender's manifest its purge deleted, or this
		// purge's own finalize of an earlier run): nothing more to reach.
		slog.Warn("purge: a manifest is gone", "path", ref.Path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("open manifest %s: %w", ref.Path, err)
	}
	defer f.Close()
	rd, err := iceberg.NewManifestReaderWithProjection(manifestOf(ref), f, iceberg.ManifestEntryProjection{})
	if err != nil {
		return fmt.Errorf("read manifest %s: %w", ref.Path, err)
	}
	defer rd.Close()
	for idx := 0; ; idx++ {
		e, err := rd.ReadEntry()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read manifest %s: %w", ref.Path, err)
		}
		if idx < start {
			continue
		}
		if err := fn(idx, e); err != nil {
			return err
		}
	}
}

// deleteKeys deletes up to 1000 objects (keys, or versions of keys) of a
// bucket in one DeleteObjects call (paced per scope, retried on SlowDown
// without the SDK's own retries). A key S3 reports as NoSuchKey (or a
// version as NoSuchVersion) counts as missing; on AWS a missing key is
// reported deleted. On a versioned bucket a key without a version only gets
// a delete marker: callers that must leave nothing use deleteObjects, or
// prune the versions of the prefix after (versions.go).
func (s *Service) deleteKeys(ctx context.Context, bucket, scope string, objs []object) (tally, error) {
	t := tally{byKind: map[string]int64{}}
	if len(objs) == 0 {
		return t, nil
	}
	if len(objs) > MaxKeysPerCall {
		return t, fmt.Errorf("%d keys in one call, at most %d", len(objs), MaxKeysPerCall)
	}
	kinds := map[string]string{}
	pacer := s.Pacer
	if pacer == nil {
		pacer = defaultPacer
	}
	sizes := map[string]int64{}
	var ids []s3types.ObjectIdentifier
	for _, o := range objs {
		k := o.id()
		if _, dup := sizes[k]; dup {
			continue
		}
		sizes[k], kinds[k] = o.size, cmp.Or(o.kind, kindMetadata)
		id := s3types.ObjectIdentifier{Key: aws.String(o.key)}
		if o.version != "" {
			id.VersionId = aws.String(o.version)
		}
		ids = append(ids, id)
	}
	for attempt := 0; len(ids) > 0; attempt++ {
		if attempt > maxThrottleRetries {
			return t, fmt.Errorf("%w: %d keys left after %d tries", ErrThrottled, len(ids), attempt)
		}
		if err := pacer.WaitFor(ctx, scope, bucket, ids); err != nil {
			return t, err
		}
		out, err := s.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		}, func(o *s3.Options) { o.RetryMaxAttempts = 1 }) // throttling is ours to handle
		if isThrottle(err) {
			pacer.ThrottledFor(ctx, scope, bucket, ids, ids, attempt)
			s.backoff(ctx, attempt)
			continue
		}
		if err != nil {
			return t, fmt.Errorf("delete objects: %w", err)
		}
		var retry []s3types.ObjectIdentifier
		failed := map[string]bool{}
		for _, e := range out.Errors {
			o := object{key: aws.ToString(e.Key), version: aws.ToString(e.VersionId)}
			k, code := o.id(), aws.ToString(e.Code)
			switch code {
			case "NoSuchKey", "NoSuchVersion":
				t.missing++
				failed[k] = true
			case "SlowDown", "InternalError", "ServiceUnavailable", "503":
				retry = append(retry, s3types.ObjectIdentifier{Key: e.Key, VersionId: e.VersionId})
				failed[k] = true
			default:
				// The keys this call deleted go uncounted: the batch is
				// retried from its checkpoint, where S3 reports them
				// deleted again and they count once
				// (TestPartlyRefusedDeleteCountsEveryFileOnce).
				return t, fmt.Errorf("delete %s: %s: %s", o.key, code, aws.ToString(e.Message))
			}
		}
		for _, id := range ids {
			if k := (object{key: aws.ToString(id.Key), version: aws.ToString(id.VersionId)}).id(); !failed[k] {
				t.deleted++
				t.bytes += sizes[k]
				t.byKind[kinds[k]]++
			}
		}
		if len(retry) > 0 {
			pacer.ThrottledFor(ctx, scope, bucket, ids, retry, attempt)
			s.backoff(ctx, attempt)
		} else {
			pacer.Success(scope)
		}
		ids = retry
	}
	return t, nil
}

var defaultPacer = NewPacer()

func (s *Service) backoff(ctx context.Context, attempt int) {
	base := s.Backoff
	if base == 0 {
		base = 25 * time.Millisecond
	}
	d := time.Duration(min(1<<attempt, 64)) * base
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func isThrottle(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "SlowDown", "ServiceUnavailable", "RequestLimitExceeded", "Throttling":
			return true
		}
	}
	var re interface{ HTTPStatusCode() int }
	return errors.As(err, &re) && re.HTTPStatusCode() == 503
}
