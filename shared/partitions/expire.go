package partitions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// Snapshot expiry (SPEC §5), in the retention sweep, for the tables it
// visits: which snapshots the table's own properties let go (Iceberg's
// rules, as iceberg-go's Transaction.ExpireSnapshots applies them, on the
// sweep's clock), one commit that removes them, and the files only they
// referenced sent through the delete pipeline as a job of kind expire.
// The sweep itself deletes nothing.

// Pipeline is what expiry needs of the delete pipeline (*purge.Service).
type Pipeline interface {
	// PlanExpire writes the batches of a job of kind expire for the files.
	PlanExpire(ctx context.Context, j store.Job, hold *store.Hold, files []store.ListedFile) (store.Job, error)
	// DiscardExpire removes the batches of a job whose commit was refused.
	DiscardExpire(ctx context.Context, j store.Job) error
	// Started starts a created job's workflow (reconcile starts it if that
	// fails); its PurgeStarted event was recorded with the commit.
	Started(ctx context.Context, j store.Job)
}

// ExpireCreatedBy is the actor of expire jobs.
const ExpireCreatedBy = "icehold:snapshot-expiry"

// expireAttempts bounds the commits tried when a concurrent commit moves
// the table between expiry's read and its write.
const expireAttempts = 3

// ExpireResult is one table's expiry.
type ExpireResult struct {
	// Snapshots removed and refs removed (past their max-ref-age-ms).
	Snapshots int `json:"snapshots"`
	Refs      int `json:"refs"`
	// Files sent to the delete pipeline in Job ("" when none).
	Files int    `json:"files"`
	Job   string `json:"job,omitempty"`
}

// expirable is what expiry removes from metadata: snapshots and refs.
type expirable struct {
	snapshots []int64
	refs      []string
}

// selectExpired applies Iceberg's retention to metadata at now: a ref
// other than main older than its max-ref-age-ms goes; a branch keeps its
// head, its min-snapshots-to-keep newest ancestors and every ancestor
// younger than max-snapshot-age-ms (the ref's own settings first, then the
// table's history.expire.* properties); a tag keeps its snapshot; a
// snapshot no remaining ref reaches goes once older than the table's
// max-snapshot-age-ms.
func selectExpired(meta table.Metadata, now time.Time) expirable {
	props := meta.Properties()
	nowMs := now.UnixMilli()
	maxRefAge := props.GetInt64(table.MaxRefAgeMsKey, table.MaxRefAgeMsDefault)
	minKeep := props.GetInt(table.MinSnapshotsToKeepKey, table.MinSnapshotsToKeepDefault)
	maxAge := props.GetInt64(table.MaxSnapshotAgeMsKey, table.MaxSnapshotAgeMsDefault)
	lookup := func(id int64) *table.Snapshot { return meta.SnapshotByID(id) }

	var out expirable
	keep, reached := map[int64]bool{}, map[int64]bool{}
	for name, ref := range meta.Refs() {
		head := meta.SnapshotByID(ref.SnapshotID)
		if head == nil {
			continue
		}
		if name != table.MainBranch && nowMs-head.TimestampMs > *cmp.Or(ref.MaxRefAgeMs, &maxRefAge) {
			out.refs = append(out.refs, name)
			continue
		}
		keep[ref.SnapshotID] = true
		if ref.SnapshotRefType != table.BranchRef {
			reached[ref.SnapshotID] = true
			continue
		}
		refMin, refAge := *cmp.Or(ref.MinSnapshotsToKeep, &minKeep), *cmp.Or(ref.MaxSnapshotAgeMs, &maxAge)
		for n, sn := range table.AncestorsOf(ref.SnapshotID, lookup) {
			reached[sn.SnapshotID] = true
			if n < refMin || nowMs-sn.TimestampMs <= refAge {
				keep[sn.SnapshotID] = true
			}
		}
	}
	for _, sn := range meta.Snapshots() {
		if !reached[sn.SnapshotID] && nowMs-sn.TimestampMs <= maxAge {
			keep[sn.SnapshotID] = true
		}
	}
	for _, sn := range meta.Snapshots() {
		if !keep[sn.SnapshotID] {
			out.snapshots = append(out.snapshots, sn.SnapshotID)
		}
	}
	slices.Sort(out.refs)
	return out
}

