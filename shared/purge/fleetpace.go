package purge

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/shared/store"
)

// S3 counts every key of a DeleteObjects call against the write ceiling of
// the key's partitioned prefix: at least 3,500 a second per prefix.
const (
	S3PrefixWrites = 3500
	// DefaultKeyRate is what the shared schedule aims at: 95% of the
	// documented ceiling, headroom for clock skew between invocations and
	// for other writers on the prefix.
	DefaultKeyRate = 0.95 * S3PrefixWrites
)

// PaceBook holds the per-prefix schedules the delete function's concurrent
// invocations share; *store.Store is one (DynamoDB, one record per prefix).
type PaceBook interface {
	ReservePace(ctx context.Context, prefix string, d time.Duration, now time.Time) (store.Pace, error)
	CutPace(ctx context.Context, prefix string, seen store.Pace, rate float64, now time.Time, cooldown time.Duration) (bool, store.Pace, error)
}

// NewSharedPacer returns a pacer whose key deletions are booked in book, at
// keyRate keys per second per prefix (0: DefaultKeyRate).
func NewSharedPacer(book PaceBook, keyRate float64) *Pacer {
	p := NewPacer()
	p.Shared, p.KeyRate = book, keyRate
	return p
}

// KeyPrefix is the S3 prefix a key's deletion counts against, as the pacer
// sees it: the bucket and the key up to its last '/', the object's
// "directory" (a table's partition directory, its metadata directory).
// S3 does not tell a client how it partitioned a bucket; a directory is
// the finest prefix a table's writers spread load over, and where S3's
// partitioning of a table written by partition ends up.
func KeyPrefix(bucket, key string) string {
	return bucket + "/" + key[:strings.LastIndexByte(key, '/')+1]
}

func (p *Pacer) keyRate() float64 {
	if p.KeyRate > 0 {
		return p.KeyRate
	}
	return DefaultKeyRate
}

// rateAt is a prefix's rate at now as a view of its record says: the
// ceiling, or the last cut climbing back linearly.
func (p *Pacer) rateAt(v store.Pace, now time.Time) float64 {
	top := p.keyRate()
	if v.Rate <= 0 {
		return top
	}
	rec := p.Recover
	if rec <= 0 {
		rec = top / 40
	}
	lo := p.KeyMin
	if lo <= 0 {
		lo = top / 100
	}
	return max(lo, min(top, v.Rate+rec*max(now.Sub(v.CutAt).Seconds(), 0)))
}

func (p *Pacer) cooldown() time.Duration {
	if p.Cooldown > 0 {
		return p.Cooldown
	}
	return 2 * time.Second
}

// view returns this process's last view of a prefix's record: every
// booking and cut answers the record as it is now. Before the first, the
// zero view (never cut: the ceiling), so a process's first call books at
// the ceiling even on a prefix cut since; its answer corrects the view for
// the next call, and a cut it then makes starts from what the record says.
func (p *Pacer) view(prefix string) store.Pace {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.views[prefix]
}

func (p *Pacer) setView(prefix string, v store.Pace) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.views == nil {
		p.views = map[string]store.Pace{}
	}
	p.views[prefix] = v
}

func keysPerPrefix(bucket string, ids []s3types.ObjectIdentifier) map[string]int {
	out := map[string]int{}
	for _, id := range ids {
		out[KeyPrefix(bucket, aws.ToString(id.Key))]++
	}
	return out
}

// WaitFor blocks until one DeleteObjects call of ids may go. Without a
// shared book: the scope's own AIMD (Wait). With one: a slot for the call's
// keys on the schedule of every prefix they fall in (booked in parallel;
// the call goes at the latest slot), which already holds the sum of every
// process's calls; the scope's own AIMD is then only the fallback for a
// call whose booking failed (the book unreachable: logged once; S3's
// SlowDown answers, backed off and retried, still bound the rate).
func (p *Pacer) WaitFor(ctx context.Context, scope, bucket string, ids []s3types.ObjectIdentifier) error {
	if p.Shared == nil || len(ids) == 0 {
		return p.Wait(ctx, scope)
	}
	counts := keysPerPrefix(bucket, ids)
	var mu sync.Mutex
	var at time.Time
	failed := false
	var wg sync.WaitGroup
	for prefix, n := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			now := time.Now()
			d := time.Duration(float64(n) / p.rateAt(p.view(prefix), now) * float64(time.Second))
			v, err := p.Shared.ReservePace(ctx, prefix, d, now)
			if err != nil {
				p.bookFailed(ctx, "book", prefix, err)
				mu.Lock()
				failed = true
				mu.Unlock()
				return
			}
			p.setView(prefix, v)
			p.booked.Add(int64(n))
			mu.Lock()
			if slot := v.TAT.Add(-d); slot.After(at) {
				at = slot
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if failed {
		if err := p.Wait(ctx, scope); err != nil {
			return err
		}
	}
	if d := time.Until(at); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// ThrottledFor records a SlowDown on a call of asked keys, refused of which
// were answered SlowDown (all of them for a 503), on the call's attempt-th
// retry: the scope's own AIMD halves (Throttled; with a shared book, the
// fallback's rate). With a shared book, keys
// refused on their first try only go back on the schedule: calls booked
// back to back and sent late together (a stalled process, a slow network)
// overrun S3 for a moment without the rate being wrong, and a retry booked
// at the schedule's end then goes through. Keys refused again (attempt ≥ 1)
// mean the rate is above what S3 admits now: every prefix of those keys is
// cut by the share of its keys refused, by half at most (a fleet sending at
// R where S3 admits C sees (R-C)/R of its keys refused, so the cut lands on
// C; a 503, nothing admitted, halves). One cut per prefix per cooldown
// fleet-wide: the first process to see it cuts, the others find its cut.
func (p *Pacer) ThrottledFor(ctx context.Context, scope, bucket string, asked, refused []s3types.ObjectIdentifier, attempt int) {
	p.Throttled(scope)
	if p.Shared == nil || attempt < 1 {
		return
	}
	all := keysPerPrefix(bucket, asked)
	for prefix, n := range keysPerPrefix(bucket, refused) {
		keep := max(0.5, 1-float64(n)/float64(max(all[prefix], n)))
		v := p.view(prefix)
		for try := 0; try < 2; try++ {
			now := time.Now()
			if !v.CutAt.IsZero() && now.Sub(v.CutAt) < p.cooldown() {
				break // cut recently, by this process or another
			}
			cut, nv, err := p.Shared.CutPace(ctx, prefix, v, p.rateAt(v, now)*keep, now, p.cooldown())
			if err != nil {
				p.bookFailed(ctx, "cut", prefix, err)
				break
			}
			v = nv
			p.setView(prefix, v)
			if cut {
				p.cuts.Add(1)
				break
			}
		}
	}
}

// bookFailed logs the first failure to reach the book (an outage, or a role
// without access to the PACE# records): the process then paces alone.
func (p *Pacer) bookFailed(ctx context.Context, op, prefix string, err error) {
	if ctx.Err() == nil && p.failed.CompareAndSwap(false, true) {
		slog.Warn("pace: shared schedule unavailable; this process paces alone until it answers", "op", op, "prefix", prefix, "error", err)
	}
}

// Cuts is how many fleet-wide rate cuts this process made.
func (p *Pacer) Cuts() int64 { return p.cuts.Load() }

// Booked is how many key deletions this process booked on shared schedules.
func (p *Pacer) Booked() int64 { return p.booked.Load() }
