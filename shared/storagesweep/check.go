package storagesweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// Check is the delete step's check of a sweep batch (purge.FileCheck):
// between the sweep's join and this batch, a table may have committed a
// file it found unreachable (a file written before the report, committed
// after it), been dropped, moved, soft-deleted, legal-held or handed to
// a purge. So for each owner of the batch, once: its claim must be the
// one the sweep saw and still a live table's, not legal-held; and an
// orphan goes only if no snapshot its table committed since the sweep read
// it reaches the file. A noncurrent version goes whatever reaches its key.
// Whatever cannot be decided is kept (counted skipped).
func (s *Service) Check(ctx context.Context, j store.Job, b store.Batch) (func(context.Context, int) (objects.Location, bool, error), error) {
	if b.Sweep == nil || len(b.Sweep.Of) != len(b.Files) || len(b.Sweep.Noncurrent) != len(b.Files) {
		return nil, fmt.Errorf("batch %d of job %s: no sweep check recorded", b.Number, j.ID)
	}
	owners := make([]*ownerCheck, len(b.Sweep.Owners))
	return func(ctx context.Context, i int) (objects.Location, bool, error) {
		obj, err := objects.Parse(b.Files[i])
		if err != nil || obj.Key == "" {
			return obj, false, nil
		}
		k := b.Sweep.Of[i]
		if k < 0 || k >= len(owners) {
			return obj, false, nil
		}
		if owners[k] == nil {
			oc, err := s.checkOwner(ctx, b.Sweep.Owners[k], obj)
			if err != nil {
				return obj, false, err
			}
			owners[k] = oc
		}
		oc := owners[k]
		switch {
		case !oc.alive:
			return obj, false, nil
		case b.Sweep.Noncurrent[i]:
			return obj, true, nil
		default:
			return obj, !oc.reached[obj.Key], nil
		}
	}, nil
}

// ownerCheck is what a batch found of one owner: whether its files may go
// at all, and which keys (of the batch's bucket) snapshots committed
// since the sweep reach.
type ownerCheck struct {
	alive   bool
	reached map[string]bool
}

// checkOwner checks an owner against the index and its table's entry now.
func (s *Service) checkOwner(ctx context.Context, want store.SweepOwner, obj objects.Location) (*ownerCheck, error) {
	st := s.Catalog.Store()
	kept := &ownerCheck{}
	o, err := st.OwnerAt(ctx, obj.Bucket, obj.Key)
	if errors.Is(err, store.ErrNotFound) {
		return kept, nil
	}
	if err != nil {
		return nil, err
	}
	if o.ID != want.Claim || o.Kind == store.OwnerWarehouse || o.JobID != "" || o.SoftDeleted || o.Unregistered {
		return kept, nil
	}
	e, err := st.GetEntry(ctx, o.Catalog, o.Namespace, o.Name)
	if errors.Is(err, store.ErrNotFound) {
		return kept, nil
	}
	if err != nil {
		return nil, err
	}
	if on, err := s.Catalog.Held(ctx, o.Catalog, e.Namespace, e.LegalHold); err != nil || on {
		return kept, err
	}
	oc := &ownerCheck{alive: true, reached: map[string]bool{}}
	if e.MetadataLocation == want.Metadata || e.IsView() {
		return oc, nil
	}
	err = s.committedSince(ctx, want.Metadata, e.MetadataLocation, func(path string) {
		if p, err := objects.Parse(path); err == nil && p.Bucket == obj.Bucket {
			oc.reached[p.Key] = true
		}
	})
	if err != nil {
		slog.Warn("storage sweep: a table's new commits are unreadable; its candidates are kept", "metadata", e.MetadataLocation, "error", err)
		return kept, nil
	}
	return oc, nil
}

// committedSince calls add with every file the metadata at now reaches
// that the metadata at then did not: only a snapshot that then did not
// have can add a file, and only in a manifest it wrote; plus statistics
// files and the metadata files of the log.
func (s *Service) committedSince(ctx context.Context, then, now string, add func(string)) error {
	old, err := s.Catalog.ReadMetadata(ctx, then)
	if err != nil {
		return err
	}
	meta, err := s.Catalog.ReadMetadata(ctx, now)
	if err != nil {
		return err
	}
	had := map[int64]bool{}
	for _, sn := range old.Snapshots() {
		had[sn.SnapshotID] = true
	}
	var fresh []table.Snapshot
	for _, sn := range meta.Snapshots() {
		if !had[sn.SnapshotID] {
			fresh = append(fresh, sn)
		}
	}
	add(now)
	for prev := range meta.PreviousFiles() {
		add(prev.MetadataFile)
	}
	for st := range meta.Statistics() {
		add(st.StatisticsPath)
	}
	for st := range meta.PartitionStatistics() {
		add(st.StatisticsPath)
	}
	return s.eachManifestEntry(ctx, meta, fresh, add, func(m iceberg.ManifestFile) bool { return !had[m.SnapshotID()] })
}
