package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/view"

	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// Views (SPEC §2): the REST spec's view endpoints on the record store's
// entries. A view is an entry of kind view at the key a table of its name
// would have, so a table and a view never share an identifier (every
// create is conditioned on the key's absence), and it counts as a child of
// its namespace. Its metadata is written by icehold with iceberg-go's view
// package, one file per change under <location>/metadata/ (an intent names
// it first, as for tables), and a commit is a compare-and-swap of the
// pointer. A view owns its location like a table (a claim), so its
// permanent delete can list that prefix for its metadata files.

// CreateViewRequest is the REST spec's CreateViewRequest.
type CreateViewRequest struct {
	Name        string             `json:"name"`
	Location    string             `json:"location,omitempty"`
	Schema      *iceberg.Schema    `json:"schema"`
	ViewVersion *view.Version      `json:"view-version"`
	Properties  iceberg.Properties `json:"properties"`
}

// ViewChange is the REST spec's CommitViewRequest.
type ViewChange struct {
	Identifier   *Ident            `json:"identifier,omitempty"`
	Requirements view.Requirements `json:"requirements"`
	Updates      view.Updates      `json:"updates"`
}

// Taken explains a name that is held: the 409 (AlreadyExistsException
// either way, as the spec says) says whether a table or a view holds it,
// whatever the request would make (a table's create, rename, register or
// assert-create onto a view's name once said "table already exists" or
// "the table changed concurrently"). view: the request would make a view
// (the answer when the holder is gone again).
func (s *Service) Taken(ctx context.Context, cat string, id Ident, view bool) error {
	want := ErrTableExists
	if view {
		want = ErrViewExists
	}
	e, err := s.store.GetEntry(ctx, cat, id.Namespace, id.Name)
	switch {
	case err != nil:
		return fmt.Errorf("%s: the name is taken: %w", id, want)
	case e.IsView():
		return fmt.Errorf("%s is the name of a view (view-uuid %s): %w", id, e.TableUUID, ErrViewExists)
	}
	return fmt.Errorf("%s is the name of a table (table-uuid %s): %w", id, e.TableUUID, ErrTableExists)
}

// ViewEntry loads a view's entry (entryOf).
func (s *Service) ViewEntry(ctx context.Context, cat string, id Ident) (store.TableEntry, error) {
	return s.entryOf(ctx, cat, viewKind, id)
}

// parseView reads a view's metadata file: its JSON as stored and parsed.
func (s *Service) parseView(ctx context.Context, loc string) (view.Metadata, []byte, error) {
	raw, err := s.readMetadataFile(ctx, loc)
	if err != nil {
		return nil, nil, err
	}
	meta, err := view.ParseMetadataBytes(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadMetadata, loc, err)
	}
	return meta, raw, nil
}

// CreateView creates a view: its first metadata file, then one
// transaction (entry, namespace count, location claim, intent retired).
func (s *Service) CreateView(ctx context.Context, cat string, ns []string, req CreateViewRequest) (TableResult, error) {
	id := Ident{Namespace: ns, Name: req.Name}
	if err := viewKind.validate(id); err != nil {
		return TableResult{}, err
	}
	if req.Schema == nil || req.ViewVersion == nil {
		return TableResult{}, fmt.Errorf("%w: schema and view-version are required", ErrBadRequest)
	}
	p, err := s.place(ctx, cat, viewKind, id, req.Location, req.Properties)
	if err != nil {
		return TableResult{}, err
	}
	meta, err := view.NewMetadataWithUUID(req.ViewVersion, req.Schema, p.loc, req.Properties, p.uuid)
	if err != nil {
		return TableResult{}, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		return TableResult{}, fmt.Errorf("encode view metadata: %w", err)
	}
	return s.insert(ctx, cat, viewKind, id, p, raw, req.Properties)
}

func (s *Service) writeView(ctx context.Context, meta view.Metadata, previous string, in *store.Intent) (string, []byte, error) {
	raw, err := json.Marshal(meta)
	if err != nil {
		return "", nil, fmt.Errorf("encode view metadata: %w", err)
	}
	return s.writeMetadataFile(ctx, meta.Location(), raw, previous, in)
}

