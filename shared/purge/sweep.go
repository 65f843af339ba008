package purge

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// The final listing (SPEC §3: SUCCEEDED means nothing is left). Once every
// data batch is done, finalize lists the location the job's table owned
// alone (its claim, which the job holds: no other claim can lie inside it)
// and deletes every object no metadata reached: files of commits that
// failed, engines' uncommitted writes. The metadata layer, which finalize
// deletes next (the current metadata file last), is kept for that step.
//
// Each page of at most 1000 keys is counted first and deleted after: one
// guarded job update counts the page's unreferenced keys, moves the cursor
// past the page and marks it pending; the page's keys are deleted in one
// DeleteObjects call; a second update clears the mark. A step that stops
// in between resumes on the pending page by listing its range again and
// deleting what is still there, uncounted. So each object is counted once
// whatever the crash, and no key list is stored (1000 keys of up to 1 KB
// would not fit a DynamoDB item).

// sweeps reports whether a job lists its location at the end: a table's
// purge (not an orphans or expire job), of a table that owned a location
// (a claim held by the job, inside a bucket, never a whole one) and whose
// data files go (gc.enabled: otherwise every file it keeps would look
// unreferenced). The warehouse scope widens what reachable files may go,
// never what is listed.
func sweeps(j store.Job) bool {
	return !store.ListsFiles(j.Kind) && j.GCEnabled && len(swept(j)) > 0
}

// swept lists the locations the final listing covers: every claim the job
// holds (the table's location and the old ones a retained snapshot still
// reached), in the job's order, one after the other (SweepHold).
func swept(j store.Job) []store.Hold {
	var out []store.Hold
	for _, h := range j.Holds() {
		if h.Prefix != "" {
			out = append(out, h)
		}
	}
	return out
}

// listedBy reports, for a job, whether an object lies in what its final
// listing covers (nothing when it lists nothing).
func listedBy(j store.Job) func(objects.Location) bool {
	var holds []store.Hold
	if sweeps(j) {
		holds = swept(j)
	}
	return func(o objects.Location) bool {
		for _, h := range holds {
			if (objects.Location{Bucket: h.Bucket, Key: h.Prefix}).Contains(o) {
				return true
			}
		}
		return false
	}
}

// sweep runs pages of the final listing, at most finalizeChunksPerCall per
// call; it reports whether the listing is complete. layer is the metadata
// layer (in layerBucket), which the listing keeps, with the current
// metadata file.
func (s *Service) sweep(ctx context.Context, in Input, j store.Job, layerBucket string, layer []object) (bool, error) {
	holds := swept(j)
	keep := map[string]bool{} // bucket + "/" + key
	if cur, err := objects.Parse(j.MetadataLocation); err == nil {
		keep[cur.Bucket+"/"+cur.Key] = true
	}
	for _, o := range layer {
		keep[layerBucket+"/"+o.key] = true
	}
	for n := 0; ; n++ {
		if j.SweepDone && !j.SweepPending || j.SweepHold >= len(holds) {
			return true, nil
		}
		h := holds[j.SweepHold]
		switch {
		case j.SweepPending:
			if err := s.finishPage(ctx, j, h.Bucket, h.Prefix+"/", keep); err != nil {
				return false, err
			}
		case n >= finalizeChunksPerCall || s.nearDeadline(ctx):
			return false, nil
		default:
			if err := s.listPage(ctx, j, h.Bucket, h.Prefix+"/", j.SweepHold == len(holds)-1, keep); err != nil {
				return false, err
			}
		}
		var err error
		if j, err = s.job(ctx, in); err != nil {
			return false, err
		}
	}
}

