package purge

import (
	"context"
	"errors"
	"fmt"

	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/store"
)

// FinalizeResult says whether finalize must run again (bounded work per call).
type FinalizeResult struct {
	Done bool `json:"done"`
}

// finalizeChunksPerCall bounds one finalize invocation's work.
const finalizeChunksPerCall = 100

// Finalize runs once every data batch is done: the final listing of the
// location the table owned alone deletes what no metadata reached (sweep.go);
// then the metadata layer goes: manifests, manifest lists, statistics files,
// the metadata log's files, and the current metadata file last (until then
// a crash resumes from it); then the job SUCCEEDS and its tombstone goes.
// Each page and chunk is checkpointed, so it resumes exactly.
func (s *Service) Finalize(ctx context.Context, in Input) (FinalizeResult, error) {
	j, err := s.job(ctx, in)
	if err != nil {
		return FinalizeResult{}, err
	}
	if store.Terminal(j.State) {
		return FinalizeResult{Done: true}, nil
	}
	if err := s.crash("finalize.start"); err != nil {
		return FinalizeResult{}, err
	}
	g := newGuard(s.Store, j)
	if j.BatchesDone < j.BatchesTotal {
		return FinalizeResult{}, fmt.Errorf("finalize %s: %d of %d batches still running", j.ID, j.BatchesTotal-j.BatchesDone, j.BatchesTotal)
	}
	if store.ListsFiles(j.Kind) {
		// An orphans or expire job has no metadata layer: its batches named
		// every file (an expiry's manifests and manifest lists among them).
		return s.succeed(ctx, in, j, map[string]int64{})
	}
	// finalize_total is the list's length plus one for the current metadata
	// file, fixed once (with the skipped count) when the list is first made.
	sweeping := sweeps(j) && (!j.SweepDone || j.SweepPending)
	if sweeping || j.FinalizeTotal == 0 || j.FinalizeOffset < j.FinalizeTotal-1 {
		// What the final listing covered is pruned of versions below;
		// anything else goes with its versions now.
		del := s.deleteObjects
		if sweeps(j) {
			del = s.deleteKeys
		}
		objs, skipped, err := s.metadataLayer(ctx, j, g)
		if err != nil {
			return FinalizeResult{}, err
		}
		if sweeping {
			// First the final listing, which keeps the metadata layer.
			done, err := s.sweep(ctx, in, j, g.bucket(), objs)
			if err != nil || !done {
				return FinalizeResult{}, err
			}
			if j, err = s.job(ctx, in); err != nil {
				return FinalizeResult{}, err
			}
		}
		if j.FinalizeTotal == 0 {
			err := s.Store.UpdateJob(ctx, j, store.JobUpdate{
				Set: map[string]any{"finalize_total": len(objs) + 1}, Add: map[string]int64{"files_skipped": skipped},
				Cond: "finalize_total = :z", CondValues: map[string]any{":z": 0},
			})
			if err != nil && !errors.Is(err, store.ErrConditionFailed) {
				return FinalizeResult{}, err
			}
			if j, err = s.job(ctx, in); err != nil {
				return FinalizeResult{}, err
			}
		}
		for n := 0; j.FinalizeOffset < j.FinalizeTotal-1; n++ {
			if n == finalizeChunksPerCall {
				return FinalizeResult{}, nil // continue in the next invocation
			}
			end := min(j.FinalizeOffset+MaxKeysPerCall, j.FinalizeTotal-1, len(objs))
			t, err := del(ctx, g.bucket(), j.Scope, objs[j.FinalizeOffset:end])
			if err != nil {
				return FinalizeResult{}, err
			}
			if err := s.crash("finalize.before-checkpoint"); err != nil {
				return FinalizeResult{}, err
			}
			err = s.Store.UpdateJob(ctx, j, store.JobUpdate{
				Set:  map[string]any{"finalize_offset": end},
				Add:  t.counters(0),
				Cond: "finalize_offset = :o", CondValues: map[string]any{":o": j.FinalizeOffset},
			})
			if err != nil && !errors.Is(err, store.ErrConditionFailed) {
				return FinalizeResult{}, err
			}
			if j, err = s.job(ctx, in); err != nil {
				return FinalizeResult{}, err
			}
		}
	}
	// Last, the current metadata file: until now it was there to resume from.
	counters := map[string]int64{}
	cur, ok, err := g.allows(ctx, j.MetadataLocation)
	if err != nil {
		return FinalizeResult{}, err
	}
	if sweeps(j) {
		// On a versioned bucket, every version and delete marker under
		// what the job owned goes, but the current metadata file's.
		keep := cur
		if !ok {
			keep.Key = ""
		}
		done, err := s.pruneVersions(ctx, j, keep.Bucket, keep.Key)
		if err != nil || !done {
			return FinalizeResult{}, err
		}
	}
	if ok {
		// finalize_offset one past the list says the deletion began: a run
		// resumed after it finds the file gone by its own hand and counts it
		// deleted, as the uninterrupted run did.
		resumed := j.FinalizeOffset == j.FinalizeTotal
		if !resumed {
			err := s.Store.UpdateJob(ctx, j, store.JobUpdate{
				Set:  map[string]any{"finalize_offset": j.FinalizeTotal},
				Cond: "finalize_offset = :o", CondValues: map[string]any{":o": j.FinalizeOffset},
			})
			if err != nil && !errors.Is(err, store.ErrConditionFailed) {
				return FinalizeResult{}, err
			}
			if j, err = s.job(ctx, in); err != nil {
				return FinalizeResult{}, err
			}
		}
		t, err := s.deleteObjects(ctx, g.bucket(), j.Scope, []object{{key: cur.Key}})
		if err != nil {
			return FinalizeResult{}, err
		}
		if resumed && t.missing == 1 {
			t.missing, t.deleted = 0, 1
			t.byKind[kindMetadata]++
		}
		t.bytes = 0 // the current metadata file's size is not counted (never read)
		counters = t.counters(0)
		if err := s.crash("finalize.metadata-deleted"); err != nil {
			return FinalizeResult{}, err
		}
	} else {
		counters["files_skipped"] = 1
	}
	return s.succeed(ctx, in, j, counters)
}

