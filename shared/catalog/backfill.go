package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// OwnershipMigration names the one-time step that fills the ownership index
// with the owners that existed before it.
const OwnershipMigration = "ownership-index-v1"

// ChildrenMigration names the one-time step that counts every namespace's
// children (tables and child namespaces) for the counter a namespace drop
// is conditioned on.
const ChildrenMigration = "namespace-children-v1"

// BackfillChildren sets every namespace's children counter from what it
// holds. Run it once, before traffic (make run does at start): a create
// landing while it counts could be missed by the count.
func (s *Service) BackfillChildren(ctx context.Context) (int, error) {
	cats, err := s.store.ListCatalogs(ctx)
	if err != nil {
		return 0, fmt.Errorf("list catalogs: %w", err)
	}
	n := 0
	for _, c := range cats {
		nss, err := s.store.AllNamespaces(ctx, c.Name)
		if err != nil {
			return n, err
		}
		for _, ns := range nss {
			count, err := s.store.CountChildren(ctx, c.Name, ns.Levels)
			if err != nil {
				return n, err
			}
			if err := s.store.SetChildren(ctx, c.Name, ns.Levels, count); err != nil && !errors.Is(err, store.ErrNotFound) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// EnsureChildren runs BackfillChildren once (its marker).
func (s *Service) EnsureChildren(ctx context.Context) (int, bool, error) {
	done, err := s.store.Marked(ctx, ChildrenMigration)
	if err != nil || done {
		return 0, false, err
	}
	n, err := s.BackfillChildren(ctx)
	if err != nil {
		return n, true, err
	}
	return n, true, s.store.Mark(ctx, ChildrenMigration)
}

// OwnershipReport says what the backfill claimed and what it could not.
type OwnershipReport struct {
	Warehouses int `json:"warehouses"`
	Tables     int `json:"tables"`
	// SoftDeleted: soft-deleted tables (the claim is recorded on the
	// record, so an undrop or a permanent delete carries it on).
	SoftDeleted int      `json:"soft-deleted"`
	Jobs        int      `json:"jobs"`
	Conflicts   []string `json:"conflicts,omitempty"`
}

// formerClaims are the claims on a table's locations from before a move
// (formerLocations) outside the location claim takes.
func (s *Service) formerClaims(ctx context.Context, c store.Catalog, id Ident, meta table.Metadata, claim store.Claim) ([]store.Claim, error) {
	olds, err := s.formerLocations(ctx, meta, objects.Location{Bucket: claim.Hold.Bucket, Key: claim.Hold.Prefix})
	if err != nil {
		return nil, err
	}
	var out []store.Claim
	for _, l := range olds {
		x, err := tableClaim(c, id, l.URI())
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// EnsureOwnership runs the ownership backfill once (make run calls it at
// every start; in AWS `icehold migrate ownership` does).
func (s *Service) EnsureOwnership(ctx context.Context) (OwnershipReport, bool, error) {
	done, err := s.store.Marked(ctx, OwnershipMigration)
	if err != nil || done {
		return OwnershipReport{}, false, err
	}
	rep, err := s.BackfillOwnership(ctx)
	if err != nil {
		return rep, true, err
	}
	return rep, true, s.store.Mark(ctx, OwnershipMigration)
}

// BackfillOwnership claims, for every catalog, table entry, soft-deleted
// table and unfinished purge job that has no claim yet, the location it
// owns, tables oldest first (live and soft-deleted alike, by creation):
// where two overlap (a registered copy of a live table), the older keeps it
// and the younger owns nothing (its purge then deletes nothing under that
// prefix). Idempotent: what already holds a claim is skipped.
func (s *Service) BackfillOwnership(ctx context.Context) (OwnershipReport, error) {
	var rep OwnershipReport
	cats, err := s.store.ListCatalogs(ctx)
	if err != nil {
		return rep, fmt.Errorf("list catalogs: %w", err)
	}
	slices.SortFunc(cats, func(a, b store.Catalog) int { return compareTimes(a.CreatedAt, b.CreatedAt) })
	byName := map[string]store.Catalog{}
	for i, c := range cats {
		if c.Hold == nil {
			claim, err := warehouseClaim(c.Name, c.Warehouse)
			if err == nil {
				err = s.store.SetCatalogHold(ctx, c.Name, claim)
			}
			switch {
			case err == nil:
				rep.Warehouses++
				cats[i].Hold = &claim.Hold
			case errors.Is(err, store.ErrLocationTaken):
				rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("catalog %s: %v", c.Name, s.ownedBy(ctx, claim.Hold)))
			default:
				rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("catalog %s: %v", c.Name, err))
			}
		}
		byName[c.Name] = cats[i]
	}
	type pending struct {
		cat   string
		entry store.TableEntry
		soft  *store.SoftDeleted // a soft-deleted table's record
	}
	var entries []pending
	for _, c := range cats {
		nss, err := s.store.AllNamespaces(ctx, c.Name)
		if err != nil {
			return rep, err
		}
		for _, ns := range nss {
			token := ""
			for {
				page, next, err := s.store.ListTables(ctx, c.Name, ns.Levels, token, 100)
				if err != nil {
					return rep, err
				}
				for _, e := range page {
					if e.Hold == nil {
						entries = append(entries, pending{c.Name, e, nil})
					}
				}
				if next == "" {
					break
				}
				token = next
			}
		}
		token := ""
		for {
			page, next, err := s.store.ListSoftDeleted(ctx, c.Name, nil, token, 100)
			if err != nil {
				return rep, err
			}
			for _, r := range page {
				if r.Entry.Hold == nil {
					entries = append(entries, pending{c.Name, r.Entry, &r})
				}
			}
			if next == "" {
				break
			}
			token = next
		}
	}
	slices.SortStableFunc(entries, func(a, b pending) int { return compareTimes(a.entry.CreatedAt, b.entry.CreatedAt) })
	for _, p := range entries {
		id := Ident{Namespace: p.entry.Namespace, Name: p.entry.Name}
		what := fmt.Sprintf("table %s of catalog %s", id, p.cat)
		if p.soft != nil {
			what = fmt.Sprintf("soft-deleted table %s (uuid %s, generation %q) of catalog %s", id, p.entry.TableUUID, p.soft.Generation, p.cat)
		}
		meta, err := s.ReadMetadata(ctx, p.entry.MetadataLocation)
		if err != nil {
			rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("%s owns nothing: %v", what, err))
			continue
		}
		claim, err := tableClaim(byName[p.cat], id, meta.Location())
		// The locations it had before a set-location that its snapshots
		// still reach are its own too (a later owner's purge of a parent
		// prefix would otherwise delete its files).
		var extra []store.Claim
		if err == nil {
			extra, err = s.formerClaims(ctx, byName[p.cat], id, meta, claim)
			if err != nil {
				rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("%s: its locations from before a move are not claimed: %v", what, err))
				extra, err = nil, nil
			}
		}
		if err == nil && p.soft != nil {
			claim.Owner.SoftDeleted = true
			for i := range extra {
				extra[i].Owner.SoftDeleted = true
			}
		}
		set := func(extra []store.Claim) error {
			if p.soft != nil {
				return s.store.SetSoftDeletedHold(ctx, *p.soft, claim, extra...)
			}
			return s.store.SetTableHold(ctx, p.cat, p.entry, claim, extra...)
		}
		if err == nil {
			err = set(extra)
			if errors.Is(err, store.ErrLocationTaken) && len(extra) > 0 {
				// An older owner holds some of them: the location and every
				// other one (its snapshots reach them all), those left to
				// their owners reported. Claiming the location alone left
				// the free ones to anyone.
				var free []store.Claim
				var taken []string
				for _, x := range extra {
					if _, cerr := s.store.Conflict(ctx, x.Hold); errors.Is(cerr, store.ErrNotFound) {
						free = append(free, x)
					} else {
						taken = append(taken, fmt.Sprintf("%s: its location from before a move %s is another's: %v", what, x.Hold.URI(), s.ownedBy(ctx, x.Hold)))
					}
				}
				if err = set(free); err == nil {
					rep.Conflicts = append(rep.Conflicts, taken...)
				}
			}
		}
		switch {
		case err == nil && p.soft != nil:
			rep.SoftDeleted++
		case err == nil:
			rep.Tables++
		case errors.Is(err, store.ErrLocationTaken):
			rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("%s owns nothing: %v", what, s.ownedBy(ctx, claim.Hold)))
		default:
			rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("%s owns nothing: %v", what, err))
		}
	}
	token := ""
	for {
		active, next, err := s.store.ActiveJobs(ctx, token, 100)
		if err != nil {
			return rep, err
		}
		for _, a := range active {
			j, err := s.store.GetJob(ctx, a.Catalog, a.ID)
			if err != nil || j.Hold != nil || store.Terminal(j.State) {
				continue
			}
			loc := j.Location
			if loc == "" {
				meta, err := s.ReadMetadata(ctx, j.MetadataLocation)
				if err != nil {
					rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("purge job %s owns nothing: %v", j.ID, err))
					continue
				}
				loc = meta.Location()
			}
			id := Ident{Namespace: j.Namespace, Name: j.Table}
			claim, err := tableClaim(byName[j.Catalog], id, loc)
			if err == nil {
				claim.Owner.JobID = j.ID
				err = s.store.SetJobHold(ctx, j, claim)
			}
			switch {
			case err == nil:
				rep.Jobs++
			case errors.Is(err, store.ErrLocationTaken):
				rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("purge job %s owns nothing (it deletes only unowned files): %v", j.ID, s.ownedBy(ctx, claim.Hold)))
			default:
				rep.Conflicts = append(rep.Conflicts, fmt.Sprintf("purge job %s owns nothing: %v", j.ID, err))
			}
		}
		if next == "" {
			return rep, nil
		}
		token = next
	}
}

// compareTimes orders RFC 3339 timestamps (the store writes them in UTC).
func compareTimes(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
