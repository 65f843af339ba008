package purge

import (
	"context"
	"sync"
	"time"
)

// Pacer paces DeleteObjects calls per prefix with AIMD: slow start (the rate
// doubles per success until the first SlowDown), then additive increase and
// multiplicative decrease. S3 throttles per prefix, so one busy table does
// not slow another.
type Pacer struct {
	mu    sync.Mutex
	state map[string]*pace
	// Start, Min and Max bound the rate in calls per second.
	Start, Min, Max float64
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
