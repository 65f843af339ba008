// Package partitions drops whole partitions of a table (SPEC §5): one
// commit with one `delete` snapshot that ends every live data file and
// delete file of the named partition tuples. It reads the manifest list and
// only the manifests whose partition summaries can hold a tuple, rewrites
// only those that do, and never reads, writes or deletes a data or delete
// file: the files go later, through snapshot expiry and the delete pipeline.
package partitions

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/outbox"
)

// Domain errors; the router maps them to HTTP.
var (
	// ErrTableUUIDMismatch: expected-table-uuid names another generation
	// of the table.
	ErrTableUUIDMismatch = errors.New("table uuid mismatch")
	// ErrDataRemoved: a snapshot after read-snapshot-id removed data (or
	// read-snapshot-id is not an ancestor of the current snapshot).
	ErrDataRemoved = errors.New("data removed since the read snapshot")
	// ErrFilesMissing: the current snapshot reaches a manifest list or
	// manifest that is gone (a registered copy whose files another
	// table's purge deleted): nothing can be rewritten.
	ErrFilesMissing = errors.New("the table's current snapshot reaches files that no longer exist")
)

// missing marks a read of a file that is gone as ErrFilesMissing.
func missing(what, path string, err error) error {
	if errors.Is(err, iofs.ErrNotExist) {
		return fmt.Errorf("%w: %s %s is gone", ErrFilesMissing, what, path)
	}
	return fmt.Errorf("%s %s: %w", what, path, err)
}

// EventPartitionsDropped is the event a committed drop publishes.
const EventPartitionsDropped = "PartitionsDropped"

// Summary properties icehold adds to the snapshots it commits.
const (
	PropOperation      = "icehold.operation"
	OperationPartition = "partition-drop"
)

// Service drops partitions of the catalog's tables.
type Service struct {
	Catalog *catalog.Service
	// IOProps configure iceberg-go's FileIO for manifest lists and
	// manifests (locally: the embedded S3's endpoint and keys).
	IOProps map[string]string
	// Pipeline takes snapshot expiry's files (the retention sweep's); nil:
	// the sweep expires no snapshot.
	Pipeline Pipeline
	// Storage lists and restores objects for verify's files check and
	// repair (integrity.go); nil: neither.
	Storage Storage
	// Workers bounds the manifests read and written at once (0: 8).
	Workers int
	// Now stamps snapshots (nil: time.Now).
	Now func() time.Time
}

// TupleResult is one tuple's share of a drop.
type TupleResult struct {
	Partition   map[string]any `json:"partition"`
	DataFiles   int64          `json:"data-files"`
	DeleteFiles int64          `json:"delete-files"`
	Records     int64          `json:"records"`
}

// ManifestCounts says what a drop read and wrote of the metadata layer.
type ManifestCounts struct {
	// Total manifests in the current snapshot's list; Read of them (the
	// rest pruned by spec or partition summaries); Rewritten of those
	// (replaced in the list); Written the manifests the drop wrote:
	// a replacement per manifest that keeps live entries, and one
	// manifest (per content) for the entries of those wholly ended.
	Total     int `json:"total"`
	Read      int `json:"read"`
	Rewritten int `json:"rewritten"`
	Written   int `json:"written"`
}

// DropResult is the answer of a drop (SPEC §7).
type DropResult struct {
	// SnapshotID is the drop's snapshot; when nothing matched (Committed
	// false) the current snapshot, in which the tuples already hold no
	// live file (null for a table without snapshots).
	SnapshotID       *int64         `json:"snapshot-id"`
	Committed        bool           `json:"committed"`
	DataFilesEnded   int64          `json:"data-files-ended"`
	DeleteFilesEnded int64          `json:"delete-files-ended"`
	RecordsEnded     int64          `json:"records-ended"`
	Partitions       []TupleResult  `json:"partitions"`
	Manifests        ManifestCounts `json:"manifests"`
	MetadataLocation string         `json:"metadata-location,omitempty"`
}

