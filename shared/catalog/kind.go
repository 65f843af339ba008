package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// kind is what a table and a view differ in where their lifecycle is the
// same (load, create, drop, rename, list, register): one implementation,
// parameterised by kind, so that a change to one kind's lifecycle is made
// once.
type kind struct {
	view bool
}

var (
	tableKind = kind{}
	viewKind  = kind{view: true}
)

// noun names the kind in messages and in name validation.
func (k kind) noun() string {
	if k.view {
		return "view"
	}
	return "table"
}

func (k kind) validate(id Ident) error {
	if err := ValidateNamespace(id.Namespace); err != nil {
		return err
	}
	return ValidateName(k.noun(), id.Name)
}

// err maps a store error of an operation on one entry to the catalog's.
func (k kind) err(op string, id Ident, err error) error {
	missing, exists := ErrNoSuchTable, ErrTableExists
	if k.view {
		missing, exists = ErrNoSuchView, ErrViewExists
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%s %s %s: %w", op, k.noun(), id, missing)
	case errors.Is(err, store.ErrExists):
		return fmt.Errorf("%s %s %s: %w", op, k.noun(), id, exists)
	case errors.Is(err, store.ErrConditionFailed):
		return fmt.Errorf("%s %s %s: the %s changed concurrently: %w", op, k.noun(), id, k.noun(), ErrCommitFailed)
	case errors.Is(err, store.ErrBadPageToken), errors.Is(err, store.ErrTooManyItems):
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return fmt.Errorf("%s %s %s: %w", op, k.noun(), id, err)
}

func tableErr(op string, id Ident, err error) error { return tableKind.err(op, id, err) }
func viewErr(op string, id Ident, err error) error  { return viewKind.err(op, id, err) }

// writeErr explains a lost create, register or move of an entry.
func (s *Service) writeErr(ctx context.Context, cat string, k kind, op string, id Ident, claim *store.Claim, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nsErr(op+" "+k.noun()+" in", id.Namespace, err)
	case errors.Is(err, store.ErrTombstoned):
		return s.purging(ctx, cat, id)
	case errors.Is(err, store.ErrLocationTaken) && claim != nil:
		return fmt.Errorf("%s %s %s: %w", op, k.noun(), id, s.ownedBy(ctx, claim.Hold))
	case errors.Is(err, store.ErrExists):
		return fmt.Errorf("%s %s: %w", op, id, s.Taken(ctx, cat, id, k.view))
	}
	return k.err(op, id, err)
}

// claim is the claim an entry of the kind takes on its location.
func (k kind) claim(c store.Catalog, id Ident, loc string) (store.Claim, error) {
	cl, err := tableClaim(c, id, loc)
	if k.view {
		cl.Owner.Kind = store.OwnerView
	}
	return cl, err
}

// newEntry is a new entry's record, its lifecycle properties mirrored.
func (s *Service) newEntry(ctx context.Context, k kind, id Ident, metaLoc, uuid string, props map[string]string) store.TableEntry {
	e := store.TableEntry{
		Namespace: id.Namespace, Name: id.Name, MetadataLocation: metaLoc,
		TableUUID: uuid, CreatedAt: s.now().UTC().Format(time.RFC3339Nano),
		CreatedBy: authz.Principal(ctx),
	}
	if k.view {
		e.Kind = store.EntryView
	}
	mirrorLifecycle(&e, props)
	return e
}

// mirrorLifecycle copies the lifecycle properties onto an entry (a drop
// decides from the entry alone).
func mirrorLifecycle(e *store.TableEntry, props map[string]string) {
	e.LegalHold = legalHoldOf(props)
	e.HoldPeriod = props[PropHoldPeriod]
}

// entryOf loads an entry of the kind, mapping a miss to ErrNoSuchTable or
// ErrNoSuchView (or ErrNoSuchNamespace when the namespace is missing too,
// as the spec asks).
func (s *Service) entryOf(ctx context.Context, cat string, k kind, id Ident) (store.TableEntry, error) {
	if err := k.validate(id); err != nil {
		return store.TableEntry{}, err
	}
	get := s.store.GetTable
	if k.view {
		get = s.store.GetView
	}
	e, err := get(ctx, cat, id.Namespace, id.Name)
	if errors.Is(err, store.ErrNotFound) {
		if nsErr := s.requireNamespace(ctx, cat, id.Namespace); nsErr != nil {
			return e, nsErr
		}
	}
	return e, k.err("load", id, err)
}

// placement is where a new entry goes: its location, uuid and claim.
type placement struct {
	loc   string
	uuid  uuid.UUID
	claim store.Claim
}