// LoadView answers a view's current metadata as stored.
func (s *Service) LoadView(ctx context.Context, cat string, id Ident) (TableResult, error) {
	e, err := s.ViewEntry(ctx, cat, id)
	if err != nil {
		return TableResult{}, err
	}
	raw, err := s.readMetadataFile(ctx, e.MetadataLocation)
	if err != nil {
		return TableResult{}, fmt.Errorf("load view %s: %w", id, err)
	}
	return TableResult{MetadataLocation: e.MetadataLocation, Metadata: raw, Entry: e}, nil
}

// ListViews pages through a namespace's views.
func (s *Service) ListViews(ctx context.Context, cat string, ns []string, token string, limit int) ([]Ident, string, error) {
	return s.list(ctx, cat, viewKind, ns, token, limit)
}

// ReplaceView applies a view's requirements and updates with iceberg-go's
// view builder and swaps the pointer: a lost race is ErrCommitFailed.
func (s *Service) ReplaceView(ctx context.Context, cat string, id Ident, ch ViewChange) (TableResult, error) {
	e, err := s.ViewEntry(ctx, cat, id)
	if err != nil {
		return TableResult{}, err
	}
	base, baseRaw, err := s.parseView(ctx, e.MetadataLocation)
	if err != nil {
		return TableResult{}, fmt.Errorf("replace view %s: %w", id, err)
	}
	for _, r := range ch.Requirements {
		if err := r.Validate(base); err != nil {
			return TableResult{}, fmt.Errorf("replace view %s: %v: %w", id, err, ErrCommitFailed)
		}
	}
	b, err := view.MetadataBuilderFromBase(base)
	if err != nil {
		return TableResult{}, fmt.Errorf("replace view %s: %w: %v", id, ErrBadRequest, err)
	}
	for _, u := range ch.Updates {
		if err := u.Apply(b); err != nil {
			return TableResult{}, fmt.Errorf("replace view %s: %w: %v", id, ErrBadRequest, err)
		}
	}
	if !b.HasChanges() {
		// Nothing to change (a client checking its requirements): no file.
		return TableResult{MetadataLocation: e.MetadataLocation, Metadata: baseRaw, Entry: e}, nil
	}
	built, err := b.Build()
	if err != nil {
		return TableResult{}, fmt.Errorf("replace view %s: %w: %v", id, ErrBadRequest, err)
	}
	meta := built.Metadata
	if err := checkTableProperties(changedProps(base.Properties(), meta.Properties())); err != nil {
		return TableResult{}, fmt.Errorf("replace view %s: %w", id, err)
	}
	if err := s.checkLegalHoldChange(ctx, cat, id, e.LegalHold, legalHoldOf(meta.Properties())); err != nil {
		return TableResult{}, fmt.Errorf("replace view: %w", err)
	}
	next := e
	w := store.TableWrite{Expected: e.MetadataLocation}
	if strings.TrimRight(meta.Location(), "/") != strings.TrimRight(base.Location(), "/") {
		c, err := s.catalog(ctx, cat)
		if err != nil {
			return TableResult{}, err
		}
		if err := checkLocation(c.Warehouse, meta.Location()); err != nil {
			return TableResult{}, fmt.Errorf("replace view %s: %w", id, err)
		}
		if next.Hold, next.Extra, w.Claim, w.Release, err = s.viewHolds(ctx, c, id, e, meta.Location()); err != nil {
			return TableResult{}, fmt.Errorf("replace view %s: %w", id, err)
		}
	}
	in := s.newIntent(cat)
	metaLoc, raw, err := s.writeView(ctx, meta, e.MetadataLocation, in)
	if err != nil {
		return TableResult{}, fmt.Errorf("replace view %s: %w", id, err)
	}
	next.MetadataLocation = metaLoc
	mirrorLifecycle(&next, meta.Properties())
	w.Entry, w.Intent = next, in
	if w.Claim != nil || len(w.Release) > 0 {
		_, err = s.store.WriteTables(ctx, cat, []store.TableWrite{w})
		if errors.Is(err, store.ErrLocationTaken) || errors.Is(err, store.ErrTombstoned) {
			return TableResult{}, s.writeErr(ctx, cat, viewKind, "replace", id, w.Claim, err)
		}
	} else {
		err = s.store.CommitTable(ctx, cat, next, e.MetadataLocation, in)
	}
	if err != nil {
		return TableResult{}, viewErr("replace", id, err)
	}
	return TableResult{MetadataLocation: metaLoc, Metadata: raw, Entry: next}, nil
}

