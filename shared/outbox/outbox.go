// Package outbox makes lifecycle events durable with the state change they
// report: a domain step turns its events into outbox records and hands them
// to the store call that makes the change (one transaction); the relay
// publishes what is pending, in order, and deletes each once published. In
// AWS the relay runs on the table's stream and on the reconcile schedule;
// locally a poller runs it.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/store"
)

// Record is the outbox record of an event; it gets its id and time here.
func Record(e eventbus.Event) store.OutboxEvent {
	if e.ID == "" {
		e.ID = uuid.NewString()
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	payload, _ := json.Marshal(e) // plain fields and a map of JSON values
	return store.OutboxEvent{ID: e.ID, Type: e.Type, Payload: string(payload), Created: e.Time.UnixNano()}
}

// Records is Record of each event, keyed in the order given: the relay
// publishes by key, and one change's events (a drop's
// TablePermanentlyDeleted, then its job's PurgeStarted) must come out as
// listed even when two share a nanosecond.
func Records(events ...eventbus.Event) []store.OutboxEvent {
	out := make([]store.OutboxEvent, len(events))
	for i, e := range events {
		out[i] = Record(e)
		if i > 0 && out[i].Created <= out[i-1].Created {
			out[i].Created = out[i-1].Created + 1
		}
	}
	return out
}

// Relay publishes up to limit pending events, oldest first, deleting each
// once the bus took it. It stops at the first failure so that order holds:
// the next run starts again there (at least once: an event published but
// not yet deleted is published again, with the same id).
func Relay(ctx context.Context, st *store.Store, bus *eventbus.Bus, limit int) (int, error) {
	pending, err := st.PendingEvents(ctx, limit)
	if err != nil {
		return 0, err
	}
	for i, rec := range pending {
		var e eventbus.Event
		if err := json.Unmarshal([]byte(rec.Payload), &e); err != nil {
			// A record no one can decode would block the outbox forever.
			if derr := st.DeleteEvent(ctx, rec); derr != nil {
				return i, derr
			}
			continue
		}
		e.Type = rec.Type
		if err := bus.Publish(ctx, e); err != nil {
			return i, fmt.Errorf("relay event %s: %w", rec.ID, err)
		}
		if err := st.DeleteEvent(ctx, rec); err != nil {
			return i + 1, err
		}
	}
	return len(pending), nil
}

// Report is what a relay run did.
type Report struct {
	Published int `json:"published"`
}

// Drain relays pending events until none is left (or a publish fails).
func Drain(ctx context.Context, st *store.Store, bus *eventbus.Bus) (int, error) {
	const page = 100
	total := 0
	for {
		n, err := Relay(ctx, st, bus, page)
		total += n
		if err != nil || n < page {
			return total, err
		}
	}
}
