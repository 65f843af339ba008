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