// listPage lists the page after the cursor, counts its unreferenced keys
// with the cursor's move, deletes them and clears the pending mark. A
// concurrent step that moved the cursor first wins: this one deletes nothing.
func (s *Service) listPage(ctx context.Context, j store.Job, bucket, prefix string, lastHold bool, keep map[string]bool) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(MaxKeysPerCall)}
	if j.SweepAfter != "" {
		in.StartAfter = aws.String(j.SweepAfter)
	}
	page, err := s.S3.ListObjectsV2(ctx, in)
	if err != nil {
		return fmt.Errorf("list %s/%s: %w", bucket, prefix, err)
	}
	// A job from before the listing has none of the attributes yet.
	guard := map[string]any{":a": j.SweepAfter, ":f": false, ":h": j.SweepHold}
	const cond = "(sweep_after = :a OR attribute_not_exists(sweep_after)) AND (sweep_pending = :f OR attribute_not_exists(sweep_pending))" +
		" AND (sweep_hold = :h OR attribute_not_exists(sweep_hold))"
	if len(page.Contents) == 0 {
		next := map[string]any{"sweep_done": true}
		if !lastHold {
			// This location is done: the next one from its start (its
			// prefix without the "/" sorts before every key under it).
			next = map[string]any{"sweep_hold": j.SweepHold + 1, "sweep_after": swept(j)[j.SweepHold+1].Prefix}
		}
		err := s.Store.UpdateJob(ctx, j, store.JobUpdate{Set: next, Cond: cond, CondValues: guard})
		return ignoreRace(err)
	}
	var objs []object
	var size, views, skipped int64
	for _, o := range page.Contents {
		k := aws.ToString(o.Key)
		if !sweepable(k) {
			skipped++
			continue
		}
		if !keep[bucket+"/"+k] {
			objs = append(objs, object{key: k, size: aws.ToInt64(o.Size)})
			size += aws.ToInt64(o.Size)
			if j.Kind == store.KindView && isMetadataFile(k) {
				views++
			}
		}
	}
	// A view's metadata files are its own (icehold wrote them, no log
	// names them): deleted, not unreferenced.
	add := map[string]int64{"files_unreferenced": int64(len(objs)) - views, "bytes": size}
	if skipped > 0 {
		add["files_skipped"] = skipped
	}
	if views > 0 {
		add["files_deleted"], add[kindMetadata] = views, views
	}
	last := aws.ToString(page.Contents[len(page.Contents)-1].Key)
	err = s.Store.UpdateJob(ctx, j, store.JobUpdate{
		Set: map[string]any{"sweep_from": j.SweepAfter, "sweep_after": last, "sweep_pending": true, "sweep_done": lastHold && !aws.ToBool(page.IsTruncated)},
		Add: add, Cond: cond, CondValues: guard,
	})
	if errors.Is(err, store.ErrConditionFailed) {
		return nil // another step counted this page
	}
	if err != nil {
		return err
	}
	if err := s.crash("finalize.sweep-counted"); err != nil {
		return err
	}
	if _, err := s.deleteKeys(ctx, bucket, j.Scope, objs); err != nil {
		return err
	}
	return s.clearPending(ctx, j, last)
}

// finishPage deletes what is left of a counted page (a step stopped between
// the count and the delete): its range, listed again, minus what is kept.
func (s *Service) finishPage(ctx context.Context, j store.Job, bucket, prefix string, keep map[string]bool) error {
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	if j.SweepFrom != "" {
		in.StartAfter = aws.String(j.SweepFrom)
	}
	p := s3.NewListObjectsV2Paginator(s.S3, in)
	for more := true; more && p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list %s/%s: %w", bucket, prefix, err)
		}
		var objs []object
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if k > j.SweepAfter {
				more = false
				break
			}
			if sweepable(k) && !keep[bucket+"/"+k] {
				objs = append(objs, object{key: k})
			}
		}
		for len(objs) > 0 {
			n := min(len(objs), MaxKeysPerCall)
			if _, err := s.deleteKeys(ctx, bucket, j.Scope, objs[:n]); err != nil {
				return err
			}
			objs = objs[n:]
		}
	}
	return s.clearPending(ctx, j, j.SweepAfter)
}

// clearPending ends a page: its objects are gone.
func (s *Service) clearPending(ctx context.Context, j store.Job, after string) error {
	if err := s.crash("finalize.sweep-deleted"); err != nil {
		return err
	}
	err := s.Store.UpdateJob(ctx, j, store.JobUpdate{
		Set:  map[string]any{"sweep_pending": false},
		Cond: "sweep_after = :a AND sweep_pending = :t", CondValues: map[string]any{":a": after, ":t": true},
	})
	return ignoreRace(err)
}

// isMetadataFile: a key of a metadata file (…/metadata/…metadata.json…,
// the gzip-compressed forms too).
func isMetadataFile(key string) bool {
	return kindOfPath(key) == kindMetadata && strings.Contains(key[strings.LastIndexByte(key, '/')+1:], ".metadata.json")
}

// sweepable: a listed key the final listing may delete. S3 lists keys as
// written, so each lies under the listed claim; still, a key with a "." or
// ".." segment or a doubled '/' is left and counted skipped, as every
// deleting path does (candidate). A directory marker (a key ending in '/',
// which Hadoop writers make) names only itself: it goes.
func sweepable(key string) bool { return objects.CleanKey(strings.TrimSuffix(key, "/")) == nil }

// ignoreRace: a guarded update another step made first is not an error.
func ignoreRace(err error) error {
	if errors.Is(err, store.ErrConditionFailed) {
		return nil
	}
	return err
}
