package purge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/store"
)

// DefaultMaxAttempts bounds workflow restarts of one job.
const DefaultMaxAttempts = 5

// ReconcileReport says what one sweep did.
type ReconcileReport struct {
	Checked   int `json:"checked"`
	Started   int `json:"started"`
	Restarted int `json:"restarted"`
	Failed    int `json:"failed"`
	// DeadLettered: batches found dead without their handler saying so.
	DeadLettered int `json:"dead_lettered"`
	// Orphans: what the orphan sweep of this run did.
	Orphans OrphanReport `json:"orphans"`
	// EventsRelayed: lifecycle events the same run relayed from the
	// outbox (the reconcile function's backstop for the outbox function).
	EventsRelayed int `json:"events_relayed"`
}

// Reconcile walks the jobs that are not terminal: it starts executions that
// never started (a StartExecution lost after the drop's transaction) and
// restarts those that died, up to MaxAttempts; then the job is FAILED. Then
// it sweeps orphaned metadata files (SweepOrphans).
func (s *Service) Reconcile(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	token := ""
	for {
		active, next, err := s.Store.ActiveJobs(ctx, token, 100)
		if err != nil {
			return rep, err
		}
		for _, a := range active {
			rep.Checked++
			if err := s.reconcileJob(ctx, a, &rep); err != nil {
				slog.Warn("reconcile job", "job", a.ID, "error", err)
			}
		}
		if next == "" {
			break
		}
		token = next
	}
	// The orphan sweep rides the same schedule: it makes jobs this function
	// already starts and watches.
	orphans, err := s.SweepOrphans(ctx, s.now())
	rep.Orphans = orphans
	if err != nil {
		slog.Warn("orphan sweep", "error", err)
	}
	if g, err := s.gauges(ctx); err == nil {
		s.emit(map[string]float64{
			"JobsPending": float64(g.Pending), "JobsRunning": float64(g.Running), "JobsDeadLettered": float64(g.DeadLettered),
			"OldestPendingAgeSeconds": g.OldestPending.Seconds(),
		})
	}
	return rep, nil
}

func (s *Service) reconcileJob(ctx context.Context, a store.ActiveJob, rep *ReconcileReport) error {
	j, err := s.Store.GetJob(ctx, a.Catalog, a.ID)
	if err != nil || store.Terminal(j.State) {
		return err
	}
	arn := ExecutionARN(s.StateMachineARN, j.Execution)
	out, err := s.Workflow.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	var missing *sfntypes.ExecutionDoesNotExist
	switch {
	case errors.As(err, &missing):
		rep.Started++
		return s.Start(ctx, j)
	case err != nil:
		return err
	case out.Status == sfntypes.ExecutionStatusRunning:
		if err := s.deadInFlight(ctx, j, rep); err != nil {
			return err
		}
		return s.keepWaiting(ctx, j)
	}
	// The execution ended but the job did not: restart under a new name.
	maxAttempts := s.MaxAttempts
	if maxAttempts == 0 {
		maxAttempts = DefaultMaxAttempts
	}
	if j.Attempts >= maxAttempts {
		rep.Failed++
		return s.Fail(ctx, Input{Catalog: j.Catalog, JobID: j.ID},
			fmt.Sprintf("attempts exhausted: execution %s ended %s after %d attempts", j.Execution, out.Status, j.Attempts))
	}
	name := executionName(j, j.Attempts+1)
	err = s.Store.UpdateJob(ctx, j, store.JobUpdate{
		Set: map[string]any{"execution": name}, Add: map[string]int64{"attempts": 1},
		Cond: "execution = :e", CondValues: map[string]any{":e": j.Execution},
	})
	if err != nil {
		return err
	}
	j.Execution = name
	rep.Restarted++
	return s.Start(ctx, j)
}

// now is the clock of the orphan sweep and of leases in flight.
func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ExecutionARN is the ARN of a named execution of a state machine.
func ExecutionARN(stateMachineARN, name string) string {
	return strings.Replace(stateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + name
}

// deadInFlight finds batches whose last receive ended without an answer
// (a Lambda timeout, an out-of-memory kill, a throttled or crashed
// invocation): SQS has moved their message to the DLQ, but no handler
// marked them. Each is marked dead once, and the job shows DEAD_LETTERED.
func (s *Service) deadInFlight(ctx context.Context, j store.Job, rep *ReconcileReport) error {
	maxReceives := s.Queue.MaxReceives
	if maxReceives <= 0 {
		return nil
	}
	now := s.now().Unix()
	token := ""
	for {
		page, next, err := s.Store.ListInFlight(ctx, j.ID, token, 100)
		if err != nil {
			return err
		}
		for _, f := range page {
			if f.Receives < maxReceives || f.LeaseUntil >= now {
				continue
			}
			b, err := s.Store.GetBatch(ctx, j.ID, f.Batch)
			if err != nil {
				return err
			}
			if b.Done || b.Dead {
				if err := s.Store.DeleteInFlight(ctx, j.ID, f.Batch); err != nil {
					return err
				}
				continue
			}
			reason := fmt.Sprintf("batch %d: its last delivery (receive %d of %d) ended without an answer (a timeout, an out-of-memory kill or a crash); the message is in the DLQ", f.Batch, f.Receives, maxReceives)
			fresh, err := s.Store.GetJob(ctx, j.Catalog, j.ID)
			if err != nil {
				return err
			}
			err = s.Store.MarkBatchDead(ctx, fresh, b, reason, &f,
				outbox.Record(JobEvent(eventbus.PurgeDeadLettered, fresh, map[string]any{"batch": b.Number, "reason": reason})))
			if errors.Is(err, store.ErrConditionFailed) {
				continue // marked, finished or redriven meanwhile
			}
			if err != nil {
				return err
			}
			rep.DeadLettered++
		}
		if next == "" {
			return nil
		}
		token = next
	}
}