// commitAttempts: a drop that loses its pointer swap to a concurrent
// commit (an append) plans again on the new snapshot, as Iceberg's own
// snapshot producers retry; past these it answers the 409.
const commitAttempts = 4

// Drop ends the tuples' live files in one commit. The request's guards
// are checked against the table as read; nothing is committed when a
// tuple is malformed, and nothing when no tuple matches a live file.
func (s *Service) Drop(ctx context.Context, cat string, id catalog.Ident, req DropRequest) (DropResult, error) {
	return s.drop(ctx, cat, id, req, nil)
}

func (s *Service) drop(ctx context.Context, cat string, id catalog.Ident, req DropRequest, extra map[string]string) (DropResult, error) {
	if err := req.validate(); err != nil {
		return DropResult{}, err
	}
	if err := id.Validate(); err != nil {
		return DropResult{}, err
	}
	var err error
	for attempt := 0; attempt < commitAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return DropResult{}, ctx.Err()
			case <-time.After(time.Duration(10+rand.IntN(40*attempt)) * time.Millisecond):
			}
		}
		var res DropResult
		res, err = s.dropOnce(ctx, cat, id, req, attempt, extra)
		if !errors.Is(err, catalog.ErrCommitFailed) {
			return res, err
		}
		slog.Info("partition drop lost a commit race, planning again", "table", id.String(), "attempt", attempt+1)
	}
	return DropResult{}, err
}

func (s *Service) dropOnce(ctx context.Context, cat string, id catalog.Ident, req DropRequest, attempt int, extra map[string]string) (DropResult, error) {
	entry, err := s.Catalog.Entry(ctx, cat, id)
	if err != nil {
		return DropResult{}, err
	}
	meta, err := s.Catalog.ReadMetadata(ctx, entry.MetadataLocation)
	if err != nil {
		return DropResult{}, fmt.Errorf("partition drop %s: %w", id, err)
	}
	if req.ExpectedTableUUID != "" && !strings.EqualFold(req.ExpectedTableUUID, meta.TableUUID().String()) {
		return DropResult{}, fmt.Errorf("%w: table %s is %s, not %s", ErrTableUUIDMismatch, id, meta.TableUUID(), req.ExpectedTableUUID)
	}
	specID := meta.DefaultPartitionSpec()
	if req.SpecID != nil {
		specID = *req.SpecID
	}
	spec := meta.PartitionSpecByID(specID)
	switch {
	case spec == nil:
		return DropResult{}, badRequest("table %s has no partition spec %d", id, specID)
	case spec.IsUnpartitioned():
		return DropResult{}, badRequest("partition spec %d of table %s has no partition fields: nothing to name a partition by", specID, id)
	}
	fields := specFields(meta, *spec)
	tuples, err := parseTuples(req.Partitions, fields)
	if err != nil {
		return DropResult{}, err
	}
	cur := meta.CurrentSnapshot()
	if req.ReadSnapshotID != nil {
		if err := checkRead(meta, *req.ReadSnapshotID); err != nil {
			return DropResult{}, fmt.Errorf("partition drop %s: %w", id, err)
		}
	}
	res := DropResult{Partitions: make([]TupleResult, len(tuples))}
	for i, t := range tuples {
		p := make(map[string]any, len(fields))
		for j, f := range fields {
			p[f.name] = formatValue(t.values[j], f.typ)
		}
		res.Partitions[i].Partition = p
	}
	if cur == nil {
		return res, nil
	}
	d, err := s.plan(ctx, meta, cur, *spec, fields, tuples, attempt)
	if err != nil {
		return DropResult{}, fmt.Errorf("partition drop %s: %w", id, err)
	}
	res.Manifests = d.counts
	for i, c := range d.perTuple {
		res.Partitions[i].DataFiles, res.Partitions[i].DeleteFiles, res.Partitions[i].Records = c.dataFiles, c.deleteFiles, c.records
		res.DataFilesEnded += c.dataFiles
		res.DeleteFilesEnded += c.deleteFiles
		res.RecordsEnded += c.records
	}
	if res.DataFilesEnded+res.DeleteFilesEnded == 0 {
		// Nothing live in these tuples: no snapshot, so that a retry or a
		// rerun of a retention sweep commits nothing.
		curID := cur.SnapshotID
		res.SnapshotID = &curID
		return res, nil
	}
	props := map[string]string{PropOperation: OperationPartition}
	for k, v := range extra {
		props[k] = v
	}
	snap, err := d.commitSnapshot(meta, cur, props)
	if err != nil {
		return DropResult{}, fmt.Errorf("partition drop %s: %w", id, err)
	}
	main := mainRef(meta)
	change := catalog.TableChange{
		Requirements: table.Requirements{
			table.AssertTableUUID(meta.TableUUID()),
			table.AssertRefSnapshotID(table.MainBranch, &cur.SnapshotID),
		},
		Updates: table.Updates{
			table.NewAddSnapshotUpdate(snap),
			table.NewSetSnapshotRefUpdate(table.MainBranch, snap.SnapshotID, table.BranchRef,
				deref(main.MaxRefAgeMs), deref(main.MaxSnapshotAgeMs), deref(main.MinSnapshotsToKeep)),
		},
		OwnFiles: true, // its manifests carry the table's own entries
	}
	res.SnapshotID = &snap.SnapshotID
	change.Events = outbox.Records(dropEvent(ctx, cat, id, meta.TableUUID().String(), res))
	committed, err := s.Catalog.CommitTable(ctx, cat, id, change)
	if err != nil {
		return DropResult{}, err
	}
	res.Committed, res.MetadataLocation = true, committed.MetadataLocation
	return res, nil
}

