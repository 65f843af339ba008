package storagesweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// FileIO for manifest lists and manifests
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"
)

// readParallel is how many manifests of a table are read at once.
const readParallel = 16

// reachable calls add (one call at a time) with every file a table's
// metadata reaches: its metadata file and metadata log, statistics and
// partition statistics files, and for every snapshot of every branch and
// tag (every snapshot the metadata retains) its manifest list, manifests
// and the data and delete files of their entries of any status. A file
// that cannot be read (a manifest gone, metadata that does not parse) is
// an error: the table's reachable set is then unknown and none of its
// files may go.
func (s *Service) reachable(ctx context.Context, metadataLocation string, add func(path string)) error {
	add(metadataLocation)
	meta, err := s.Catalog.ReadMetadata(ctx, metadataLocation)
	if err != nil {
		return err
	}
	for prev := range meta.PreviousFiles() {
		add(prev.MetadataFile)
	}
	for st := range meta.Statistics() {
		add(st.StatisticsPath)
	}
	for st := range meta.PartitionStatistics() {
		add(st.StatisticsPath)
	}
	return s.eachManifestEntry(ctx, meta, meta.Snapshots(), add, func(iceberg.ManifestFile) bool { return true })
}

// eachManifestEntry reads the manifest lists of snaps (marking them), then
// every distinct manifest they list that want takes (marking it and the
// file of each entry), 16 at a time, streaming each manifest's entries;
// mark is called one call at a time.
func (s *Service) eachManifestEntry(ctx context.Context, meta table.Metadata, snaps []table.Snapshot, add func(string), want func(iceberg.ManifestFile) bool) error {
	var mu sync.Mutex
	mark := func(p string) {
		mu.Lock()
		add(p)
		mu.Unlock()
	}
	fs, err := icebergio.LoadFS(ctx, s.IOProps, meta.Location())
	if err != nil {
		return fmt.Errorf("file io: %w", err)
	}
	lists := make([][]iceberg.ManifestFile, len(snaps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readParallel)
	for i, sn := range snaps {
		if sn.ManifestList == "" {
			continue
		}
		mark(sn.ManifestList)
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			mfs, err := sn.Manifests(fs)
			if err != nil {
				return fmt.Errorf("manifest list %s: %w", sn.ManifestList, err)
			}
			lists[i] = mfs
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	seen := map[string]bool{}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(readParallel)
	for _, l := range lists {
		for _, m := range l {
			if seen[m.FilePath()] || !want(m) {
				continue
			}
			seen[m.FilePath()] = true
			mark(m.FilePath())
			g.Go(func() error {
				if gctx.Err() != nil {
					return gctx.Err()
				}
				return streamEntries(fs, m, func(e iceberg.ManifestEntry) { mark(e.DataFile().FilePath()) })
			})
		}
	}
	return g.Wait()
}

// streamEntries reads a manifest's entries one at a time.
func streamEntries(fs icebergio.IO, m iceberg.ManifestFile, fn func(iceberg.ManifestEntry)) error {
	f, err := fs.Open(m.FilePath())
	if err != nil {
		return fmt.Errorf("manifest %s: %w", m.FilePath(), err)
	}
	defer f.Close()
	rd, err := iceberg.NewManifestReaderWithProjection(m, f, iceberg.ManifestEntryProjection{})
	if err != nil {
		return fmt.Errorf("manifest %s: %w", m.FilePath(), err)
	}
	defer rd.Close()
	for {
		e, err := rd.ReadEntry()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("manifest %s: %w", m.FilePath(), err)
		}
		fn(e)
	}
}
