package store_test

import (
	"context"
	"testing"

	"github.com/icehold/icehold/shared/store"
)

// The backfill's claim for a purge job is conditioned on the job being
// unfinished, not only on its existence: a job that ended between the
// backfill's read and its write would hold the claim forever (a finished
// job releases nothing again), and nothing could be created there.
func TestBackfilledClaimOfAFinishedJob(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	j := store.Job{ID: "pj-1", Catalog: "c", Namespace: []string{"ns"}, Table: "t", State: store.JobRunning}
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	read, err := s.GetJob(ctx, "c", j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateJob(ctx, read, store.JobUpdate{Set: map[string]any{"state": store.JobSucceeded}, States: []string{store.JobRunning}, Finish: true}); err != nil {
		t.Fatal(err)
	}
	claim := tableClaim("wh/ns/t")
	claim.Owner.JobID = j.ID
	if err := s.SetJobHold(ctx, read, claim); err == nil {
		t.Errorf("a finished job took a claim")
	}
	if err := s.TakeClaim(ctx, tableClaim("wh/ns/t")); err != nil {
		t.Errorf("the prefix of a finished job: %v, want it free", err)
	}
}

// A reconcile that read a batch's last delivery (its receives spent, its
// lease over) must not mark the batch dead once the batch was dead-lettered
// and redriven meanwhile: MarkBatchDead is conditioned on the delivery it
// read (its message and receive count), not only on the batch being alive,
// which a redrive makes true again.
func TestStaleReconcileMarksNoRedrivenBatchDead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	j := store.Job{ID: "pj-2", Catalog: "c", Namespace: []string{"ns"}, Table: "t", State: store.JobRunning, BatchesTotal: 1}
	if err := s.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBatches(ctx, []store.Batch{{JobID: j.ID, Number: 0}}); err != nil {
		t.Fatal(err)
	}
	last := store.InFlight{Batch: 0, Receives: 3, LeaseUntil: 1, Message: "m1"}
	if err := s.PutInFlight(ctx, j.ID, last); err != nil {
		t.Fatal(err)
	}
	// The reconcile's reads.
	staleBatch, err := s.GetBatch(ctx, j.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Meanwhile: the batch is marked dead by its handler, redriven, and
	// its new delivery takes a step and holds a lease.
	jr, _ := s.GetJob(ctx, "c", j.ID)
	if err := s.MarkBatchDead(ctx, jr, staleBatch, "handler", nil); err != nil {
		t.Fatal(err)
	}
	jr, _ = s.GetJob(ctx, "c", j.ID)
	if err := s.StepBatch(ctx, jr, staleBatch, store.BatchStep{From: [2]int{0, 0}, To: [2]int{0, 1}, WasDead: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutInFlight(ctx, j.ID, store.InFlight{Batch: 0, Receives: 1, LeaseUntil: 1 << 40, Message: "m2"}); err != nil {
		t.Fatal(err)
	}
	// The stale reconcile acts on what it read.
	before, _ := s.GetJob(ctx, "c", j.ID)
	if err := s.MarkBatchDead(ctx, before, staleBatch, "stale", &last); err == nil {
		t.Errorf("a stale reconcile marked the redriven batch dead")
	}
	b, _ := s.GetBatch(ctx, j.ID, 0)
	after, _ := s.GetJob(ctx, "c", j.ID)
	if b.Dead || after.BatchesDead != 0 || after.LastError != before.LastError {
		t.Errorf("after the stale reconcile: batch dead %v, %d dead batches, last error %q", b.Dead, after.BatchesDead, after.LastError)
	}
	page, _, err := s.ListInFlight(ctx, j.ID, "", 10)
	if err != nil || len(page) != 1 || page[0].Message != "m2" {
		t.Errorf("the redriven delivery's in-flight record: %+v %v", page, err)
	}
}
