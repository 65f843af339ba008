package purge

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// Snapshot expiry's side of the pipeline (SPEC §5). The retention sweep
// decides which snapshots go and which files only they referenced; it
// plans a job of kind expire naming those files (PlanExpire), creates it
// in the same transaction as the commit that removes the snapshots, and
// starts it (Started). From there it is a job like an orphans job: its
// batches go through the delete queue (bulk, leased, DLQ'd), each file
// checked against the ownership index first (claimCheck).

// PlanExpire fills in a job of kind expire for a table's files (j names
// the table and its uuid; hold is the table's location claim, nil when it
// owns none: then nothing is deleted) and writes its batches. The job itself is not stored: the commit that expires the
// snapshots creates it (catalog.TableChange.Job). A job with no batch
// (no file is an S3 object) comes back with an empty ID.
func (s *Service) PlanExpire(ctx context.Context, j store.Job, hold *store.Hold, files []store.ListedFile) (store.Job, error) {
	j.ID, j.Kind, j.State, j.Attempts = NewJobID(), store.KindExpire, store.JobPending, 1
	j.Execution, j.Planned, j.GCEnabled = j.ID, true, true
	if hold != nil {
		j.Claim, j.ClaimLocation, j.Scope = hold.ID, hold.URI(), s.deleteScope(ctx, j.Catalog, *hold)
	}
	batches, _ := fileBatches(j.ID, files)
	if len(batches) == 0 {
		return store.Job{}, nil
	}
	j.BatchesTotal = len(batches)
	return j, s.Store.PutBatches(ctx, batches)
}

// DiscardExpire removes the batches of an expire job whose commit was
// refused (it never existed).
func (s *Service) DiscardExpire(ctx context.Context, j store.Job) error {
	if j.ID == "" {
		return nil
	}
	return s.Store.DeleteBatches(ctx, j.ID, j.BatchesTotal)
}

// deleteScope is where a job may delete: the table's claimed location, or
// the catalog's warehouse when purge.delete-scope=warehouse and the
// location lies in it (as the purge's plan decides) and the hold is not a
// registered table's (metadata anyone could write).
func (s *Service) deleteScope(ctx context.Context, cat string, h store.Hold) string {
	if h.Registered {
		return h.URI() + "/"
	}
	if c, err := s.Catalog.GetCatalog(ctx, cat); err == nil && c.Properties[catalog.PropDeleteScope] == "warehouse" {
		if w, err := objects.Prefix(c.Warehouse); err == nil && w.Contains(objects.Location{Bucket: h.Bucket, Key: h.Prefix}) {
			return w.URI() + "/"
		}
	}
	return h.URI() + "/"
}

// claimCheck decides, per file of an expire batch, whether it may go: the
// claim that covers it (the ownership index, read once per directory) is
// still the table's claim the job was made under — not another table's,
// not a catalog's, not a location released since. Under the table's own
// location nothing else lets a file go: a released claim leaves the files
// to nobody (a table dropped without purge keeps its files), even where the
// warehouse covers them now. With the warehouse scope, a file outside the
// table's location goes only where the purge's guard would let it (in the
// scope, owned by no table).
type claimCheck struct {
	st     *store.Store
	claim  string
	claims []string          // the table's other claims (old locations)
	home   *objects.Location // the claim's location; nil: unknown (no widening)
	wide   *guard
	dirs   map[string]bool
}

func newClaimCheck(st *store.Store, j store.Job) *claimCheck {
	c := &claimCheck{st: st, claim: j.Claim, claims: j.Claims, dirs: map[string]bool{}}
	if l, err := objects.Prefix(j.ClaimLocation); err == nil {
		c.home = &l
	}
	j.Hold, j.Extra = nil, nil // the job holds no claim: the guard must look every key up
	c.wide = newGuard(st, j)
	return c
}

func (c *claimCheck) owned(ctx context.Context, path string) (objects.Location, bool, error) {
	obj, ok := candidate(path)
	if !ok || c.claim == "" {
		return obj, false, nil
	}
	dir := obj.Bucket + "/" + obj.Key[:max(strings.LastIndexByte(obj.Key, '/'), 0)]
	if ok, seen := c.dirs[dir]; seen {
		return obj, ok, nil
	}
	owner, err := c.st.OwnerAt(ctx, obj.Bucket, obj.Key)
	unowned := errors.Is(err, store.ErrNotFound)
	if err != nil && !unowned {
		return obj, false, err
	}
	ok = false
	switch {
	case !unowned && (owner.ID == c.claim || slices.Contains(c.claims, owner.ID)):
		ok = true
	case c.home == nil || c.home.Contains(obj):
		// The table's own location, no longer under its claim: skipped.
	case unowned || owner.Kind == store.OwnerWarehouse:
		_, ok, err = c.wide.allows(ctx, path)
		if err != nil {
			return obj, false, err
		}
	}
	c.dirs[dir] = ok
	return obj, ok, nil
}
