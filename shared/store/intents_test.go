package store_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/icehold/icehold/shared/store"
)

// An intent is retired by the write that makes its file current, and only
// then: a create that loses (the namespace is gone) and a commit that loses
// (another commit moved the pointer) leave theirs; StaleIntents returns
// exactly the intents older than its time, bounded by its limit.
func TestIntentsOutliveOnlyLostWrites(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"ns"}}); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	intent := func(id string, minute int) *store.Intent {
		in := &store.Intent{ID: id, Catalog: "c", Files: []string{"s3://b/" + id}, Created: base.Add(time.Duration(minute) * time.Minute).UnixNano()}
		if err := s.PutIntent(ctx, *in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	e := store.TableEntry{Namespace: []string{"ns"}, Name: "t", MetadataLocation: "s3://b/created", TableUUID: "u"}
	if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e, Intent: intent("created", 0)}}); err != nil {
		t.Fatal(err)
	}
	lostCreate := store.TableEntry{Namespace: []string{"gone"}, Name: "t", MetadataLocation: "s3://b/lost-create", TableUUID: "v"}
	if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: lostCreate, Intent: intent("lost-create", 1)}}); err == nil {
		t.Fatal("a create in a missing namespace succeeded")
	}
	next := e
	next.MetadataLocation = "s3://b/committed"
	if err := s.CommitTable(ctx, "c", next, "s3://b/created", intent("committed", 2)); err != nil {
		t.Fatal(err)
	}
	stale := next
	stale.MetadataLocation = "s3://b/lost-commit"
	if err := s.CommitTable(ctx, "c", stale, "s3://b/created", intent("lost-commit", 3)); err == nil {
		t.Fatal("a commit from a moved pointer succeeded")
	}
	for i := range 20 {
		intent(fmt.Sprintf("old-%02d", i), 10+i)
	}

	ids := func(in []store.Intent) []string {
		var out []string
		for _, i := range in {
			out = append(out, i.ID)
		}
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name   string
		before time.Time
		limit  int
		want   []string
	}{
		{"nothing before the first", base, 100, nil},
		{"the two lost writes", base.Add(10 * time.Minute), 100, []string{"lost-commit", "lost-create"}},
		{"bounded by the limit", base.Add(time.Hour), 7, nil},
		{"all", base.Add(time.Hour), 100, append([]string{"lost-commit", "lost-create"}, func() []string {
			var o []string
			for i := range 20 {
				o = append(o, fmt.Sprintf("old-%02d", i))
			}
			return o
		}()...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.StaleIntents(ctx, tc.before, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "bounded by the limit" {
				if len(got) != tc.limit {
					t.Errorf("%d intents, want the limit %d", len(got), tc.limit)
				}
				return
			}
			if !slices.Equal(ids(got), tc.want) {
				t.Errorf("stale intents %v, want %v", ids(got), tc.want)
			}
		})
	}
}
