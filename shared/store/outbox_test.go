package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/icehold/icehold/shared/store"
)

// An event exists exactly when the change it reports does: a write that
// loses leaves no event, one that lands leaves its events, and the outbox
// hands them out oldest first until each is deleted. Concurrent writers
// each leave exactly their own events.
func TestOutboxEventsLandWithTheirChange(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"ns"}}); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	ev := func(id string, n int) store.OutboxEvent {
		return store.OutboxEvent{ID: id, Type: "T", Payload: `{"event-id":"` + id + `"}`, Created: base + int64(n)}
	}
	e := store.TableEntry{Namespace: []string{"ns"}, Name: "t", MetadataLocation: "s3://b/1", TableUUID: "u"}
	if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e, Events: []store.OutboxEvent{ev("created", 2)}}}); err != nil {
		t.Fatal(err)
	}
	lost := store.TableEntry{Namespace: []string{"gone"}, Name: "t", MetadataLocation: "s3://b/x", TableUUID: "v"}
	if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: lost, Events: []store.OutboxEvent{ev("lost-create", 0)}}}); err == nil {
		t.Fatal("a create in a missing namespace succeeded")
	}
	next := e
	next.MetadataLocation = "s3://b/2"
	if err := s.CommitTable(ctx, "c", next, "s3://b/1", nil, ev("committed", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.CommitTable(ctx, "c", next, "s3://b/1", nil, ev("lost-commit", 1)); err == nil {
		t.Fatal("a commit against a moved pointer succeeded")
	}

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := store.TableEntry{Namespace: []string{"ns"}, Name: fmt.Sprintf("r%d", i), MetadataLocation: fmt.Sprintf("s3://b/r%d", i), TableUUID: fmt.Sprint(i)}
			if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: w, Events: []store.OutboxEvent{ev(fmt.Sprintf("race-%d", i), 10+i)}}}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()

	pending, err := s.PendingEvents(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range pending {
		ids = append(ids, p.ID)
	}
	if fmt.Sprint(ids) != "[created committed race-0]" {
		t.Errorf("first page of pending events: %v", ids)
	}
	for _, p := range pending[:2] {
		if err := s.DeleteEvent(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.PendingEvents(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 8 || all[0].ID != "race-0" || all[7].ID != "race-7" || all[0].Payload != `{"event-id":"race-0"}` {
		t.Errorf("pending after two deletes: %+v", all)
	}
}