// succeed ends a job SUCCEEDED with its last counters and announces it.
func (s *Service) succeed(ctx context.Context, in Input, j store.Job, counters map[string]int64) (FinalizeResult, error) {
	// The event carries the final counters: the job's plus this last step's
	// (the update is conditioned on the job as read, so they are exact).
	deleted := j.FilesDeleted + counters["files_deleted"]
	done := JobEvent(eventbus.PurgeCompleted, j, map[string]any{
		"files-deleted": deleted, "files-missing": j.FilesMissing + counters["files_missing"],
		"files-skipped": j.FilesSkipped + counters["files_skipped"], "bytes": j.Bytes + counters["bytes"],
		"data-files-deleted": j.DataFilesDeleted + counters[kindData], "delete-files-deleted": j.DeleteFilesDeleted + counters[kindDeletes],
		"metadata-files-deleted": j.MetadataFilesDeleted + counters[kindMetadata], "files-unreferenced": j.FilesUnreferenced,
	})
	set := map[string]any{"state": store.JobSucceeded}
	if j.LastError != "" {
		// The job got over its retries: the error is history, not its state.
		set["last_error"], set["recovered_error"] = "", j.LastError
	}
	err := s.Store.UpdateJob(ctx, j, store.JobUpdate{
		Set: set, Add: counters, Finish: true,
		States: []string{store.JobRunning}, Events: outbox.Records(done),
	})
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return FinalizeResult{}, err
	}
	if err == nil {
		s.emit(map[string]float64{"JobsCompleted": 1, "FilesDeleted": float64(deleted), "FilesUnreferenced": float64(j.FilesUnreferenced)})
	}
	return FinalizeResult{Done: true}, nil
}

// metadataLayer lists, in a fixed order and each once, the objects finalize
// deletes before the current metadata file, and counts those out of scope.
func (s *Service) metadataLayer(ctx context.Context, j store.Job, g *guard) ([]object, int64, error) {
	if j.Kind == store.KindView {
		return nil, 0, nil // the final listing finds a view's files
	}
	meta, err := s.Catalog.ReadMetadata(ctx, j.MetadataLocation)
	if err != nil {
		return nil, 0, fmt.Errorf("read metadata: %w", err)
	}
	seen := map[string]bool{j.MetadataLocation: true}
	var out []object
	var skipped int64
	var gerr error
	add := func(path string, size int64) {
		if path == "" || seen[path] || gerr != nil {
			return
		}
		seen[path] = true
		obj, ok, err := g.allows(ctx, path)
		if err != nil {
			gerr = err
			return
		}
		if !ok {
			skipped++
			return
		}
		out = append(out, object{key: obj.Key, size: size})
	}
	token := ""
	for {
		batches, next, err := s.Store.ListBatches(ctx, j.ID, token, 100)
		if err != nil {
			return nil, 0, err
		}
		for _, b := range batches {
			for _, m := range b.Manifests {
				add(m.Path, m.Length)
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	for _, sn := range meta.Snapshots() {
		add(sn.ManifestList, 0)
	}
	for st := range meta.Statistics() {
		add(st.StatisticsPath, st.FileSizeInBytes)
	}
	for st := range meta.PartitionStatistics() {
		add(st.StatisticsPath, st.FileSizeInBytes)
	}
	for e := range meta.PreviousFiles() {
		add(e.MetadataFile, 0)
	}
	return out, skipped, gerr
}
