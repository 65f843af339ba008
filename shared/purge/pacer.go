package purge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/icehold/icehold/shared/store"
)

// Pacer paces DeleteObjects calls. On its own it is one process's AIMD per
// scope (a table's location): slow start (the rate doubles per success until
// the first SlowDown), then additive increase and multiplicative decrease,
// in calls per second. With Shared set it also books every call's key
// deletions on the schedule of each S3 prefix the keys fall in, a schedule
// all processes share (fleetpace.go): S3's ceiling counts keys per prefix,
// summed over every caller, which no process can see alone.
type Pacer struct {
	mu    sync.Mutex
	state map[string]*pace
	// Start, Min and Max bound the rate in calls per second.
	Start, Min, Max float64

	// Shared, when set, paces key deletions per prefix across processes.
	Shared PaceBook
	// KeyRate is the per-prefix ceiling the shared schedule aims at, in key
	// deletions per second (0: DefaultKeyRate); KeyMin the floor of its
	// cuts (0: KeyRate/100).
	KeyRate, KeyMin float64
	// Recover is how fast a cut rate climbs back, in keys/s per second
	// (0: KeyRate/40: from half to full in twenty seconds).
	Recover float64
	// Cooldown: one cut per prefix per Cooldown, fleet-wide (0: 2 s).
	Cooldown time.Duration
	views    map[string]store.Pace // this process's last view of each prefix's record
	cuts     atomic.Int64
	booked   atomic.Int64
	failed   atomic.Bool // a book failure was logged
}

type pace struct {
	rate      float64
	slowStart bool
	next      time.Time
}

// NewPacer returns a pacer with S3's documented per-prefix DELETE ceiling.
func NewPacer() *Pacer {
	return &Pacer{state: map[string]*pace{}, Start: 50, Min: 1, Max: 3500}
}

func (p *Pacer) get(prefix string) *pace {
	st, ok := p.state[prefix]
	if !ok {
		st = &pace{rate: p.Start, slowStart: true}
		p.state[prefix] = st
	}
	return st
}

// Wait blocks until the prefix may take another call.
func (p *Pacer) Wait(ctx context.Context, prefix string) error {
	p.mu.Lock()
	st := p.get(prefix)
	now := time.Now()
	at := st.next
	if at.Before(now) {
		at = now
	}
	st.next = at.Add(time.Duration(float64(time.Second) / st.rate))
	p.mu.Unlock()
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

// Success raises the prefix's rate.
func (p *Pacer) Success(prefix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.get(prefix)
	if st.slowStart {
		st.rate *= 2
	} else {
		st.rate++
	}
	st.rate = min(st.rate, p.Max)
}

// Throttled halves the prefix's rate and ends its slow start.
func (p *Pacer) Throttled(prefix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.get(prefix)
	st.slowStart = false
	st.rate = max(st.rate/2, p.Min)
}

// Rate is the prefix's current rate (calls per second).
func (p *Pacer) Rate(prefix string) float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.get(prefix).rate
}
