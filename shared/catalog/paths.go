package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/icehold/icehold/shared/objects"
)

// File paths in their clean form (SPEC §2, key forms). Every file a table's
// metadata names (metadata files, statistics and partition statistics,
// manifest lists, manifests, data and delete files) is refused at commit,
// multi-table commit and register when its path has an empty, "." or ".."
// segment: S3 keys such a path literally, but its text places it under a
// prefix where a resolving reader does not find it
// (s3://b/evil/e/x/../../../demo/t/f names demo's file from inside evil's
// table). The check here is the early refusal, bounded like reachability
// (a commit adding more snapshots, or reaching more manifests or bytes,
// is checked up to the bounds; an unreadable file is skipped): a file
// can be rewritten after its commit, so what decides is the delete side,
// where no job ever deletes such a path (shared/purge, candidate), and
// verify, which names any such path already stored.

// maxCheckedSnapshots bounds the new snapshots whose manifests one commit
// reads (an engine's commit adds one or a few).
const maxCheckedSnapshots = 100

// checkPaths refuses (ErrBadRequest naming it) a path with an empty, "."
// or ".." segment among the files meta names that base did not (nil: a
// register, everything is new): its metadata log, statistics and manifest
// lists, and the manifests, data and delete files of its new snapshots,
// read within the bounds.
func (s *Service) checkPaths(ctx context.Context, base, meta table.Metadata) error {
	known := map[string]bool{}
	snaps := map[int64]bool{}
	if base != nil {
		for e := range base.PreviousFiles() {
			known[e.MetadataFile] = true
		}
		for st := range base.Statistics() {
			known[st.StatisticsPath] = true
		}
		for st := range base.PartitionStatistics() {
			known[st.StatisticsPath] = true
		}
		for _, sn := range base.Snapshots() {
			snaps[sn.SnapshotID] = true
		}
	}
	check := func(what, path string) error {
		if known[path] {
			return nil
		}
		if err := objects.CheckPath(path); err != nil {
			return fmt.Errorf("%w: %s %v", ErrBadRequest, what, err)
		}
		return nil
	}
	for e := range meta.PreviousFiles() {
		if err := check("metadata file", e.MetadataFile); err != nil {
			return err
		}
	}
	for st := range meta.Statistics() {
		if err := check("statistics file", st.StatisticsPath); err != nil {
			return err
		}
	}
	for st := range meta.PartitionStatistics() {
		if err := check("partition statistics file", st.StatisticsPath); err != nil {
			return err
		}
	}
	var added []table.Snapshot
	for _, sn := range meta.Snapshots() {
		if snaps[sn.SnapshotID] || sn.ManifestList == "" {
			continue
		}
		if err := check("manifest list", sn.ManifestList); err != nil {
			return err
		}
		added = append(added, sn)
	}
	if len(added) > maxCheckedSnapshots {
		added = added[len(added)-maxCheckedSnapshots:] // the newest
	}
	return s.checkManifests(ctx, base, added)
}

// checkManifests reads the manifest lists of the added snapshots and the
// manifests they name that their parents' lists (in base) do not, and
// refuses a manifest, data or delete file path that is not clean.
func (s *Service) checkManifests(ctx context.Context, base table.Metadata, added []table.Snapshot) error {
	if len(added) == 0 {
		return nil
	}
	var read atomic.Int64
	lists := func(paths []string) map[string]iceberg.ManifestFile {
		var mu sync.Mutex
		out := map[string]iceberg.ManifestFile{}
		var g errgroup.Group
		g.SetLimit(reachParallel)
		for _, p := range paths {
			g.Go(func() error {
				raw, err := s.objects.Get(ctx, p, maxReachBytes)
				if err == nil && read.Add(int64(len(raw))) > maxReachBytes {
					return nil
				}
				var mfs []iceberg.ManifestFile
				if err == nil {
					mfs, err = iceberg.ReadManifestList(bytes.NewReader(raw))
				}
				if err != nil {
					if !errors.Is(err, objects.ErrNotFound) {
						slog.Warn("path check: manifest list unreadable; not checked", "path", p, "error", err)
					}
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				for _, m := range mfs {
					out[m.FilePath()] = m
				}
				return nil
			})
		}
		_ = g.Wait()
		return out
	}
	var parents, news []string
	for _, sn := range added {
		news = append(news, sn.ManifestList)
		if base != nil && sn.ParentSnapshotID != nil {
			if p := base.SnapshotByID(*sn.ParentSnapshotID); p != nil && p.ManifestList != "" {
				parents = append(parents, p.ManifestList)
			}
		}
	}
	old := lists(parents)
	var manifests []iceberg.ManifestFile
	for p, m := range lists(news) {
		if _, ok := old[p]; ok {
			continue
		}
		if err := objects.CheckPath(p); err != nil {
			return fmt.Errorf("%w: manifest %v", ErrBadRequest, err)
		}
		manifests = append(manifests, m)
	}
	if len(manifests) > maxReachManifests {
		manifests = manifests[:maxReachManifests]
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reachParallel)
	for _, m := range manifests {
		g.Go(func() error {
			raw, err := s.objects.Get(gctx, m.FilePath(), maxReachBytes)
			if err == nil && read.Add(int64(len(raw))) > maxReachBytes {
				return nil
			}
			var entries []iceberg.ManifestEntry
			if err == nil {
				entries, err = iceberg.ReadManifest(m, bytes.NewReader(raw), false)
			}
			if err != nil {
				if !errors.Is(err, objects.ErrNotFound) {
					slog.Warn("path check: manifest unreadable; not checked", "path", m.FilePath(), "error", err)
				}
				return nil
			}
			for _, e := range entries {
				what := "data file"
				if e.DataFile().ContentType() != iceberg.EntryContentData {
					what = "delete file"
				}
				if err := objects.CheckPath(e.DataFile().FilePath()); err != nil {
					return fmt.Errorf("%w: %s (of manifest %s) %v", ErrBadRequest, what, m.FilePath(), err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}
