package softdelete

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/icehold/icehold/shared/store"
)

// ExpiryReport says what one sweep did.
type ExpiryReport struct {
	Expired int `json:"expired"` // records permanently deleted
	Purged  int `json:"purged"`  // of those, handed to the purge pipeline
	Skipped int `json:"skipped"` // taken by another sweep, undropped or held meanwhile
	// Stale: index entries that named no due record (the record gone,
	// held, or of another purge time), removed. They do not count
	// towards the run's bound: however many there are, due records behind
	// them are reached.
	Stale int `json:"stale"`
	// Held: due records a namespace's or the catalog's legal hold covers,
	// left soft-deleted (their index entries stay: the first run after the
	// hold is lifted ends them). They do not count towards the bound
	// either: however many a held scope has, due records behind them are
	// reached (each scope's hold is read once a run).
	Held int `json:"held"`
	// More: the run stopped at its bound with records still due.
	More bool `json:"more"`
}

// DefaultSweepLimit bounds the records one sweep ends.
const DefaultSweepLimit = 500

// Expire is the hold-expiry sweep: it pages through the records whose
// purge time has passed (one query on the expiry index) and permanently
// deletes each with a guarded transaction (so two overlapping sweeps end a
// record once), handing its files to the purge pipeline where the catalog
// purges on expiry. An index entry that names no due record (its record
// gone, held, or of another generation's purge time) is removed, guarded
// by what was read, and does not count towards the bound. Bounded: it stops
// after limit records or when ctx's deadline is near, and leaves the rest to
// the next run. A record a namespace's or the catalog's legal hold covers
// is skipped and stays due (its own hold is the guarded transaction's).
func (s *Service) Expire(ctx context.Context, limit int) (ExpiryReport, error) {
	var rep ExpiryReport
	if limit <= 0 {
		limit = DefaultSweepLimit
	}
	now := s.now()
	holds := s.Catalog.Holds()
	start := ""
	for {
		page, next, err := s.store().ExpiredBefore(ctx, now, start, 100)
		if err != nil {
			return rep, err
		}
		for _, due := range page {
			if rep.Expired+rep.Skipped >= limit || nearDeadline(ctx) {
				rep.More = true
				return rep, nil
			}
			r, err := s.store().SoftDeletedRecord(ctx, due.Catalog, due.TableUUID, due.Generation)
			switch {
			case errors.Is(err, store.ErrNotFound):
				s.removeStale(ctx, due, nil, &rep)
				continue
			case err != nil:
				return rep, err
			case !due.Of(r):
				s.removeStale(ctx, due, &r, &rep)
				continue
			}
			if held, err := holds.Held(ctx, r.Catalog, r.Entry.Namespace, false); held {
				if err != nil {
					slog.Warn("expire soft-deleted table: read its legal holds", "table", r.Entry.Name, "uuid", r.Entry.TableUUID, "error", err)
				}
				rep.Held++
				continue
			}
			_, err = s.permanentlyDelete(ctx, r, r.PurgeOnExpiry)
			switch {
			case errors.Is(err, store.ErrConditionFailed), errors.Is(err, store.ErrLegalHold):
				rep.Skipped++
			case err != nil:
				slog.Warn("expire soft-deleted table", "table", r.Entry.Name, "uuid", r.Entry.TableUUID, "error", err)
				rep.Skipped++
			default:
				rep.Expired++
				if r.PurgeOnExpiry {
					rep.Purged++
				}
			}
		}
		if next == "" {
			return rep, nil
		}
		start = next
	}
}

// removeStale removes an index entry that names no due record (r: the
// record it names, nil if none), guarded by that read; one that changed
// meanwhile is left to the next run.
func (s *Service) removeStale(ctx context.Context, due store.Expired, r *store.SoftDeleted, rep *ExpiryReport) {
	err := s.store().RemoveStale(ctx, due, r)
	switch {
	case err == nil:
		rep.Stale++
	case errors.Is(err, store.ErrConditionFailed):
		rep.Skipped++
	default:
		slog.Warn("remove a stale expiry entry", "entry", due.Key, "error", err)
		rep.Skipped++
	}
}

// nearDeadline: less than 10 s (or a tenth of the run) left before ctx's
// deadline (the function's timeout).
func nearDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	return time.Until(dl) < 10*time.Second
}
