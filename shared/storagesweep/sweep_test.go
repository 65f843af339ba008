package storagesweep

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// A report that goes stale while the sweep plans fails the job (the
// planner's refusal) at whichever step it has reached, before any batch
// exists; one still fresh goes on to its stage (here one it does not
// know, refused for that, not as stale).
func TestReportGoingStaleWhilePlanning(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	s := &Service{Now: func() time.Time { return now }}
	for _, stage := range []string{stageScan, stageList, stageReach, stageSplit, stageJoin} {
		t.Run(stage, func(t *testing.T) {
			j := store.Job{ID: "pj-1", Kind: store.KindSweep, StorageSweep: &store.StorageSweep{
				Report: "s3://inv/r/manifest.json", Stage: stage, ReportTime: now.Add(-MaxReportAge - time.Minute).UnixMilli()}}
			planned, err := s.Plan(context.Background(), j)
			if planned || !errors.Is(err, ErrStale) || !errors.Is(err, purge.ErrRefused) || !strings.Contains(err.Error(), "s3://inv/r/manifest.json") {
				t.Fatalf("stale at %s: planned %v, %v; want a refusal naming the report", stage, planned, err)
			}
		})
	}
	t.Run("fresh", func(t *testing.T) {
		j := store.Job{ID: "pj-1", Kind: store.KindSweep, StorageSweep: &store.StorageSweep{
			Report: "s3://inv/r/manifest.json", Stage: "nonsense", ReportTime: now.Add(-MaxReportAge + time.Minute).UnixMilli()}}
		if _, err := s.Plan(context.Background(), j); errors.Is(err, ErrStale) {
			t.Fatalf("a fresh report refused as stale: %v", err)
		}
	})
}
