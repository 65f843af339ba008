package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// Ident names a table in a catalog.
type Ident struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

func (i Ident) String() string { return nsName(append(append([]string{}, i.Namespace...), i.Name)) }

// Validate checks both parts of a table's identifier.
func (i Ident) Validate() error { return tableKind.validate(i) }

// CreateTableRequest is the REST spec's CreateTableRequest.
type CreateTableRequest struct {
	Name          string                 `json:"name"`
	Location      string                 `json:"location,omitempty"`
	Schema        *iceberg.Schema        `json:"schema"`
	PartitionSpec *iceberg.PartitionSpec `json:"partition-spec,omitempty"`
	WriteOrder    *table.SortOrder       `json:"write-order,omitempty"`
	StageCreate   bool                   `json:"stage-create,omitempty"`
	Properties    iceberg.Properties     `json:"properties,omitempty"`
}

// TableChange is one table's requirements and updates (a CommitTableRequest).
type TableChange struct {
	Identifier   *Ident             `json:"identifier,omitempty"`
	Requirements table.Requirements `json:"requirements"`
	Updates      table.Updates      `json:"updates"`
	// Events the change reports, recorded in the outbox by the commit's
	// transaction (set by domain services, never by a client).
	Events []store.OutboxEvent `json:"-"`
	// Base, when set, is the metadata file the change was computed from:
	// the commit lands only while it is still the current one
	// (ErrCommitFailed otherwise). Server-side changes whose side effects
	// depend on the exact metadata (snapshot expiry's file list) use it;
	// Iceberg's requirements cannot say "nothing else changed".
	Base string `json:"-"`
	// Job, when set, is created in the pointer swap's transaction (its
	// metadata location set to the new file): snapshot expiry's delete job.
	Job *store.Job `json:"-"`
	// OwnFiles: icehold wrote every file the change adds from the table's
	// own entries (a partition drop): its manifests are not read back for
	// the path check (checkPaths), which a client's commit gets.
	OwnFiles bool `json:"-"`
}

// TableResult is what load, create, register and commit answer: the metadata
// location and the metadata JSON (passed through as written).
type TableResult struct {
	MetadataLocation string
	Metadata         []byte
	Entry            store.TableEntry
}

// checkLocation keeps table locations inside the catalog's warehouse: a
// purge deletes under its table's location, so a table must not be able to
// claim a location elsewhere (another bucket, another catalog).
func checkLocation(warehouse, loc string) error {
	l, err := tablePrefix(loc)
	if err != nil {
		return err
	}
	w, err := objects.Prefix(warehouse)
	if err != nil {
		return fmt.Errorf("catalog warehouse %q: %w", warehouse, err)
	}
	if w == l {
		return fmt.Errorf("%w: location %q is the catalog's warehouse root", ErrBadRequest, loc)
	}
	if !w.Contains(l) {
		return fmt.Errorf("%w: location %q is outside the catalog's warehouse %s", ErrBadRequest, loc, warehouse)
	}
	if err := objects.StableKey(l.Key); err != nil {
		return fmt.Errorf("%w: location %q: %v", ErrBadRequest, loc, err)
	}
	return nil
}

// DefaultLocation is <warehouse>/<namespace path>/<table>-<uuid>: unique, so
// a table created again never shares a prefix with a dropped one. Names
// are escaped into segments whose keys every FileIO writes the same
// (objects.EscapeSegment: "vü" is "v%C3%BC"); the uuid keeps two names
// that escape alike apart.
func DefaultLocation(warehouse string, id Ident, tableUUID uuid.UUID) string {
	segs := make([]string, 0, len(id.Namespace)+1)
	for _, l := range id.Namespace {
		segs = append(segs, objects.EscapeSegment(l))
	}
	segs = append(segs, objects.EscapeSegment(id.Name)+"-"+tableUUID.String())
	return strings.TrimRight(warehouse, "/") + "/" + strings.Join(segs, "/")
}

func (s *Service) requireNamespace(ctx context.Context, cat string, ns []string) error {
	_, err := s.store.GetNamespace(ctx, cat, ns)
	return nsErr("use", ns, err)
}

