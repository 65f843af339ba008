package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

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
	why := ""
	if owner.JobID != "" {
		if j, err := s.store.GetJob(ctx, owner.Catalog, owner.JobID); err == nil && j.State == store.JobFailed {
			why = fmt.Sprintf("; job %s FAILED and keeps the location until an operator retries or abandons it (icehold jobs retry|abandon %s)", j.ID, j.ID)
		}
	}
	return fmt.Errorf("location %s overlaps %s%s: %w", h.URI(), owner, why, ErrLocationOwned)
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

// holdPlan is what a table owns after its metadata changes: the hold of its
// location (equal to it, or an older hold containing it), the extra holds
// it keeps, a new claim to take and the holds to let go.
type holdPlan struct {
	hold    *store.Hold
	extra   []store.Hold
	claim   *store.Claim
	release []store.Hold
}

// planHolds decides a table's holds for metadata meta at location loc,
// from the holds it has (SPEC §2: set-location keeps the old prefix owned
// for as long as a retained snapshot reaches a file under it). A hold
// equal to or containing loc stays the location's hold (moving wh/t to
// wh/t/sub needs no claim); otherwise loc is claimed, and holds inside it
// are released (it covers them). Every other hold is kept while meta's
// snapshots reach a file under it outside loc, and released when they
// reach none; on a move (shrink), a covering hold that no longer reaches
// outside loc shrinks to loc. registered marks a new claim (see
// store.Hold.Registered).
func (s *Service) planHolds(ctx context.Context, c store.Catalog, id Ident, holds []store.Hold, loc string, meta table.Metadata, shrink, registered bool) (holdPlan, error) {
	l, err := tablePrefix(loc)
	if err != nil {
		return holdPlan{}, err
	}
	var p holdPlan
	var others []store.Hold
	for _, h := range holds {
		hl := objects.Location{Bucket: h.Bucket, Key: h.Prefix}
		switch {
		case p.hold == nil && (hl == l || hl.Contains(l)):
			p.hold = &h
		case l.Contains(hl):
			p.release = append(p.release, h) // the new claim covers it
		default:
			others = append(others, h)
		}
	}
	candidates := others
	covering := shrink && p.hold != nil && p.hold.Prefix != l.Key
	if covering {
		candidates = append(candidates, *p.hold)
	}
	reached := s.reached(ctx, meta, candidates, l)
	for _, h := range others {
		if reached[h.ID] {
			p.extra = append(p.extra, h)
		} else {
			p.release = append(p.release, h)
		}
	}
	if covering && !reached[p.hold.ID] {
		p.release, p.hold = append(p.release, *p.hold), nil
	}
	if p.hold == nil {
		cl, err := tableClaim(c, id, loc)
		if err != nil {
			return holdPlan{}, err
		}
		cl.Hold.Registered = registered
		// With releases in the same change only the transaction can tell
		// (a released hold above or below loc is no conflict).
		if len(p.release) == 0 {
			if err := s.checkFree(ctx, cl.Hold); err != nil {
				return holdPlan{}, err
			}
		}
		p.claim, p.hold = &cl, &cl.Hold
	}
	return p, nil
}

// Bounds on what deciding reachability reads: past them every hold counts
// as reached (kept: owning longer deletes nothing).
const (
	maxReachManifests = 2000
	maxReachBytes     = 64 << 20
	reachParallel     = 16
)

// reached tells which holds meta's snapshots reach a file under (outside
// except): manifest lists, statistics files, manifests and the data and
// delete files of their entries of any status (what a purge would
// delete). The metadata log does not count: it names no snapshot's files.
// Any read error or bound keeps every hold.
func (s *Service) reached(ctx context.Context, meta table.Metadata, holds []store.Hold, except objects.Location) map[string]bool {
	out := map[string]bool{}
	if len(holds) == 0 {
		return out
	}
	err := s.eachReached(ctx, meta, func(path string) bool {
		if obj, err := objects.Parse(path); err == nil && !except.Contains(obj) {
			for _, h := range holds {
				if (objects.Location{Bucket: h.Bucket, Key: h.Prefix}).Contains(obj) {
					out[h.ID] = true
				}
			}
		}
		return len(out) == len(holds)
	})
	if err != nil {
		for _, h := range holds {
			out[h.ID] = true
		}
	}
	return out
}