// viewHolds decides a view's claims when its location moves to loc. A
// hold equal to or containing loc stays the location's hold; otherwise
// loc is claimed and holds inside it are let go (the claim covers them).
// Every other hold is kept: a view's old metadata files lie under its old
// locations and nothing deletes them before the view's permanent delete,
// whose final listing covers every hold.
func (s *Service) viewHolds(ctx context.Context, c store.Catalog, id Ident, e store.TableEntry, loc string) (*store.Hold, []store.Hold, *store.Claim, []store.Hold, error) {
	l, err := tablePrefix(loc)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var hold *store.Hold
	var extra, release []store.Hold
	for _, h := range e.Holds() {
		hl := objects.Location{Bucket: h.Bucket, Key: h.Prefix}
		switch {
		case hold == nil && (hl == l || hl.Contains(l)):
			hold = &h
		case l.Contains(hl):
			release = append(release, h)
		default:
			extra = append(extra, h)
		}
	}
	if hold != nil {
		return hold, extra, nil, release, nil
	}
	cl, err := viewKind.claim(c, id, loc)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if len(release) == 0 {
		if err := s.checkFree(ctx, cl.Hold); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return &cl.Hold, extra, &cl, release, nil
}

// DropView removes a view's entry and releases its location: the drop of a
// catalog without soft delete, which leaves the files as a table's does.
func (s *Service) DropView(ctx context.Context, cat string, id Ident) (store.TableEntry, error) {
	return s.drop(ctx, cat, viewKind, id)
}

// RenameView moves a view to another identifier, across namespaces too;
// its claims follow it.
func (s *Service) RenameView(ctx context.Context, cat string, from, to Ident) error {
	return s.rename(ctx, cat, viewKind, from, to)
}

// RegisterView creates a view's entry for an existing metadata file. As
// for tables, the location the metadata names must lie in the warehouse and
// be free: the view owns it (a registered hold).
func (s *Service) RegisterView(ctx context.Context, cat string, id Ident, metaLoc string) (TableResult, error) {
	c, err := s.registering(ctx, cat, viewKind, id, metaLoc)
	if err != nil {
		return TableResult{}, err
	}
	meta, raw, err := s.parseView(ctx, metaLoc)
	if err != nil {
		return TableResult{}, namedMetadataErr(err)
	}
	if err := checkTableProperties(meta.Properties()); err != nil {
		return TableResult{}, fmt.Errorf("register view %s: %w", id, err)
	}
	if _, err := s.store.GetEntry(ctx, cat, id.Namespace, id.Name); err == nil {
		return TableResult{}, s.Taken(ctx, cat, id, true)
	}
	if err := s.checkLegalHoldChange(ctx, cat, id, false, legalHoldOf(meta.Properties())); err != nil {
		return TableResult{}, fmt.Errorf("register view: %w", err)
	}
	if err := checkLocation(c.Warehouse, meta.Location()); err != nil {
		return TableResult{}, fmt.Errorf("register view %s: %w", id, err)
	}
	claim, err := viewKind.claim(c, id, meta.Location())
	if err != nil {
		return TableResult{}, err
	}
	claim.Hold.Registered = true
	if err := s.checkFree(ctx, claim.Hold); err != nil {
		return TableResult{}, fmt.Errorf("register view %s: %w", id, err)
	}
	entry := s.newEntry(ctx, viewKind, id, metaLoc, meta.ViewUUID().String(), meta.Properties())
	entry.Hold = &claim.Hold
	if _, err := s.store.WriteTables(ctx, cat, []store.TableWrite{{Entry: entry, Claim: &claim}}); err != nil {
		return TableResult{}, s.writeErr(ctx, cat, viewKind, "register", id, &claim, err)
	}
	return TableResult{MetadataLocation: metaLoc, Metadata: raw, Entry: entry}, nil
}