// CreateTable creates a table (or, with stage-create, only answers the
// metadata it would have, writing nothing).
func (s *Service) CreateTable(ctx context.Context, cat string, ns []string, req CreateTableRequest) (TableResult, error) {
	id := Ident{Namespace: ns, Name: req.Name}
	if err := tableKind.validate(id); err != nil {
		return TableResult{}, err
	}
	if req.Schema == nil {
		return TableResult{}, fmt.Errorf("%w: schema is required", ErrBadRequest)
	}
	p, err := s.place(ctx, cat, tableKind, id, req.Location, req.Properties)
	if err != nil {
		return TableResult{}, err
	}
	spec := iceberg.UnpartitionedSpec
	if req.PartitionSpec != nil {
		spec = req.PartitionSpec
	}
	order := table.UnsortedSortOrder
	if req.WriteOrder != nil {
		order = *req.WriteOrder
	}
	meta, err := table.NewMetadataWithUUID(req.Schema, spec, order, p.loc, req.Properties, p.uuid)
	if err != nil {
		return TableResult{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	raw, err := jsonOf(meta)
	if err != nil || req.StageCreate {
		return TableResult{Metadata: raw}, err
	}
	return s.insert(ctx, cat, tableKind, id, p, raw, req.Properties)
}

// Entry loads a table's catalog entry.
func (s *Service) Entry(ctx context.Context, cat string, id Ident) (store.TableEntry, error) {
	return s.entry(ctx, cat, id)
}

// purging explains a name held by a purge job: the 409 names the job and its state.
func (s *Service) purging(ctx context.Context, cat string, id Ident) error {
	t, err := s.store.GetTombstone(ctx, cat, id.Namespace, id.Name)
	if err != nil {
		return fmt.Errorf("table %s: %w", id, ErrPurging)
	}
	state := "unknown"
	if j, err := s.store.GetJob(ctx, cat, t.JobID); err == nil {
		state = j.State
	}
	return fmt.Errorf("table %s is being purged by job %s (state %s): %w", id, t.JobID, state, ErrPurging)
}

// entry loads a table entry (entryOf).
func (s *Service) entry(ctx context.Context, cat string, id Ident) (store.TableEntry, error) {
	return s.entryOf(ctx, cat, tableKind, id)
}

// LoadTable answers a table's current metadata; refsOnly keeps only the
// snapshots that refs point at.
func (s *Service) LoadTable(ctx context.Context, cat string, id Ident, onlyRefs bool) (TableResult, error) {
	e, err := s.entry(ctx, cat, id)
	if err != nil {
		return TableResult{}, err
	}
	return s.LoadEntry(ctx, id, e, onlyRefs)
}

// LoadEntry answers the metadata of an entry already read (a revalidation
// reads the entry first: a 304 needs nothing else).
func (s *Service) LoadEntry(ctx context.Context, id Ident, e store.TableEntry, onlyRefs bool) (TableResult, error) {
	_, raw, err := s.readMetadata(ctx, e.MetadataLocation)
	if err != nil {
		return TableResult{}, fmt.Errorf("load table %s: %w", id, err)
	}
	if onlyRefs {
		if raw, err = refsOnly(raw); err != nil {
			return TableResult{}, fmt.Errorf("load table %s: %w", id, err)
		}
	}
	return TableResult{MetadataLocation: e.MetadataLocation, Metadata: raw, Entry: e}, nil
}

// TableExists reports whether the table exists.
func (s *Service) TableExists(ctx context.Context, cat string, id Ident) error {
	_, err := s.entry(ctx, cat, id)
	return err
}

// ListTables pages through a namespace's tables.
func (s *Service) ListTables(ctx context.Context, cat string, ns []string, token string, limit int) ([]Ident, string, error) {
	return s.list(ctx, cat, tableKind, ns, token, limit)
}

// staged is one table's change computed and written, not yet swapped in.
type staged struct {
	id    Ident
	write store.TableWrite
	raw   []byte
	holds bool // the write takes or releases claims
}

// stage validates a change against the table's current metadata, applies it
// with iceberg-go and writes the new metadata file.
func (s *Service) stage(ctx context.Context, cat string, id Ident, ch TableChange, in *store.Intent) (staged, error) {
	if err := id.Validate(); err != nil {
		return staged{}, err
	}
	creating := false
	for _, r := range ch.Requirements {
		if r.GetType() == "assert-create" {
			creating = true
		}
	}
	var base table.Metadata
	var baseRaw []byte
	var current store.TableEntry
	if !creating {
		e, err := s.entry(ctx, cat, id)
		if err != nil {
			return staged{}, err
		}
		current = e
		if ch.Base != "" && e.MetadataLocation != ch.Base {
			return staged{}, fmt.Errorf("commit %s: the metadata moved from %s to %s: %w", id, ch.Base, e.MetadataLocation, ErrCommitFailed)
		}
		if base, baseRaw, err = s.readMetadata(ctx, e.MetadataLocation); err != nil {
			return staged{}, fmt.Errorf("commit %s: %w", id, err)
		}
	} else {
		if err := s.requireNamespace(ctx, cat, id.Namespace); err != nil {
			return staged{}, err
		}
		if e, err := s.store.GetEntry(ctx, cat, id.Namespace, id.Name); err == nil {
			if e.IsView() {
				return staged{}, fmt.Errorf("commit %s: assert-create: %w", id, s.Taken(ctx, cat, id, false))
			}
			return staged{}, fmt.Errorf("commit %s: assert-create: the table exists: %w", id, ErrCommitFailed)
		}
	}
	for _, r := range ch.Requirements {
		if err := r.Validate(base); err != nil {
			return staged{}, fmt.Errorf("commit %s: %v: %w", id, err, ErrCommitFailed)
		}
	}
	meta, changed, err := applyUpdates(base, current.MetadataLocation, ch.Updates)
	if err != nil {
		return staged{}, fmt.Errorf("commit %s: %w: %v", id, ErrBadRequest, err)
	}
	if err := checkTableProperties(changedProperties(base, meta)); err != nil {
		return staged{}, fmt.Errorf("commit %s: %w", id, err)
	}
	if !ch.OwnFiles {
		if err := s.checkPaths(ctx, base, meta); err != nil {
			return staged{}, fmt.Errorf("commit %s: %w", id, err)
		}
	}
	if err := s.checkLegalHoldChange(ctx, cat, id, current.LegalHold, legalHoldOf(meta.Properties())); err != nil {
		return staged{}, fmt.Errorf("commit: %w", err)
	}
	var plan *holdPlan
	moved := base == nil || meta.Location() != base.Location()
	if !moved {
		if err := checkOwned(base, meta, current.Holds()); err != nil {
			return staged{}, fmt.Errorf("commit %s: %w", id, err)
		}
	}
	// Old locations are let go once no retained snapshot reaches them:
	// decided again when snapshots go (or the location moves).
	if moved || len(current.Extra) > 0 && snapshotsRemoved(base, meta) {
		c, err := s.catalog(ctx, cat)
		if err != nil {
			return staged{}, err
		}
		if moved {
			if err := checkLocation(c.Warehouse, meta.Location()); err != nil {
				return staged{}, fmt.Errorf("commit %s: %w", id, err)
			}
		}
		if creating || current.Hold != nil || moved {
			// A registered table stays one: its old snapshots are still
			// metadata icehold did not write.
			p, err := s.planHolds(ctx, c, id, current.Holds(), meta.Location(), meta, moved, current.Hold != nil && current.Hold.Registered)
			if err != nil {
				return staged{}, fmt.Errorf("commit %s: %w", id, err)
			}
			plan = &p
		}
	}
	// A change that changes nothing keeps the current file: a new one
	// would leave it out of the metadata log (iceberg-go logs the previous
	// file only when something changed), where no purge would find it.
	metaLoc, raw := current.MetadataLocation, baseRaw
	if changed {
		if metaLoc, raw, err = s.writeMetadata(ctx, meta, current.MetadataLocation, in); err != nil {
			return staged{}, fmt.Errorf("commit %s: %w", id, err)
		}
	}
	next := current
	if creating {
		next = s.newEntry(ctx, tableKind, id, metaLoc, meta.TableUUID().String(), meta.Properties())
	}
	next.MetadataLocation = metaLoc
	mirrorLifecycle(&next, meta.Properties())
	w := store.TableWrite{Entry: next, Expected: current.MetadataLocation, Intent: in, Events: ch.Events}
	holds := false
	if plan != nil {
		w.Claim, w.Release, w.Entry.Hold, w.Entry.Extra = plan.claim, plan.release, plan.hold, plan.extra
		holds = plan.claim != nil || len(plan.release) > 0
	}
	return staged{id: id, write: w, raw: raw, holds: holds}, nil
}

// checkOwned refuses (ErrCommitFailed) a snapshot meta adds whose
// manifest list lies under none of the prefixes the table owns (holds;
// none: a table from before the ownership index, not checked). A writer
// that began before a move writes under the old location; when the move
// let that prefix go (no snapshot reached it then), such a commit would
// leave live files where no claim protects them and vended credentials do
// not reach. The writer writes again under the table's location.
func checkOwned(base, meta table.Metadata, holds []store.Hold) error {
	if base == nil || len(holds) == 0 {
		return nil
	}
	for _, sn := range meta.Snapshots() {
		if sn.ManifestList == "" || base.SnapshotByID(sn.SnapshotID) != nil {
			continue
		}
		obj, err := objects.Parse(sn.ManifestList)
		if err != nil {
			return fmt.Errorf("%w: manifest list %v", ErrBadRequest, err)
		}
		owned := slices.ContainsFunc(holds, func(h store.Hold) bool {
			return objects.Location{Bucket: h.Bucket, Key: h.Prefix}.Contains(obj)
		})
		if !owned {
			return fmt.Errorf("snapshot %d's manifest list %s lies outside every location the table owns (its location is %s; was it written before a move?): write it again under the table's location: %w", sn.SnapshotID, sn.ManifestList, meta.Location(), ErrCommitFailed)
		}
	}
	return nil
}

// snapshotsRemoved reports whether meta lost a snapshot base had.
func snapshotsRemoved(base, meta table.Metadata) bool {
	if base == nil {
		return false
	}
	for _, sn := range base.Snapshots() {
		if meta.SnapshotByID(sn.SnapshotID) == nil {
			return true
		}
	}
	return false
}

// applyUpdates applies updates to base (a staged create: to nothing) and
// says whether they changed anything.
func applyUpdates(base table.Metadata, baseLoc string, updates table.Updates) (table.Metadata, bool, error) {
	b, err := table.NewMetadataBuilder(1)
	if base != nil {
		b, err = table.MetadataBuilderFromBase(base, baseLoc)
	}
	if err != nil {
		return nil, false, err
	}
	for _, u := range updates {
		if err := u.Apply(b); err != nil {
			return nil, false, err
		}
	}
	changed := base == nil || b.HasChanges()
	meta, err := b.Build()
	return meta, changed, err
}

// CommitTable applies one table's change: a compare-and-swap of its metadata
// pointer, so a lost race is ErrCommitFailed and never a lost update.
func (s *Service) CommitTable(ctx context.Context, cat string, id Ident, ch TableChange) (TableResult, error) {
	st, err := s.stage(ctx, cat, id, ch, s.newIntent(cat))
	if err != nil {
		return TableResult{}, err
	}
	switch {
	case ch.Job != nil && (st.write.Expected == "" || st.write.Claim != nil):
		return TableResult{}, fmt.Errorf("commit %s: %w: a change that creates a job cannot create a table or move its location", id, ErrBadRequest)
	case ch.Job != nil && st.holds:
		// The old locations the expired snapshots alone reached go to the
		// job (their files may be among its own), which lets them go when
		// it ends.
		j := *ch.Job
		j.MetadataLocation = st.write.Entry.MetadataLocation
		j.Extra, st.write.Release = st.write.Release, nil
		st.write.Job = &j
		_, err = s.store.WriteTables(ctx, cat, []store.TableWrite{st.write})
		if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrLocationTaken) {
			err = store.ErrConditionFailed
		}
	case ch.Job != nil:
		j := *ch.Job
		j.MetadataLocation = st.write.Entry.MetadataLocation
		err = s.store.CommitTableWithJob(ctx, cat, st.write.Entry, st.write.Expected, st.write.Intent, j, st.write.Events...)
	case st.write.Expected == "" || st.holds:
		_, err = s.store.WriteTables(ctx, cat, []store.TableWrite{st.write})
		switch {
		case errors.Is(err, store.ErrTombstoned):
			return TableResult{}, s.purging(ctx, cat, id)
		case errors.Is(err, store.ErrLocationTaken) && st.write.Claim != nil:
			return TableResult{}, fmt.Errorf("commit %s: %w", id, s.ownedBy(ctx, st.write.Claim.Hold))
		case errors.Is(err, store.ErrExists):
			err = store.ErrConditionFailed // assert-create lost to a concurrent create
		}
	default:
		err = s.store.CommitTable(ctx, cat, st.write.Entry, st.write.Expected, st.write.Intent, st.write.Events...)
	}
	if err != nil {
		return TableResult{}, tableErr("commit", id, err)
	}
	return TableResult{MetadataLocation: st.write.Entry.MetadataLocation, Metadata: st.raw, Entry: st.write.Entry}, nil
}

// MaxTablesPerTransaction keeps a multi-table commit inside one DynamoDB
// transaction (100 items, two for a create).
const MaxTablesPerTransaction = 50

// CommitTransaction applies changes to several tables atomically: all or none.
func (s *Service) CommitTransaction(ctx context.Context, cat string, changes []TableChange) error {
	if len(changes) == 0 {
		return fmt.Errorf("%w: table-changes is empty", ErrBadRequest)
	}
	if len(changes) > MaxTablesPerTransaction {
		return fmt.Errorf("%w: %d table changes, at most %d", ErrBadRequest, len(changes), MaxTablesPerTransaction)
	}
	ctx = WithReadBudget(ctx, MaxRequestReadBytes)
	seen := map[string]bool{}
	in := s.newIntent(cat) // one for every file of the transaction
	writes := make([]store.TableWrite, 0, len(changes))
	ids := make([]Ident, 0, len(changes))
	for _, ch := range changes {
		if ch.Identifier == nil {
			return fmt.Errorf("%w: every table change needs an identifier", ErrBadRequest)
		}
		id := *ch.Identifier
		if seen[id.String()] {
			return fmt.Errorf("%w: table %s appears twice", ErrBadRequest, id)
		}
		seen[id.String()] = true
		st, err := s.stage(ctx, cat, id, ch, in)
		if err != nil {
			return err
		}
		writes = append(writes, st.write)
		ids = append(ids, id)
	}
	i, err := s.store.WriteTables(ctx, cat, writes)
	if errors.Is(err, store.ErrTombstoned) {
		return s.purging(ctx, cat, ids[i])
	}
	if errors.Is(err, store.ErrLocationTaken) {
		for j, w := range writes {
			if w.Claim != nil {
				if cerr := s.checkFree(ctx, w.Claim.Hold); cerr != nil {
					return fmt.Errorf("commit transaction: %s: %w", ids[j], cerr)
				}
			}
		}
		return fmt.Errorf("commit transaction: two tables claim overlapping locations: %w", ErrLocationOwned)
	}
	if errors.Is(err, store.ErrExists) || errors.Is(err, store.ErrNotFound) {
		err = store.ErrConditionFailed
	}
	if err != nil {
		return tableErr("commit transaction:", ids[i], err)
	}
	return nil
}

// DropTable removes a table's entry and releases its location. Files are
// left alone here; the purge and soft-delete pipelines own what happens to
// them.
func (s *Service) DropTable(ctx context.Context, cat string, id Ident) (store.TableEntry, error) {
	return s.drop(ctx, cat, tableKind, id)
}

// RenameTable moves a table to another identifier.
func (s *Service) RenameTable(ctx context.Context, cat string, from, to Ident) error {
	return s.rename(ctx, cat, tableKind, from, to)
}

// namedMetadataErr: a metadata-location a client named that is no metadata
// file (a bad URI, no object, not parseable, too large) is its 400.
func namedMetadataErr(err error) error {
	switch {
	case errors.Is(err, objects.ErrBadURI), errors.Is(err, objects.ErrNotFound), errors.Is(err, ErrBadMetadata), errors.Is(err, ErrTooLarge):
		return fmt.Errorf("%w: metadata-location: %v", ErrBadRequest, err)
	}
	return err
}

// RegisterTable creates an entry for an existing metadata file. The entry
// owns the table location the metadata names; a location another table or
// catalog owns is refused (409): a registered copy of a live table could
// otherwise purge that table's files.
func (s *Service) RegisterTable(ctx context.Context, cat string, id Ident, metaLoc string, overwrite bool) (TableResult, error) {
	c, err := s.registering(ctx, cat, tableKind, id, metaLoc)
	if err != nil {
		return TableResult{}, err
	}
	meta, raw, err := s.readMetadata(ctx, metaLoc)
	if err != nil {
		return TableResult{}, namedMetadataErr(err)
	}
	if err := checkTableProperties(meta.Properties()); err != nil {
		return TableResult{}, fmt.Errorf("register %s: %w", id, err)
	}
	if err := s.checkPaths(ctx, nil, meta); err != nil {
		return TableResult{}, fmt.Errorf("register %s: %w", id, err)
	}
	entry := s.newEntry(ctx, tableKind, id, metaLoc, meta.TableUUID().String(), meta.Properties())
	if t, err := s.store.GetTombstone(ctx, cat, id.Namespace, id.Name); err == nil {
		return s.recover(ctx, cat, id, t, entry, raw)
	}
	if u, err := s.store.GetUnregistered(ctx, cat, entry.TableUUID); err == nil && (u.Entry.Hold == nil || sameLocation(u.Entry.Hold, meta.Location())) {
		if _, err := s.store.GetTable(ctx, cat, id.Namespace, id.Name); err != nil || !overwrite {
			return s.reregister(ctx, cat, id, u, entry, raw)
		}
	}
	// The location a registered table owns (and its purge deletes under)
	// lies in the catalog's warehouse, as a created table's does: metadata
	// anyone can write must not claim other prefixes of the bucket.
	if err := checkLocation(c.Warehouse, meta.Location()); err != nil {
		return TableResult{}, fmt.Errorf("register %s: %w", id, err)
	}
	w := store.TableWrite{Entry: entry}
	old, err := s.store.GetTable(ctx, cat, id.Namespace, id.Name)
	exists := err == nil
	if exists && !overwrite {
		return TableResult{}, fmt.Errorf("register table %s: %w", id, ErrTableExists)
	}
	// The hold before: the replaced table's (the write is conditioned on
	// the pointer read with it), none for a new table.
	if err := s.checkLegalHoldChange(ctx, cat, id, exists && old.LegalHold, entry.LegalHold); err != nil {
		return TableResult{}, fmt.Errorf("register: %w", err)
	}
	var holds []store.Hold
	if overwrite && exists {
		// The same table moving on: it keeps what the new metadata still
		// reaches, as a set-location does.
		w.Expected, holds = old.MetadataLocation, old.Holds()
	}
	p, err := s.planHolds(ctx, c, id, holds, meta.Location(), meta, true, true)
	if err != nil {
		return TableResult{}, fmt.Errorf("register %s: %w", id, err)
	}
	h := *p.hold
	h.Registered = true
	w.Claim, w.Release, w.Entry.Hold, w.Entry.Extra = p.claim, p.release, &h, p.extra
	if _, err := s.store.WriteTables(ctx, cat, []store.TableWrite{w}); err != nil {
		return TableResult{}, s.writeErr(ctx, cat, tableKind, "register", id, w.Claim, err)
	}
	return TableResult{MetadataLocation: metaLoc, Metadata: raw, Entry: w.Entry}, nil
}

// recover is register as recovery: registering a purged table's own metadata
// location while its job is still PENDING cancels the job and restores the
// table atomically. Once deletion has started it is a 409.
func (s *Service) recover(ctx context.Context, cat string, id Ident, t store.Tombstone, entry store.TableEntry, raw []byte) (TableResult, error) {
	j, err := s.store.GetJob(ctx, cat, t.JobID)
	if err != nil || j.State != store.JobPending || j.MetadataLocation != entry.MetadataLocation {
		return TableResult{}, s.purging(ctx, cat, id)
	}
	if err := s.store.RestoreFromJob(ctx, j, entry); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return TableResult{}, s.purging(ctx, cat, id)
		}
		return TableResult{}, tableErr("register", id, err)
	}
	return TableResult{MetadataLocation: entry.MetadataLocation, Metadata: raw, Entry: entry}, nil
}