// errBounds: a table's snapshots reach more manifests or bytes than
// deciding reachability reads.
var errBounds = errors.New("more manifests than reachability reads")

// eachReached calls visit (one call at a time) with every file meta's
// snapshots reach: manifest lists, statistics files, manifests and the
// data and delete files of their entries of any status, until visit
// returns true. A read error, or more than the bounds, is an error.
func (s *Service) eachReached(ctx context.Context, meta table.Metadata, visit func(path string) (stop bool)) error {
	var mu sync.Mutex
	stopped := false
	mark := func(path string) bool {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			stopped = visit(path)
		}
		return stopped
	}
	var lists []string
	for _, sn := range meta.Snapshots() {
		if sn.ManifestList != "" {
			mark(sn.ManifestList)
			lists = append(lists, sn.ManifestList)
		}
	}
	for st := range meta.Statistics() {
		mark(st.StatisticsPath)
	}
	for st := range meta.PartitionStatistics() {
		mark(st.StatisticsPath)
	}
	if stopped || len(lists) == 0 {
		return nil
	}
	var read atomic.Int64
	get := func(ctx context.Context, path string) ([]byte, error) {
		b, err := s.objects.Get(ctx, path, maxReachBytes)
		if err == nil && read.Add(int64(len(b))) > maxReachBytes {
			err = errBounds
		}
		return b, err
	}
	errDone := errors.New("visit stopped")
	manifests := map[string]iceberg.ManifestFile{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reachParallel)
	for _, list := range lists {
		g.Go(func() error {
			raw, err := get(gctx, list)
			if err != nil {
				return err
			}
			mfs, err := iceberg.ReadManifestList(bytes.NewReader(raw))
			if err != nil {
				return err
			}
			mu.Lock()
			for _, m := range mfs {
				manifests[m.FilePath()] = m
			}
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if len(manifests) > maxReachManifests {
		return errBounds
	}
	for p := range manifests {
		if mark(p) {
			return nil
		}
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(reachParallel)
	for _, m := range manifests {
		g.Go(func() error {
			raw, err := get(gctx, m.FilePath())
			if err != nil {
				return err
			}
			entries, err := iceberg.ReadManifest(m, bytes.NewReader(raw), false)
			if err != nil {
				return err
			}
			for _, e := range entries {
				if mark(e.DataFile().FilePath()) {
					return errDone
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil && !errors.Is(err, errDone) {
		return err
	}
	return nil
}

// formerLocations are the table locations, other than loc, that meta's
// snapshots reach files under: a table moved (set-location) before the
// ownership index keeps data there. A file's location is what precedes its
// last "/data/" or "/metadata/" (Iceberg's layout), else its folder;
// locations inside another are left out.
func (s *Service) formerLocations(ctx context.Context, meta table.Metadata, loc objects.Location) ([]objects.Location, error) {
	found := map[objects.Location]bool{}
	err := s.eachReached(ctx, meta, func(path string) bool {
		obj, err := objects.Parse(path)
		if err != nil || loc.Contains(obj) || objects.CleanKey(obj.Key) != nil {
			return false // a path with a dot segment names no location
		}
		k := obj.Key
		switch {
		case strings.LastIndex(k, "/metadata/") > 0:
			k = k[:strings.LastIndex(k, "/metadata/")]
		case strings.LastIndex(k, "/data/") > 0:
			k = k[:strings.LastIndex(k, "/data/")]
		case strings.LastIndex(k, "/") > 0:
			k = k[:strings.LastIndex(k, "/")]
		}
		found[objects.Location{Bucket: obj.Bucket, Key: k}] = true
		return false
	})
	if err != nil {
		return nil, err
	}
	var out []objects.Location
	for l := range found {
		inside := false
		for o := range found {
			if o != l && o.Contains(l) {
				inside = true
			}
		}
		if !inside {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b objects.Location) int { return strings.Compare(a.URI(), b.URI()) })
	return out, nil
}