// place checks a create's (validated) name, properties and location and claims the
// location (the default one when none is given) for a new uuid.
func (s *Service) place(ctx context.Context, cat string, k kind, id Ident, location string, props map[string]string) (placement, error) {
	if err := checkTableProperties(props); err != nil {
		return placement{}, err
	}
	if err := s.checkLegalHoldChange(ctx, cat, id, false, legalHoldOf(props)); err != nil {
		return placement{}, err
	}
	c, err := s.catalog(ctx, cat)
	if err != nil {
		return placement{}, err
	}
	if err := s.requireNamespace(ctx, cat, id.Namespace); err != nil {
		return placement{}, err
	}
	if _, err := s.store.GetEntry(ctx, cat, id.Namespace, id.Name); err == nil {
		return placement{}, s.Taken(ctx, cat, id, k.view) // a table or a view
	}
	if _, err := s.store.GetTombstone(ctx, cat, id.Namespace, id.Name); err == nil {
		return placement{}, s.purging(ctx, cat, id)
	}
	u := uuid.New()
	loc := strings.TrimRight(location, "/")
	if loc == "" {
		loc = DefaultLocation(c.Warehouse, id, u)
	}
	if err := checkLocation(c.Warehouse, loc); err != nil {
		return placement{}, err
	}
	claim, err := k.claim(c, id, loc)
	if err != nil {
		return placement{}, err
	}
	if err := s.checkFree(ctx, claim.Hold); err != nil {
		return placement{}, err
	}
	return placement{loc: loc, uuid: u, claim: claim}, nil
}

// insert writes a created entry's first metadata file and then, in one
// transaction, the entry, its claim and the intent's retirement.
func (s *Service) insert(ctx context.Context, cat string, k kind, id Ident, p placement, raw []byte, props map[string]string) (TableResult, error) {
	in := s.newIntent(cat)
	metaLoc, raw, err := s.writeMetadataFile(ctx, p.loc, raw, "", in)
	if err != nil {
		return TableResult{}, k.err("create", id, err)
	}
	entry := s.newEntry(ctx, k, id, metaLoc, p.uuid.String(), props)
	entry.Hold = &p.claim.Hold
	if _, err := s.store.WriteTables(ctx, cat, []store.TableWrite{{Entry: entry, Claim: &p.claim, Intent: in}}); err != nil {
		return TableResult{}, s.writeErr(ctx, cat, k, "create", id, &p.claim, err)
	}
	return TableResult{MetadataLocation: metaLoc, Metadata: raw, Entry: entry}, nil
}

// drop removes an entry and releases its location: the drop without purge
// or soft delete, which leaves the files where they are.
func (s *Service) drop(ctx context.Context, cat string, k kind, id Ident) (store.TableEntry, error) {
	for attempt := 0; ; attempt++ {
		e, err := s.entryOf(ctx, cat, k, id)
		if err != nil {
			return store.TableEntry{}, err
		}
		err = s.store.DeleteTable(ctx, cat, e)
		if errors.Is(err, store.ErrConditionFailed) && attempt < 5 {
			continue // a commit moved the pointer: drop what is there now
		}
		return e, k.err("drop", id, err)
	}
}

// rename moves an entry to another identifier, across namespaces too; its
// claims follow it.
func (s *Service) rename(ctx context.Context, cat string, k kind, from, to Ident) error {
	if err := k.validate(to); err != nil {
		return err
	}
	e, err := s.entryOf(ctx, cat, k, from)
	if err != nil {
		return err
	}
	moved := e
	moved.Namespace, moved.Name = to.Namespace, to.Name
	nsMissing, err := s.store.RenameTable(ctx, cat, e, moved)
	switch {
	case nsMissing:
		return nsErr("rename "+k.noun()+" to", to.Namespace, err)
	case errors.Is(err, store.ErrTombstoned):
		return s.purging(ctx, cat, to)
	case errors.Is(err, store.ErrExists):
		return fmt.Errorf("rename %s to %s: %w", from, to, s.Taken(ctx, cat, to, k.view))
	}
	return k.err("rename", from, err)
}

// list pages through a namespace's entries of the kind.
func (s *Service) list(ctx context.Context, cat string, k kind, ns []string, token string, limit int) ([]Ident, string, error) {
	if err := ValidateNamespace(ns); err != nil {
		return nil, "", err
	}
	if err := s.requireNamespace(ctx, cat, ns); err != nil {
		return nil, "", err
	}
	page := s.store.ListTables
	if k.view {
		page = s.store.ListViews
	}
	entries, next, err := page(ctx, cat, ns, token, limit)
	if err != nil {
		return nil, "", k.err("list", Ident{Namespace: ns}, err)
	}
	out := make([]Ident, len(entries))
	for i, e := range entries {
		out[i] = Ident{Namespace: e.Namespace, Name: e.Name}
	}
	return out, next, nil
}

// registering checks what every register checks before it reads the
// metadata: the name, the catalog, the namespace and the metadata path.
func (s *Service) registering(ctx context.Context, cat string, k kind, id Ident, metaLoc string) (store.Catalog, error) {
	if err := k.validate(id); err != nil {
		return store.Catalog{}, err
	}
	c, err := s.catalog(ctx, cat)
	if err != nil {
		return store.Catalog{}, err
	}
	if err := s.requireNamespace(ctx, cat, id.Namespace); err != nil {
		return store.Catalog{}, err
	}
	if err := objects.CheckPath(metaLoc); err != nil {
		return store.Catalog{}, fmt.Errorf("register %s: %w: metadata-location %v", id, ErrBadRequest, err)
	}
	return c, checkMetadataName(metaLoc)
}