// UnregisterTable forgets a table and keeps every file (the spec's
// unregisterTable): the entry goes, and its claims stay with a record of
// the unregistered table, so that no other table takes its prefixes and no
// purge (whatever its delete scope) reaches its files while no table owns
// them. A register of its metadata (the same table uuid, at the same
// location) takes the claims back. It answers the last metadata.
func (s *Service) UnregisterTable(ctx context.Context, cat string, id Ident) (TableResult, error) {
	for attempt := 0; ; attempt++ {
		e, err := s.entry(ctx, cat, id)
		if err != nil {
			return TableResult{}, err
		}
		if e.LegalHold {
			// It would leave every listing: only who may lift the hold
			// may do that (its claims keep its files either way).
			if err := s.requireLegalHold(ctx, cat, fmt.Sprintf("unregister %s: it is under legal hold (%s), which needs TABLE_LEGAL_HOLD", id, PropLegalHold)); err != nil {
				return TableResult{}, err
			}
		}
		_, raw, err := s.readMetadata(ctx, e.MetadataLocation)
		if err != nil {
			return TableResult{}, fmt.Errorf("unregister table %s: %w", id, err)
		}
		err = s.store.UnregisterTable(ctx, cat, e, authz.Principal(ctx))
		switch {
		case errors.Is(err, store.ErrConditionFailed) && attempt < 5:
			continue // a commit moved the pointer: forget what is there now
		case errors.Is(err, store.ErrExists):
			return TableResult{}, fmt.Errorf("unregister table %s: a table of uuid %s is unregistered in catalog %s already (register its metadata first): %w", id, e.TableUUID, cat, ErrTableExists)
		case err != nil:
			return TableResult{}, tableErr("unregister", id, err)
		}
		return TableResult{MetadataLocation: e.MetadataLocation, Metadata: raw, Entry: e}, nil
	}
}

