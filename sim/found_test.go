package sim

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"
)

// Regression tests of defects the simulation found beyond issue 18's list,
// each the shortest history that shows it.

// newFoundSim starts a world for one regression test: the simulation's
// composition, its principals and namespaces a and b.
func newFoundSim(t *testing.T) *Sim {
	t.Helper()
	s := &Sim{
		t: t, ctx: context.Background(), seed: 0, rng: rand.New(rand.NewPCG(0, 0)),
		w:     &World{dir: filepath.Join(t.TempDir(), "state"), clock: &Clock{t: time.Now().UTC().Truncate(time.Second)}},
		reach: &reacher{cache: map[string]*reach{}}, actors: 1, without: map[string]bool{}, skip: map[string]bool{},
	}
	t.Cleanup(s.w.close)
	if err := s.w.start(s.ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.w.setup(s.ctx); err != nil {
		t.Fatal(err)
	}
	s.m = newModel(s.w.legalPriv)
	for _, ns := range namespaces {
		if o := s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces", map[string]any{"namespace": []string{ns}}); o.Status != 200 {
			t.Fatal(o)
		}
	}
	return s
}

// mustStatus sends a request and requires the status.
func (s *Sim) mustStatus(want int, principal, method, path string, body any) Outcome {
	s.t.Helper()
	o := s.w.call(s.ctx, principal, method, path, body)
	if o.Status != want {
		s.t.Fatalf("%s %s as %s: %s, want %d", method, path, principal, o, want)
	}
	return o
}

// A legal hold set on a soft-deleted record must survive its undrop (only
// TABLE_LEGAL_HOLD clears a legal hold, SPEC §2, §4): the undrop is refused,
// or the undropped table is still held. Found by the simulation (seed 2, 47
// steps), where the writer's drop with purge of the undropped table was
// accepted and its job deleted every object.
func TestUndropKeepsTheRecordsLegalHold(t *testing.T) {
	s := newFoundSim(t)
	o := s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/a/tables",
		map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON)})
	var created createResult
	if err := json.Unmarshal(o.Body, &created); err != nil {
		t.Fatal(err)
	}
	if res := s.appendRows(admin, "a", "t", map[int64]string{1: s.day(), 2: s.day()}); res.out.Status != 200 {
		t.Fatalf("append: %s", res.out)
	}
	s.mustStatus(204, admin, "DELETE", tablePath("a", "t"), nil)
	s.mustStatus(200, admin, "POST", "/lifecycle/v1/catalogs/"+catalogName+"/soft-deleted-tables/"+created.Metadata.UUID+"/legal-hold", map[string]any{"enabled": true})
	if o := s.w.call(s.ctx, writer, "POST", lifecyclePath("a", "t")+"/undrop", map[string]any{}); o.Status == 409 {
		return // refused: a writer cannot lift the hold by undropping
	} else if o.Status != 200 {
		t.Fatalf("undrop: %s", o)
	}
	before, err := s.w.objects(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if o := s.w.call(s.ctx, writer, "DELETE", tablePath("a", "t")+"?purgeRequested=true", nil); o.Status != 409 {
		t.Errorf("the writer's drop with purge of a table undropped from a legal-held record: %s, want 409 (legal hold)", o)
	}
	if err := s.drain(); err != nil {
		t.Fatal(err)
	}
	after, err := s.w.objects(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) < len(before) {
		t.Errorf("%d of the legal-held table's %d objects were deleted", len(before)-len(after), len(before))
	}
}

// A rename of a table to its own identifier is a 409 (the name is taken,
// as Iceberg's catalogs answer), not a 500: found by the simulation (seed
// 4, 8 steps), where DynamoDB refused a transaction with two operations on
// the entry's item.
func TestRenameToItsOwnNameIsAConflict(t *testing.T) {
	s := newFoundSim(t)
	s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/a/tables",
		map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON)})
	o := s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/tables/rename", map[string]any{
		"source":      map[string]any{"namespace": []string{"a"}, "name": "t"},
		"destination": map[string]any{"namespace": []string{"a"}, "name": "t"},
	})
	if o.Status != 409 {
		t.Errorf("rename a.t to a.t: %s, want 409", o)
	}
	s.mustStatus(200, admin, "GET", tablePath("a", "t"), nil)
}

// A commit that changes nothing (a ref set again to the snapshot it points
// at) leaves every earlier metadata file reachable: found by the
// simulation (seed 3, 80 steps), where the file before such a commit was in
// no table's metadata log, so no purge would ever delete it.
func TestNoOpCommitKeepsTheMetadataLog(t *testing.T) {
	s := newFoundSim(t)
	s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/a/tables",
		map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON)})
	res := s.appendRows(admin, "a", "t", map[int64]string{1: s.day()})
	if res.out.Status != 200 {
		t.Fatalf("append: %s", res.out)
	}
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, res.meta)
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-snapshot-ref", "ref-name": "keep", "type": "branch", "snapshot-id": r.current}}}
	var metas []string
	for range 3 {
		var c createResult
		if err := json.Unmarshal(s.mustStatus(200, admin, "POST", tablePath("a", "t"), ref).Body, &c); err != nil {
			t.Fatal(err)
		}
		metas = append(metas, c.MetadataLocation)
	}
	last, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, metas[len(metas)-1])
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range append([]string{res.meta}, metas...) {
		if k, _ := keyOf(m); !last.keys[k] {
			t.Errorf("%s is in neither the current metadata file nor its log", m)
		}
	}
}
