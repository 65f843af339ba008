package sim

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/icehold/icehold/shared/purge"
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
	for _, ns := range []string{"a", "b"} {
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

// A purge counts each object it deletes once: after snapshot expiry its
// counters (files-deleted and files-unreferenced) are the objects that were
// under the table's prefix. Found by the simulation (seed 9, 120 steps): a
// purge after a retention sweep's expiry counted 26 objects for 17.
func TestPurgeAfterExpiryCountsEachObjectOnce(t *testing.T) {
	s := newFoundSim(t)
	s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/a/tables",
		map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON),
			"properties": map[string]string{"format-version": "2", "write.delete.mode": "merge-on-read"}})
	now := s.w.clock.Now()
	id := int64(0)
	for i := range 5 {
		rows := map[int64]string{}
		for range 3 {
			id++
			rows[id] = now.AddDate(0, 0, -i*3-int(id%2)).Format("2006-01-02")
		}
		if res := s.appendRows(admin, "a", "t", rows); res.out.Status != 200 {
			t.Fatalf("append: %s", res.out)
		}
		if i == 2 {
			if res := s.deleteRows(admin, "a", "t", map[int64]string{1: rows[1]}); res.out.Status != 200 {
				t.Fatalf("delete rows: %s", res.out)
			}
		}
	}
	s.mustStatus(200, admin, "PUT", lifecyclePath("a", "t")+"/partition-retention", map[string]any{"field": "d", "keep": "P5D"})
	s.w.clock.Advance(6 * 24 * time.Hour)
	rep, err := s.w.srv.Partitions.SweepRetention(s.ctx, s.w.clock.Now(), 0)
	if err != nil || rep.SnapshotsExpired == 0 {
		t.Fatalf("retention sweep: %+v %v", rep, err)
	}
	if err := s.drain(); err != nil {
		t.Fatal(err)
	}
	var res createResult
	if err := json.Unmarshal(s.mustStatus(200, admin, "GET", tablePath("a", "t"), nil).Body, &res); err != nil {
		t.Fatal(err)
	}
	prefix, _ := keyOf(res.Metadata.Location)
	purgeCountsEachObjectOnce(t, s, prefix)
}

// A table registered from metadata that borrows another table's manifests
// can still be purged once the lender is gone: its purge ends SUCCEEDED
// with nothing left under its own location. Found by the simulation (seeds
// 6, 8 and 11, 120 steps): the borrower's purge ended FAILED (its plan read
// a lender's manifest list that the lender's purge had deleted) or waited
// DEAD_LETTERED forever (a batch read a deleted manifest), and its partition
// drop answered 500.
func TestBorrowerPurgesAfterItsLender(t *testing.T) {
	s := newFoundSim(t)
	loc := warehouse + "/F/borrower"
	s.borrowerOfAPurgedLender(loc, s.day())
	o := s.mustStatus(204, admin, "DELETE", tablePath("b", "borrower")+"?purgeRequested=true", nil)
	deadline := time.Now().Add(time.Minute)
	var j jobView
	var err error
	for {
		if j, err = s.job(o.Header.Get("Icehold-Purge-Job")); err != nil {
			t.Fatal(err)
		}
		if j.State == "SUCCEEDED" || j.State == "FAILED" || time.Now().After(deadline) {
			break
		}
		_, _ = s.w.srv.Purge.Reconcile(s.ctx)
		time.Sleep(200 * time.Millisecond)
	}
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	prefix, _ := keyOf(loc)
	for k := range objs {
		if strings.HasPrefix(k, prefix+"/") {
			left = append(left, k)
		}
	}
	if j.State != "SUCCEEDED" || len(left) > 0 {
		t.Errorf("the borrower's purge: %s (%v), %d objects left under its location %v", j.State, j.Raw["last-error"], len(left), left)
	}
}

// A registered copy whose lender was purged reaches manifests that are
// gone: every request on it gets an answer that says so, never a 5xx, and
// changes nothing; its drop with purge still ends (above). Found by the
// simulation, which tolerated a 500 to a partition drop on such a copy.
func TestRequestsOnABorrowerWhoseLenderIsGone(t *testing.T) {
	s := newFoundSim(t)
	day := s.day()
	s.borrowerOfAPurgedLender(warehouse+"/F/borrower", day)
	before := s.current("b", "borrower")
	requests := []struct {
		name, method, path string
		body               any
	}{
		{"partition drop", "POST", lifecyclePath("b", "borrower") + "/partitions/drop", map[string]any{"partitions": []any{map[string]any{"d": day}}}},
		{"partition drop, no such day", "POST", lifecyclePath("b", "borrower") + "/partitions/drop", map[string]any{"partitions": []any{map[string]any{"d": "2001-01-01"}}}},
		{"load", "GET", tablePath("b", "borrower"), nil},
	}
	for _, r := range requests {
		t.Run(r.name, func(t *testing.T) {
			o := s.w.call(s.ctx, admin, r.method, r.path, r.body)
			if o.Err != nil || o.Status >= 500 {
				t.Errorf("%s %s: %s, want an answer that is no 5xx", r.method, r.path, o)
			}
			if o.Status >= 400 && !strings.Contains(string(o.Body), "s3://") {
				t.Errorf("%s: %s, want the error to name the missing file", r.name, o)
			}
			if now := s.current("b", "borrower"); now != before {
				t.Errorf("%s moved the borrower's metadata %s -> %s", r.name, before, now)
			}
		})
	}
}