// ListUnregistered pages through a catalog's unregistered tables, each
// with the claims it keeps.
func (s *Service) ListUnregistered(ctx context.Context, cat, token string, limit int) ([]store.Unregistered, string, error) {
	out, next, err := s.store.ListUnregistered(ctx, cat, token, limit)
	if errors.Is(err, store.ErrBadPageToken) {
		err = fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return out, next, err
}

// reregister is register of an unregistered table's metadata: the new entry
// takes back the claims the record kept. The legal hold it had counts as
// the hold before (restoring it needs no privilege, changing it does).
// Metadata other than the file unregistered is metadata icehold may not
// have written: the hold is marked registered, as any register's.
func (s *Service) reregister(ctx context.Context, cat string, id Ident, u store.Unregistered, entry store.TableEntry, raw []byte) (TableResult, error) {
	if err := s.checkLegalHoldChange(ctx, cat, id, u.Entry.LegalHold, entry.LegalHold); err != nil {
		return TableResult{}, fmt.Errorf("register: %w", err)
	}
	entry.Hold, entry.Extra = u.Entry.Hold, u.Entry.Extra
	if entry.Hold != nil && entry.MetadataLocation != u.MetadataLocation {
		h := *entry.Hold
		h.Registered = true
		entry.Hold = &h
	}
	err := s.store.Reregister(ctx, u, entry)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return TableResult{}, nsErr("register in", id.Namespace, err)
	case errors.Is(err, store.ErrTombstoned):
		return TableResult{}, s.purging(ctx, cat, id)
	case errors.Is(err, store.ErrExists):
		return TableResult{}, fmt.Errorf("register %s: %w", id, s.Taken(ctx, cat, id, false))
	case err != nil:
		return TableResult{}, tableErr("register", id, err)
	}
	return TableResult{MetadataLocation: entry.MetadataLocation, Metadata: raw, Entry: entry}, nil
}
