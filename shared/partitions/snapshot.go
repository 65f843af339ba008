package partitions

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// FileIO for manifest lists and manifests
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"
)

// The snapshot a drop commits, built from iceberg-go's manifest readers and
// writers. What iceberg-go lacks, and this file writes (docs/design/partitions.md says
// what we would upstream): pruning a manifest list by partition summaries
// for an exact tuple (its manifest evaluator is unexported and takes row
// filters), ending entries by partition tuple without reading every
// manifest (its delete producer scans them all), and a snapshot summary
// from removed files (SnapshotSummaryCollector and updateSnapshotSummaries
// are unexported).

// tupleCounts is what a drop ended of one tuple.
type tupleCounts struct{ dataFiles, deleteFiles, records int64 }

// removed accumulates the snapshot summary's removal metrics.
type removed struct {
	dataFiles, records, deleteFiles, posDeleteFiles, eqDeleteFiles, posDeletes, eqDeletes, bytes int64
}

func (r *removed) add(df iceberg.DataFile) {
	r.bytes += df.FileSizeBytes()
	switch df.ContentType() {
	case iceberg.EntryContentData:
		r.dataFiles++
		r.records += df.Count()
	case iceberg.EntryContentPosDeletes:
		r.deleteFiles++
		r.posDeleteFiles++
		r.posDeletes += df.Count()
	case iceberg.EntryContentEqDeletes:
		r.deleteFiles++
		r.eqDeleteFiles++
		r.eqDeletes += df.Count()
	}
}

func (r *removed) merge(o removed) {
	r.dataFiles += o.dataFiles
	r.records += o.records
	r.deleteFiles += o.deleteFiles
	r.posDeleteFiles += o.posDeleteFiles
	r.eqDeleteFiles += o.eqDeleteFiles
	r.posDeletes += o.posDeletes
	r.eqDeletes += o.eqDeletes
	r.bytes += o.bytes
}

// dropPlan is a drop's new manifest list, its manifests already written.
type dropPlan struct {
	s          *Service
	fs         icebergio.IO
	location   string // the table's metadata directory, with a trailing /
	snapshotID int64
	commit     uuid.UUID
	attempt    int
	manifests  []iceberg.ManifestFile
	perTuple   []tupleCounts
	removed    removed
	changed    int // tuples with at least one file ended
	counts     ManifestCounts
}

// manifestResult is one manifest's outcome.
type manifestResult struct {
	replacement iceberg.ManifestFile // nil: keep the original (unless ended)
	// ended: every live entry matched. The manifest leaves the list and its
	// entries go, DELETED, into the drop's one manifest of ended entries
	// (per content), as iceberg-go's delete producer does: one write
	// instead of one per manifest.
	ended    []iceberg.ManifestEntry
	perTuple map[int]tupleCounts
	removed  removed
	read     bool
}