// unreferencedFiles lists what only the expired snapshots reference: their
// manifest lists and statistics files, the manifests no retained snapshot
// lists, and every data and delete file those manifests name that no
// retained manifest has live (ADDED or EXISTING). A file a retained
// snapshot can read is never in it.
func (s *Service) unreferencedFiles(ctx context.Context, meta table.Metadata, expired []int64) ([]store.ListedFile, error) {
	fs, err := icebergio.LoadFS(ctx, s.IOProps, meta.Location())
	if err != nil {
		return nil, fmt.Errorf("file io: %w", err)
	}
	gone := map[int64]bool{}
	for _, id := range expired {
		gone[id] = true
	}
	var (
		mu                sync.Mutex
		kept              = map[string]bool{} // manifest lists, manifests, statistics and live files of retained snapshots
		retained, dropped = map[string]iceberg.ManifestFile{}, map[string]iceberg.ManifestFile{}
		candidates        = map[string]store.ListedFile{}
	)
	// candidate is called while readers add to candidates too: locked.
	candidate := func(path string, size int64, kind string) {
		mu.Lock()
		defer mu.Unlock()
		candidates[path] = store.ListedFile{Path: path, Size: size, Kind: kind}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.workers())
	for _, sn := range meta.Snapshots() {
		if gone[sn.SnapshotID] {
			candidate(sn.ManifestList, 0, store.FileMetadata) // its size is not in the metadata
		} else {
			kept[sn.ManifestList] = true
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			list, err := sn.Manifests(fs)
			if err != nil {
				return fmt.Errorf("manifest list %s: %w", sn.ManifestList, err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, m := range list {
				if gone[sn.SnapshotID] {
					dropped[m.FilePath()] = m
				} else {
					retained[m.FilePath()] = m
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for st := range meta.Statistics() {
		if gone[st.SnapshotID] {
			candidate(st.StatisticsPath, st.FileSizeInBytes, store.FileMetadata)
		} else {
			kept[st.StatisticsPath] = true
		}
	}
	for st := range meta.PartitionStatistics() {
		if gone[st.SnapshotID] {
			candidate(st.StatisticsPath, st.FileSizeInBytes, store.FileMetadata)
		} else {
			kept[st.StatisticsPath] = true
		}
	}
	// Both sides read in one pass: the expired-only manifests with every
	// entry (a DELETED one names a file its older manifests may have lost
	// with them), the retained ones with their live entries.
	// read adds the files a manifest names to the candidates, or (retained)
	// to what is kept.
	read := func(m iceberg.ManifestFile, retained bool) {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			var files []store.ListedFile
			for e, err := range m.Entries(fs, retained) {
				if err != nil {
					return fmt.Errorf("manifest %s: %w", m.FilePath(), err)
				}
				df, kind := e.DataFile(), store.FileData
				if df.ContentType() != iceberg.EntryContentData {
					kind = store.FileDeletes
				}
				files = append(files, store.ListedFile{Path: df.FilePath(), Size: df.FileSizeBytes(), Kind: kind})
			}
			mu.Lock()
			defer mu.Unlock()
			for _, f := range files {
				if retained {
					kept[f.Path] = true
				} else {
					candidates[f.Path] = f
				}
			}
			return nil
		})
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(s.workers())
	// Whether anything expires is known before the readers start (len of
	// candidates while they write it was a race).
	expiring := len(candidates) > 0
	for path, m := range dropped {
		if _, ok := retained[path]; ok {
			continue
		}
		expiring = true
		candidate(path, m.Length(), store.FileMetadata)
		read(m, false)
	}
	if expiring {
		// Every retained manifest is kept before its readers start: they
		// write kept too (under mu), and a write of this loop beside
		// theirs was a concurrent map write that crashed the process.
		for path := range retained {
			kept[path] = true
		}
		for _, m := range retained {
			read(m, true)
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]store.ListedFile, 0, len(candidates))
	for p, f := range candidates {
		if p != "" && !kept[p] {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b store.ListedFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// ExpireSnapshots expires one table's snapshots at now by its properties
// and hands the files only they referenced to the delete pipeline. uuid
// guards the generation (a table dropped and created again is left alone).
// Nothing happens without a pipeline, with gc.enabled=false, or under a
// legal hold (the table's own, a namespace's of it or its catalog's).
func (s *Service) ExpireSnapshots(ctx context.Context, cat string, id catalog.Ident, uuid string, now time.Time) (ExpireResult, error) {
	if s.Pipeline == nil {
		return ExpireResult{}, nil
	}
	for attempt := 1; ; attempt++ {
		e, err := s.Catalog.Entry(ctx, cat, id)
		if err != nil {
			return ExpireResult{}, err
		}
		if e.TableUUID != uuid {
			return ExpireResult{}, nil
		}
		if held, err := s.Catalog.Held(ctx, cat, id.Namespace, e.LegalHold); err != nil || held {
			return ExpireResult{}, err
		}
		meta, err := s.Catalog.ReadMetadata(ctx, e.MetadataLocation)
		if err != nil {
			return ExpireResult{}, err
		}
		res, err := s.expireAt(ctx, cat, id, e, meta, now)
		if errors.Is(err, catalog.ErrCommitFailed) && attempt < expireAttempts {
			continue // a commit landed since the read: decide again on the new metadata
		}
		return res, err
	}
}

// expireAt is one attempt on the metadata of entry e.
func (s *Service) expireAt(ctx context.Context, cat string, id catalog.Ident, e store.TableEntry, meta table.Metadata, now time.Time) (ExpireResult, error) {
	if !meta.Properties().GetBool(table.GCEnabledKey, table.GCEnabledDefault) {
		return ExpireResult{}, nil
	}
	if err := catalog.CheckExpiryProperties(meta.Properties()); err != nil {
		return ExpireResult{}, fmt.Errorf("expire %s: %w (expiry waits for a valid value)", id, err)
	}
	x := selectExpired(meta, now)
	if len(x.snapshots) == 0 && len(x.refs) == 0 {
		return ExpireResult{}, nil
	}
	files, err := s.unreferencedFiles(ctx, meta, x.snapshots)
	if err != nil {
		return ExpireResult{}, err
	}
	ch := catalog.TableChange{
		Requirements: table.Requirements{table.AssertTableUUID(meta.TableUUID())},
		// The file list holds for exactly this metadata: any other commit
		// in between refuses this one (the caller decides again).
		Base: e.MetadataLocation,
	}
	for _, r := range x.refs {
		ch.Updates = append(ch.Updates, table.NewRemoveSnapshotRefUpdate(r))
	}
	if len(x.snapshots) > 0 {
		ch.Updates = append(ch.Updates, table.NewRemoveSnapshotsUpdate(x.snapshots, false))
	}
	var job store.Job
	if len(files) > 0 {
		job, err = s.Pipeline.PlanExpire(ctx, store.Job{
			Catalog: cat, Namespace: id.Namespace, Table: id.Name, TableUUID: e.TableUUID,
			Location: meta.Location(), CreatedBy: ExpireCreatedBy, Claims: holdIDs(e.Extra),
		}, e.Hold, files)
		if err != nil {
			return ExpireResult{}, err
		}
		if job.ID != "" {
			ch.Job = &job
			// Recorded with the commit that creates the job (the outbox).
			ch.Events = outbox.Records(purge.JobEvent(eventbus.PurgeStarted, job, nil))
		}
	}
	if _, err := s.Catalog.CommitTable(ctx, cat, id, ch); err != nil {
		if errors.Is(err, catalog.ErrCommitFailed) || errors.Is(err, catalog.ErrNoSuchTable) {
			// Refused: the job never existed. (After any other error the
			// commit may have landed: the batches stay.)
			err = errors.Join(err, s.Pipeline.DiscardExpire(ctx, job))
		}
		return ExpireResult{}, fmt.Errorf("expire snapshots of %s: %w", id, err)
	}
	res := ExpireResult{Snapshots: len(x.snapshots), Refs: len(x.refs)}
	if job.ID != "" {
		res.Files, res.Job = len(files), job.ID
		s.Pipeline.Started(ctx, job)
	}
	return res, nil
}

// holdIDs are the claim ids of holds.
func holdIDs(hs []store.Hold) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}