// borrowerOfAPurgedLender makes table a.lender (three appends, the last
// on day), registers b.borrower from a forged copy of its metadata at loc,
// and purges a.lender: the borrower's snapshots reach files that are gone.
func (s *Sim) borrowerOfAPurgedLender(loc, day string) {
	s.t.Helper()
	var lender createResult
	if err := json.Unmarshal(s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/a/tables",
		map[string]any{"name": "lender", "schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON)}).Body, &lender); err != nil {
		s.t.Fatal(err)
	}
	for i := range 3 {
		if res := s.appendRows(admin, "a", "lender", map[int64]string{int64(i): day}); res.out.Status != 200 {
			s.t.Fatalf("append: %s", res.out)
		}
	}
	s.m.add(&Gen{uuid: lender.Metadata.UUID, ns: "a", name: "lender", state: live, meta: s.current("a", "lender")})
	meta, err := s.forge(loc)
	if err != nil {
		s.t.Fatal(err)
	}
	s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/b/register", map[string]any{"name": "borrower", "metadata-location": meta})
	s.mustStatus(204, admin, "DELETE", tablePath("a", "lender")+"?purgeRequested=true", nil)
	if err := s.drain(); err != nil {
		s.t.Fatal(err)
	}
}

// current is the metadata location of a live table.
func (s *Sim) current(ns, name string) string {
	var res createResult
	_ = json.Unmarshal(s.w.call(s.ctx, admin, "GET", tablePath(ns, name), nil).Body, &res)
	return res.MetadataLocation
}

// A delivery of a batch that is already done (SQS delivers at least once:
// a duplicate, or the lease's refresh racing the batch's last checkpoint)
// leaves no in-flight record behind. Found by the simulation (seeds 4, 7
// and 12, about 140 steps): a SUCCEEDED job's in-flight record stayed at
// rest, an index item whose batch was long done.
func TestLateDuplicateDeliveryLeavesNoInFlightRecord(t *testing.T) {
	s := newFoundSim(t)
	s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/a/tables",
		map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON)})
	if res := s.appendRows(admin, "a", "t", map[int64]string{1: s.day()}); res.out.Status != 200 {
		t.Fatalf("append: %s", res.out)
	}
	o := s.mustStatus(204, admin, "DELETE", tablePath("a", "t")+"?purgeRequested=true", nil)
	if err := s.drain(); err != nil {
		t.Fatal(err)
	}
	id := o.Header.Get("Icehold-Purge-Job")
	if j, err := s.job(id); err != nil || j.State != "SUCCEEDED" {
		t.Fatalf("job %s: %+v %v", id, j, err)
	}
	// The same batch delivered once more, after the job ended.
	body, _ := json.Marshal(purge.BatchMessage{Catalog: catalogName, JobID: id, Batch: 0})
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "late-duplicate", Body: string(body),
		Attributes: map[string]string{"ApproximateReceiveCount": "2"}}}}
	if _, err := s.w.srv.Purge.HandleSQS(s.ctx, nil, purge.QueueConfig{URL: s.w.srv.Info.DeleteQueue, MaxReceives: 3}, ev); err != nil {
		t.Fatal(err)
	}
	left, _, err := s.w.srv.Catalog.Store().ListInFlight(s.ctx, id, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("job %s ended, and a late delivery left %d in-flight records: %+v", id, len(left), left)
	}
}