// plan reads the current snapshot's manifest list, then (in parallel) the
// manifests of the spec whose partition summaries admit a tuple, and
// writes a replacement for each that holds one.
func (s *Service) plan(ctx context.Context, meta table.Metadata, cur *table.Snapshot, spec iceberg.PartitionSpec, fields []field, tuples []tuple, attempt int) (*dropPlan, error) {
	fs, err := icebergio.LoadFS(ctx, s.IOProps, meta.Location())
	if err != nil {
		return nil, fmt.Errorf("file io: %w", err)
	}
	if _, ok := fs.(icebergio.WriteFileIO); !ok {
		return nil, fmt.Errorf("file io for %s cannot write", meta.Location())
	}
	list, err := cur.Manifests(fs)
	if err != nil {
		return nil, missing("manifest list", cur.ManifestList, err)
	}
	d := &dropPlan{
		s: s, fs: fs, location: strings.TrimRight(meta.Location(), "/") + "/metadata/",
		snapshotID: newSnapshotID(meta), commit: uuid.New(), attempt: attempt,
		perTuple: make([]tupleCounts, len(tuples)),
	}
	index := make(map[string]int, len(tuples))
	for i, t := range tuples {
		index[t.key] = i
	}
	results := make([]manifestResult, len(list))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.workers())
	for i, m := range list {
		if int(m.PartitionSpecID()) != spec.ID() || (!m.HasAddedFiles() && !m.HasExistingFiles()) || !mayMatch(m, fields, tuples) {
			continue
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			r, err := d.rewrite(meta, spec, m, i, fields, index)
			if err != nil {
				return missing("manifest", m.FilePath(), err)
			}
			results[i] = r
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d.counts.Total = len(list)
	d.manifests = make([]iceberg.ManifestFile, 0, len(list))
	ended := map[iceberg.ManifestContent][]iceberg.ManifestEntry{}
	endedAt := map[iceberg.ManifestContent]int{}
	for i, r := range results {
		if r.read {
			d.counts.Read++
		}
		switch {
		case r.ended != nil:
			c := list[i].ManifestContent()
			if _, seen := endedAt[c]; !seen {
				endedAt[c] = len(d.manifests)
				d.manifests = append(d.manifests, nil) // the ended entries' manifest goes here
			}
			ended[c] = append(ended[c], r.ended...)
			d.counts.Rewritten++
		case r.replacement != nil:
			d.manifests = append(d.manifests, r.replacement)
			d.counts.Rewritten++
			d.counts.Written++
		default:
			d.manifests = append(d.manifests, list[i])
		}
		for t, c := range r.perTuple {
			d.perTuple[t].dataFiles += c.dataFiles
			d.perTuple[t].deleteFiles += c.deleteFiles
			d.perTuple[t].records += c.records
		}
		d.removed.merge(r.removed)
	}
	for _, c := range d.perTuple {
		if c.dataFiles+c.deleteFiles > 0 {
			d.changed++
		}
	}
	for c, at := range endedAt {
		mf, err := d.write(meta, spec, c, fmt.Sprintf("e%d", c), func(w *iceberg.ManifestWriter) error {
			for _, e := range ended[c] {
				if err := w.Delete(e); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		d.manifests[at] = mf
		d.counts.Written++
	}
	return d, nil
}

// write writes one manifest of the drop's snapshot (named after the commit
// and name) with what fill adds.
func (d *dropPlan) write(meta table.Metadata, spec iceberg.PartitionSpec, content iceberg.ManifestContent, name string, fill func(*iceberg.ManifestWriter) error) (iceberg.ManifestFile, error) {
	var buf bytes.Buffer
	w, err := iceberg.NewManifestWriter(meta.Version(), &buf, spec, specSchema(meta, spec), d.snapshotID,
		iceberg.WithManifestWriterContent(content))
	if err != nil {
		return nil, err
	}
	if err := fill(w); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	path := fmt.Sprintf("%s%s-%s.avro", d.location, d.commit, name)
	mf, err := w.ToManifestFile(path, int64(buf.Len()), iceberg.WithManifestFileContent(content))
	if err != nil {
		return nil, err
	}
	if err := d.fs.(icebergio.WriteFileIO).WriteFile(path, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return mf, nil
}

// mayMatch: the manifest's partition summaries admit at least one tuple
// (iceberg's manifest evaluator rules for equality: a value must lie
// within [lower, upper], a null needs contains_null, absent bounds mean
// only nulls). Without usable summaries the manifest is read.
func mayMatch(m iceberg.ManifestFile, fields []field, tuples []tuple) bool {
	sums := m.Partitions()
	if len(sums) != len(fields) {
		return true
	}
	lower, upper := make([]norm, len(fields)), make([]norm, len(fields))
	known := make([]bool, len(fields))
	for i, f := range fields {
		s := sums[i]
		if s.LowerBound == nil || s.UpperBound == nil {
			continue
		}
		lo, err1 := iceberg.LiteralFromBytes(f.typ, *s.LowerBound)
		hi, err2 := iceberg.LiteralFromBytes(f.typ, *s.UpperBound)
		if err1 != nil || err2 != nil {
			return true
		}
		var err error
		if lower[i], err = normalize(lo.Any()); err != nil {
			return true
		}
		if upper[i], err = normalize(hi.Any()); err != nil {
			return true
		}
		known[i] = true
	}
	for _, t := range tuples {
		if tupleMayMatch(t, sums, lower, upper, known) {
			return true
		}
	}
	return false
}

func tupleMayMatch(t tuple, sums []iceberg.FieldSummary, lower, upper []norm, known []bool) bool {
	for i, v := range t.values {
		s := sums[i]
		if v == nil {
			if !s.ContainsNull {
				return false
			}
			continue
		}
		if s.LowerBound == nil && s.UpperBound == nil {
			return false // only nulls in this field
		}
		if !known[i] {
			continue
		}
		if c, ok := compare(lower[i], v); ok && c > 0 {
			return false
		}
		if c, ok := compare(v, upper[i]); ok && c > 0 {
			return false
		}
	}
	return true
}

// rewrite reads one manifest's live entries: those of a dropped tuple end
// (DELETED by the new snapshot), the rest stay EXISTING in a replacement
// (entries an older snapshot had deleted are left out, as Iceberg's
// manifest filters do). A manifest without a match is kept as it is; one
// whose every entry matched is not rewritten (its entries are ended).
func (d *dropPlan) rewrite(meta table.Metadata, spec iceberg.PartitionSpec, m iceberg.ManifestFile, pos int, fields []field, index map[string]int) (manifestResult, error) {
	res := manifestResult{read: true, perTuple: map[int]tupleCounts{}}
	var kept, ended []iceberg.ManifestEntry
	values := make([]norm, len(fields))
	for e, err := range m.Entries(d.fs, true) {
		if err != nil {
			return res, err
		}
		df := e.DataFile()
		part := df.Partition()
		for i, f := range fields {
			if values[i], err = normalize(part[f.id]); err != nil {
				return res, fmt.Errorf("%s: %w", df.FilePath(), err)
			}
		}
		t, hit := index[tupleKey(values)]
		if !hit {
			kept = append(kept, e)
			continue
		}
		ended = append(ended, e)
		c := res.perTuple[t]
		if df.ContentType() == iceberg.EntryContentData {
			c.dataFiles++
			c.records += df.Count()
		} else {
			c.deleteFiles++
		}
		res.perTuple[t] = c
		res.removed.add(df)
	}
	switch {
	case len(ended) == 0:
		return res, nil
	case len(kept) == 0:
		res.ended = ended
		return res, nil
	}
	mf, err := d.write(meta, spec, m.ManifestContent(), fmt.Sprintf("m%d", pos), func(w *iceberg.ManifestWriter) error {
		for _, e := range kept {
			if err := w.Existing(e); err != nil {
				return err
			}
		}
		for _, e := range ended {
			if err := w.Delete(e); err != nil {
				return err
			}
		}
		return nil
	})
	res.replacement = mf
	return res, err
}

// commitSnapshot writes the manifest list and returns the snapshot to add.
func (d *dropPlan) commitSnapshot(meta table.Metadata, parent *table.Snapshot, extra map[string]string) (*table.Snapshot, error) {
	var buf bytes.Buffer
	parentID := parent.SnapshotID
	seq := int64(0)
	if meta.Version() >= 2 {
		seq = meta.LastSequenceNumber() + 1
	}
	firstRowID := meta.NextRowID()
	var w *iceberg.ManifestListWriter
	var err error
	switch meta.Version() {
	case 1:
		w, err = iceberg.NewManifestListWriterV1(&buf, d.snapshotID, &parentID)
	case 2:
		w, err = iceberg.NewManifestListWriterV2(&buf, d.snapshotID, seq, &parentID)
	case 3:
		w, err = iceberg.NewManifestListWriterV3(&buf, d.snapshotID, seq, firstRowID, &parentID)
	default:
		err = fmt.Errorf("format version %d is not supported", meta.Version())
	}
	if err != nil {
		return nil, err
	}
	if err := w.AddManifests(d.manifests); err != nil {
		return nil, errors.Join(err, w.Close())
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	path := fmt.Sprintf("%ssnap-%d-%d-%s.avro", d.location, d.snapshotID, d.attempt, d.commit)
	if err := d.fs.(icebergio.WriteFileIO).WriteFile(path, buf.Bytes()); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	schemaID := meta.CurrentSchema().ID
	snap := &table.Snapshot{
		SnapshotID: d.snapshotID, ParentSnapshotID: &parentID, SequenceNumber: seq,
		TimestampMs: d.s.now().UnixMilli(), ManifestList: path, SchemaID: &schemaID,
		Summary: &table.Summary{Operation: table.OpDelete, Properties: d.summary(parent, extra)},
	}
	if meta.Version() == 3 {
		added := *w.NextRowID() - firstRowID
		snap.FirstRowID, snap.AddedRows = &firstRowID, &added
	}
	return snap, nil
}

// summary is the snapshot summary of a delete (the keys Iceberg's
// SnapshotSummary writes), totals carried from the parent's where it has
// them.
func (d *dropPlan) summary(parent *table.Snapshot, extra map[string]string) iceberg.Properties {
	r := d.removed
	props := iceberg.Properties{}
	set := func(k string, v int64) {
		if v > 0 {
			props[k] = strconv.FormatInt(v, 10)
		}
	}
	set("deleted-data-files", r.dataFiles)
	set("deleted-records", r.records)
	set("removed-files-size", r.bytes)
	set("removed-delete-files", r.deleteFiles)
	set("removed-position-delete-files", r.posDeleteFiles)
	set("removed-equality-delete-files", r.eqDeleteFiles)
	set("removed-position-deletes", r.posDeletes)
	set("removed-equality-deletes", r.eqDeletes)
	set("changed-partition-count", int64(d.changed))
	var prev iceberg.Properties
	if parent.Summary != nil {
		prev = parent.Summary.Properties
	}
	for _, t := range []struct {
		key     string
		removed int64
	}{
		{"total-data-files", r.dataFiles}, {"total-delete-files", r.deleteFiles}, {"total-records", r.records},
		{"total-files-size", r.bytes}, {"total-position-deletes", r.posDeletes}, {"total-equality-deletes", r.eqDeletes},
	} {
		if v, ok := prev[t.key]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n-t.removed >= 0 {
				props[t.key] = strconv.FormatInt(n-t.removed, 10)
			}
		}
	}
	for k, v := range extra {
		props[k] = v
	}
	return props
}

// newSnapshotID draws a positive id no snapshot of the table has (as
// Iceberg's own: the two halves of a random UUID folded together).
func newSnapshotID(meta table.Metadata) int64 {
	for {
		u := uuid.New()
		id := int64((binary.BigEndian.Uint64(u[:8]) ^ binary.BigEndian.Uint64(u[8:])) & math.MaxInt64)
		if id != 0 && meta.SnapshotByID(id) == nil {
			return id
		}
	}
}
