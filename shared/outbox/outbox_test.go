package outbox_test

import (
	"testing"
	"time"

	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/outbox"
)

// The relay publishes in the records' key order (their creation time), so
// the events of one change must come out in the order the change lists
// them (a drop's TablePermanentlyDeleted before its job's PurgeStarted),
// even when the clock gives two of them the same nanosecond (a coarse
// clock, or times set by the caller).
func TestRecordsKeepTheirOrder(t *testing.T) {
	at := time.Date(2027, 1, 6, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		times []time.Time
	}{
		{"one instant", []time.Time{at, at, at}},
		{"the clock going back", []time.Time{at.Add(time.Second), at, at}},
		{"unset (the wall clock)", []time.Time{{}, {}, {}, {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var evs []eventbus.Event
			for i, ts := range tt.times {
				evs = append(evs, eventbus.Event{Type: []string{"A", "B", "C", "D"}[i], Time: ts})
			}
			recs := outbox.Records(evs...)
			for i := 1; i < len(recs); i++ {
				if recs[i].Created <= recs[i-1].Created {
					t.Errorf("record %d (%s) is created at %d, not after record %d (%s) at %d: the relay may publish them out of order",
						i, recs[i].Type, recs[i].Created, i-1, recs[i-1].Type, recs[i-1].Created)
				}
			}
		})
	}
}
