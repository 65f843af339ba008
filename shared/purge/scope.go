package purge

import (
	"context"
	"errors"
	"strings"

	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// guard decides which reachable objects a job may delete: only what its
// table owns (SPEC §2, §3). Objects under any of the job's claims (the
// table's location and the old locations its snapshots reach) are its own.
// With the catalog's purge.delete-scope=warehouse the scope widens
// to the warehouse, but an object there is deleted only when no other table
// owns a prefix above it (the ownership index, read per directory). A job
// without a claim (one that predates the index) is checked that way too.
type guard struct {
	store   *store.Store
	catalog string
	scope   objects.Location // "" bucket: nothing is in scope
	own     []objects.Location
	dirs    map[string]bool // directory → deletable, for keys outside own
}

func newGuard(st *store.Store, j store.Job) *guard {
	g := &guard{store: st, catalog: j.Catalog, dirs: map[string]bool{}}
	if j.Scope != "" {
		if l, err := objects.Prefix(j.Scope); err == nil {
			g.scope = l
		}
	}
	for _, h := range j.Holds() {
		g.own = append(g.own, objects.Location{Bucket: h.Bucket, Key: h.Prefix})
	}
	return g
}

// bucket is the one bucket the job deletes in.
func (g *guard) bucket() string { return g.scope.Bucket }

// candidate parses a path some job might delete: an S3 object whose key is
// in its clean form (objects.CleanKey). Every check (purge, expire,
// orphans) starts here, so no job ever deletes a key with an empty, "." or
// ".." segment: whatever owns the prefix its text starts with, a resolving
// reader may find another table's file there (SPEC §2, key forms).
func candidate(path string) (objects.Location, bool) {
	obj, err := objects.Parse(path)
	return obj, err == nil && obj.Key != "" && objects.CleanKey(obj.Key) == nil
}

// allows parses a reachable path and says whether the job may delete it.
func (g *guard) allows(ctx context.Context, path string) (objects.Location, bool, error) {
	obj, ok := candidate(path)
	if !ok || g.scope.Bucket == "" {
		return obj, false, nil
	}
	for _, o := range g.own {
		if o.Contains(obj) {
			return obj, true, nil
		}
	}
	if !g.scope.Contains(obj) {
		return obj, false, nil
	}
	dir := obj.Key[:max(strings.LastIndexByte(obj.Key, '/'), 0)]
	if ok, seen := g.dirs[dir]; seen {
		return obj, ok, nil
	}
	owner, err := g.store.OwnerAt(ctx, obj.Bucket, obj.Key)
	ok = false
	switch {
	case errors.Is(err, store.ErrNotFound):
		ok = true // nobody owns it: inside the widened scope, it is the job's to delete
	case err != nil:
		return obj, false, err
	default:
		ok = owner.Kind == store.OwnerWarehouse && owner.Catalog == g.catalog && owner.JobID == ""
	}
	g.dirs[dir] = ok
	return obj, ok, nil
}
