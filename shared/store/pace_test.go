package store_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"
)

// Concurrent bookings on one prefix never overlap: each gets its own slot of
// the shared schedule, back to back from now.
func TestReservePaceBooksDisjointSlots(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	const n, d = 20, 10 * time.Millisecond
	starts := make([]time.Time, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.ReservePace(ctx, "b/t/data/p=1/", d, now)
			starts[i], errs[i] = p.TAT.Add(-d), err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	for i, st := range starts {
		if want := now.Add(time.Duration(i) * d); st.Sub(want).Abs() > time.Microsecond {
			t.Fatalf("slot %d starts at +%v, want +%v", i, st.Sub(now), want.Sub(now))
		}
	}
	// Another prefix has its own schedule; an idle one restarts at now.
	if p, err := s.ReservePace(ctx, "b/t/data/p=2/", d, now); err != nil || p.TAT.Sub(now.Add(d)).Abs() > time.Microsecond {
		t.Errorf("other prefix: %+v %v", p, err)
	}
	later := now.Add(time.Hour)
	if p, err := s.ReservePace(ctx, "b/t/data/p=1/", d, later); err != nil || p.TAT.Sub(later.Add(d)).Abs() > time.Microsecond {
		t.Errorf("idle prefix: %+v %v", p, err)
	}
}

// One cut per cooldown, whoever sees the SlowDown: the second process's cut
// finds the first one's and leaves it.
func TestCutPaceOncePerCooldown(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	seen, err := s.GetPace(ctx, "b/x/")
	if err != nil || !seen.CutAt.IsZero() || seen.Rate != 0 {
		t.Fatalf("fresh prefix: %+v %v", seen, err)
	}
	cut, p, err := s.CutPace(ctx, "b/x/", seen, 1750, now, 2*time.Second)
	if err != nil || !cut || p.Rate != 1750 || !p.CutAt.Equal(now.Truncate(time.Microsecond)) {
		t.Fatalf("first cut: %v %+v %v", cut, p, err)
	}
	// A second process with the old view: no cut, and it learns the new rate.
	cut, p, err = s.CutPace(ctx, "b/x/", seen, 1750, now.Add(time.Millisecond), 2*time.Second)
	if err != nil || cut || p.Rate != 1750 {
		t.Fatalf("second cut with a stale view: %v %+v %v", cut, p, err)
	}
	// Within the cooldown, even with the current view: no cut.
	cut, _, err = s.CutPace(ctx, "b/x/", p, 875, now.Add(time.Second), 2*time.Second)
	if err != nil || cut {
		t.Fatalf("cut within the cooldown: %v %v", cut, err)
	}
	cut, p, err = s.CutPace(ctx, "b/x/", p, 875, now.Add(3*time.Second), 2*time.Second)
	if err != nil || !cut || p.Rate != 875 {
		t.Fatalf("cut after the cooldown: %v %+v %v", cut, p, err)
	}
	// A booking keeps the rate.
	if b, err := s.ReservePace(ctx, "b/x/", time.Millisecond, now); err != nil || b.Rate != 875 {
		t.Errorf("booking after a cut: %+v %v", b, err)
	}
}