// A purge counts each object once after a snapshot's removal too: a
// partition drop rewrote a manifest (its other files carried over as
// EXISTING entries of the removed snapshot) while a branch keeps the
// original manifest (their ADDED entries). Found by the simulation (seed
// 11, 85 steps): 19 files-deleted and 3 files-unreferenced for 21 objects.
func TestPurgeAfterSnapshotRemovalCountsEachObjectOnce(t *testing.T) {
	s := newFoundSim(t)
	s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/a/tables",
		map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON),
			"properties": map[string]string{"format-version": "2"}})
	now := s.w.clock.Now()
	day := func(d int) string { return now.AddDate(0, 0, -d).Format("2006-01-02") }
	// S1: one manifest with files of two days; S2: another day.
	if res := s.appendRows(admin, "a", "t", map[int64]string{1: day(1), 2: day(2)}); res.out.Status != 200 {
		t.Fatalf("append: %s", res.out)
	}
	if res := s.appendRows(admin, "a", "t", map[int64]string{3: day(3)}); res.out.Status != 200 {
		t.Fatalf("append: %s", res.out)
	}
	var meta struct {
		Metadata struct {
			Location  string `json:"location"`
			Current   int64  `json:"current-snapshot-id"`
			Snapshots []struct {
				ID     int64  `json:"snapshot-id"`
				Parent *int64 `json:"parent-snapshot-id"`
			} `json:"snapshots"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(s.mustStatus(200, admin, "GET", tablePath("a", "t"), nil).Body, &meta); err != nil {
		t.Fatal(err)
	}
	var first int64
	for _, sn := range meta.Metadata.Snapshots {
		if sn.Parent == nil {
			first = sn.ID
		}
	}
	commit := func(update map[string]any) {
		t.Helper()
		s.mustStatus(200, admin, "POST", tablePath("a", "t"), map[string]any{"requirements": []any{}, "updates": []any{update}})
	}
	commit(map[string]any{"action": "set-snapshot-ref", "ref-name": "keep", "type": "branch", "snapshot-id": meta.Metadata.Current})
	s.mustStatus(200, admin, "POST", lifecyclePath("a", "t")+"/partitions/drop", map[string]any{"partitions": []any{map[string]any{"d": day(1)}}})
	commit(map[string]any{"action": "remove-snapshots", "snapshot-ids": []int64{first}})

	prefix, _ := keyOf(meta.Metadata.Location)
	purgeCountsEachObjectOnce(t, s, prefix)
}

// purgeCountsEachObjectOnce drops a.t with purge and checks its job ended
// SUCCEEDED having counted each object under prefix once.
func purgeCountsEachObjectOnce(t *testing.T, s *Sim, prefix string) {
	t.Helper()
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k := range objs {
		if strings.HasPrefix(k, prefix+"/") {
			n++
		}
	}
	o := s.mustStatus(204, admin, "DELETE", tablePath("a", "t")+"?purgeRequested=true", nil)
	if err := s.drain(); err != nil {
		t.Fatal(err)
	}
	j, err := s.job(o.Header.Get("Icehold-Purge-Job"))
	if err != nil {
		t.Fatal(err)
	}
	deleted, _ := num(j.Raw, "files-deleted")
	unref, _ := num(j.Raw, "files-unreferenced")
	if j.State != "SUCCEEDED" || deleted+unref != int64(n) {
		t.Errorf("the purge of %d objects: %s, files-deleted %d + files-unreferenced %d (job %v)", n, j.State, deleted, unref, j.Raw)
	}
}

// The ownership backfill claims, besides a table's location, the locations
// it had before a move that its snapshots still reach, for live and
// soft-deleted tables alike: else another table could take a parent of
// such a prefix, and its purge would delete the moved table's files. Found
// by make soak (seed 1009, 349 steps): a soft-deleted, legal-held table's
// files under its old location went with another table's purge.
func TestBackfillClaimsLocationsFromBeforeAMove(t *testing.T) {
	s := newFoundSim(t)
	day := s.day()
	for _, tbl := range []struct{ name, from, to string }{{"t", "/L/x/y", "/L/home_t"}, {"u", "/L/p/q", "/L/home_u"}} {
		s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/a/tables", map[string]any{"name": tbl.name, "location": warehouse + tbl.from,
			"schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON)})
		if res := s.appendRows(admin, "a", tbl.name, map[int64]string{1: day}); res.out.Status != 200 {
			t.Fatalf("append: %s", res.out)
		}
		s.mustStatus(200, admin, "POST", tablePath("a", tbl.name), map[string]any{"requirements": []any{},
			"updates": []any{map[string]any{"action": "set-location", "location": warehouse + tbl.to}}})
	}
	s.mustStatus(204, admin, "DELETE", tablePath("a", "t"), nil) // soft: the catalog's default here
	if err := s.backfill(); err != nil {
		t.Fatal(err)
	}
	s.mustStatus(200, admin, "POST", "/v1/"+catalogName+"/namespaces/b/tables", map[string]any{"name": "mover", "schema": json.RawMessage(schemaJSON)})
	for _, target := range []string{"/L/x", "/L/x/y", "/L/x/y/z", "/L/p", "/L/p/q"} {
		o := s.w.call(s.ctx, admin, "POST", tablePath("b", "mover"), map[string]any{"requirements": []any{},
			"updates": []any{map[string]any{"action": "set-location", "location": warehouse + target}}})
		if o.Status != 409 {
			t.Errorf("after the backfill, another table's set-location to %s: %s, want 409 (a moved table's snapshots reach it)", target, o)
		}
	}
}
