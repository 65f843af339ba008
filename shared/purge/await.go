package purge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/icehold/icehold/shared/store"
)

// The workflow waits for the batches by callback, not by polling: the
// WaitForBatches task (.waitForTaskToken) hands its token to AwaitBatches,
// which stores it on the job; the delete function whose transaction completes
// the job's last batch returns it with SendTaskSuccess. An execution's
// history then holds the same few events whether the batches take a minute
// or wait a weekend in the DLQ. Reconcile covers a lost callback (it sends
// it again once every batch is done) and keeps the task alive with
// heartbeats while it waits.

// AwaitInput is what the WaitForBatches task sends.
type AwaitInput struct {
	Catalog   string `json:"catalog"`
	JobID     string `json:"job_id"`
	TaskToken string `json:"task_token"`
}

// BatchesDone is the AwaitBatches answer when nothing is left to wait for
// (every batch done, or the job ended): the workflow catches it by this name
// and finalizes. Returned unwrapped: its type name is the error name Step
// Functions matches.
type BatchesDone struct{ Job string }

func (e *BatchesDone) Error() string { return "every batch of job " + e.Job + " is done" }

// AwaitBatches stores the task token on the job, unless every batch is done
// already (the store's condition decides, so the last batch finishing at
// the same moment is never missed: either it sees the token, or this sees it
// done).
func (s *Service) AwaitBatches(ctx context.Context, in AwaitInput) (struct{}, error) {
	j, err := s.job(ctx, Input{Catalog: in.Catalog, JobID: in.JobID})
	if err != nil {
		return struct{}{}, err
	}
	if in.TaskToken == "" {
		return struct{}{}, fmt.Errorf("job %s: no task token to wait with", in.JobID)
	}
	err = s.Store.UpdateJob(ctx, j, store.JobUpdate{
		Set:    map[string]any{"task_token": in.TaskToken},
		States: []string{store.JobRunning, store.JobDeadLettered},
		Cond:   "batches_done < batches_total",
	})
	if errors.Is(err, store.ErrConditionFailed) {
		return struct{}{}, &BatchesDone{Job: in.JobID}
	}
	return struct{}{}, err
}

// tokenSpent: the token's task is no longer waiting (answered, timed out,
// or the token is from before a restart): nothing to do.
func tokenSpent(err error) bool {
	var gone *sfntypes.TaskDoesNotExist
	var timedOut *sfntypes.TaskTimedOut
	var invalid *sfntypes.InvalidToken
	return errors.As(err, &gone) || errors.As(err, &timedOut) || errors.As(err, &invalid)
}

// callbackIfDone returns the waiting workflow's token once every batch of
// the job is done. Two deliveries may both see it done: the second answer is
// refused as spent, which is fine.
func (s *Service) callbackIfDone(ctx context.Context, cat, id string) {
	j, err := s.Store.GetJob(ctx, cat, id)
	if err != nil || j.TaskToken == "" || j.BatchesDone < j.BatchesTotal || store.Terminal(j.State) {
		return
	}
	if s.Workflow == nil {
		return
	}
	_, err = s.Workflow.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String(j.TaskToken), Output: aws.String(`{"batches":"done"}`)})
	if err != nil && !tokenSpent(err) {
		slog.Warn("return the workflow's token; reconcile will", "job", id, "error", err)
	}
}

// keepWaiting is reconcile's part of the callback: a lost callback is sent
// again once every batch is done; otherwise a heartbeat tells the waiting
// task that the job is alive (it times out an hour after the last one and
// registers again).
func (s *Service) keepWaiting(ctx context.Context, j store.Job) error {
	if j.TaskToken == "" {
		return nil
	}
	var err error
	if j.BatchesDone >= j.BatchesTotal {
		_, err = s.Workflow.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String(j.TaskToken), Output: aws.String(`{"batches":"done"}`)})
	} else {
		_, err = s.Workflow.SendTaskHeartbeat(ctx, &sfn.SendTaskHeartbeatInput{TaskToken: aws.String(j.TaskToken)})
	}
	if tokenSpent(err) {
		return nil
	}
	return err
}
