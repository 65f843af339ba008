package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// One owner per prefix (SPEC §2): every table owns its location and every
// catalog its warehouse, recorded in the store's ownership index. These are
// the catalog's rules on top of it; the store's conditions decide races.

// maxLocationDepth bounds a location's path segments: each segment above a
// claim is one item of the claiming transaction (DynamoDB holds 100).
const maxLocationDepth = 40

// tablePrefix parses a table location: an s3:// prefix, not too deep.
func tablePrefix(loc string) (objects.Location, error) {
	l, err := objects.Prefix(loc)
	if err != nil {
		return l, fmt.Errorf("%w: table location: %v", ErrBadRequest, err)
	}
	if l.Key == "" {
		return l, fmt.Errorf("%w: table location %q is a whole bucket", ErrBadRequest, loc)
	}
	if n := strings.Count(l.Key, "/") + 1; n > maxLocationDepth {
		return l, fmt.Errorf("%w: table location %q has %d path segments, at most %d", ErrBadRequest, loc, n, maxLocationDepth)
	}
	return l, nil
}

// tableClaim is the claim a table of catalog c takes on loc. Inside its
// catalog's warehouse the chain starts below the warehouse (whose own claim
// covers everything above); the warehouse root itself is no table location.
func tableClaim(c store.Catalog, id Ident, loc string) (store.Claim, error) {
	l, err := tablePrefix(loc)
	if err != nil {
		return store.Claim{}, err
	}
	h := store.Hold{ID: uuid.NewString(), Bucket: l.Bucket, Prefix: l.Key}
	if w, err := objects.Prefix(c.Warehouse); err == nil {
		if w == l {
			return store.Claim{}, fmt.Errorf("%w: table location %q is the catalog's warehouse root", ErrBadRequest, loc)
		}
		if w.Contains(l) && c.Hold != nil {
			h.Based, h.Base = true, w.Key
		}
	}
	return store.Claim{Hold: h, Owner: store.Owner{Kind: store.OwnerTable, Catalog: c.Name, Namespace: id.Namespace, Name: id.Name}}, nil
}

// warehouseClaim is the claim a catalog takes on its warehouse.
func warehouseClaim(name, warehouse string) (store.Claim, error) {
	l, err := objects.Prefix(warehouse)
	if err != nil {
		return store.Claim{}, fmt.Errorf("%w: warehouse: %v", ErrBadRequest, err)
	}
	if n := strings.Count(l.Key, "/") + 1; n > maxLocationDepth {
		return store.Claim{}, fmt.Errorf("%w: warehouse %q is too deep", ErrBadRequest, warehouse)
	}
	return store.Claim{
		Hold:  store.Hold{ID: uuid.NewString(), Bucket: l.Bucket, Prefix: l.Key},
		Owner: store.Owner{Kind: store.OwnerWarehouse, Catalog: name},
	}, nil
}

// ownedBy explains a refused claim: the 409 names the owner.
func (s *Service) ownedBy(ctx context.Context, h store.Hold) error {
	owner, err := s.store.Conflict(ctx, h)
	if err != nil {
		return fmt.Errorf("location %s overlaps a prefix owned by another table or catalog: %w", h.URI(), ErrLocationOwned)
	}
	return fmt.Errorf("location %s overlaps %s: %w", h.URI(), owner, ErrLocationOwned)
}

// checkFree refuses early (before any file is written) a claim that
// collides with an owner; the transaction that takes it decides races.
func (s *Service) checkFree(ctx context.Context, h store.Hold) error {
	_, err := s.store.Conflict(ctx, h)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	return s.ownedBy(ctx, h)
}

// sameLocation reports whether a hold claims the prefix loc names.
func sameLocation(h *store.Hold, loc string) bool {
	l, err := objects.Prefix(loc)
	return err == nil && h != nil && h.Bucket == l.Bucket && h.Prefix == l.Key
}