func mainRef(meta table.Metadata) table.SnapshotRef {
	for name, ref := range meta.Refs() {
		if name == table.MainBranch {
			return ref
		}
	}
	return table.SnapshotRef{}
}

func deref[T int | int64](p *T) T {
	if p == nil {
		return 0
	}
	return *p
}

// checkRead: no snapshot between read and the current one (on main) may
// have removed data; appends and rewrites (replace) may have come since.
func checkRead(meta table.Metadata, read int64) error {
	for sn := meta.CurrentSnapshot(); sn != nil; {
		if sn.SnapshotID == read {
			return nil
		}
		if sn.Summary != nil && (sn.Summary.Operation == table.OpDelete || sn.Summary.Operation == table.OpOverwrite) {
			return fmt.Errorf("%w: snapshot %d (%s) after read-snapshot-id %d removed data", ErrDataRemoved, sn.SnapshotID, sn.Summary.Operation, read)
		}
		if sn.ParentSnapshotID == nil {
			break
		}
		sn = meta.SnapshotByID(*sn.ParentSnapshotID)
	}
	return fmt.Errorf("%w: read-snapshot-id %d is not an ancestor of the current snapshot (expired, or never on main)", ErrDataRemoved, read)
}

// dropEvent is the PartitionsDropped event of a drop, recorded in the
// outbox by the commit that makes its snapshot current.
func dropEvent(ctx context.Context, cat string, id catalog.Ident, uuid string, res DropResult) eventbus.Event {
	tuples := make([]map[string]any, len(res.Partitions))
	for i, p := range res.Partitions {
		tuples[i] = p.Partition
	}
	return eventbus.Event{
		Type: EventPartitionsDropped, Actor: authz.Principal(ctx), Catalog: cat, Namespace: id.Namespace, Table: id.Name, TableUUID: uuid,
		Detail: map[string]any{
			"snapshot-id": *res.SnapshotID, "partitions": tuples, "data-files-ended": res.DataFilesEnded,
			"delete-files-ended": res.DeleteFilesEnded, "records-ended": res.RecordsEnded,
		},
	}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
