package purge

import (
	"context"
	"errors"
	"fmt"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/store"
)

// A FAILED job keeps its claims (Fail): the files it was deleting may
// still be there, and while no table owns their prefix another could take
// it, and its purge (or the warehouse scope of any purge) reach them. An
// operator ends that one of two ways: Retry runs the job again until it
// SUCCEEDS (or FAILS again, keeping them), Abandon lets the claims go and
// leaves the files in the bucket, owned by nobody.

// ErrNotRetryable: retry or abandon of a job that is not FAILED with its
// claims (as read), or whose claims are gone.
var ErrNotRetryable = errors.New("job not retryable")

// failedJob reads a job an operator acts on; it must be FAILED.
func failedJob(ctx context.Context, st *store.Store, cat, id, verb string) (store.Job, error) {
	j, err := st.GetJob(ctx, cat, id)
	if errors.Is(err, store.ErrNotFound) {
		return j, fmt.Errorf("purge job %s: %w", id, catalog.ErrNotFound)
	}
	if err != nil {
		return j, err
	}
	switch {
	case j.State != store.JobFailed:
		return j, fmt.Errorf("%s job %s: it is %s, not FAILED: %w", verb, id, j.State, ErrNotRetryable)
	case j.AbandonedAt != "":
		return j, fmt.Errorf("%s job %s: %s abandoned it at %s (its claims are gone, its files stay): %w", verb, id, j.AbandonedBy, j.AbandonedAt, ErrNotRetryable)
	}
	return j, nil
}

// executionName names a job's execution: the job id, then each retry's
// and each restart's own (Step Functions keeps names for 90 days).
func executionName(j store.Job, attempt int) string {
	run := j.ID
	if j.Retries > 0 {
		run = fmt.Sprintf("%s-r%d", j.ID, j.Retries)
	}
	if attempt <= 1 {
		return run
	}
	return fmt.Sprintf("%s-%d", run, attempt)
}

// Retry sets a FAILED job running again: a new execution, its attempts
// counted afresh, its claims checked to be still its own (a job that
// FAILED before FAILED jobs kept their claims cannot be retried: its
// prefixes may be another table's now). The caller starts the execution
// (Started) where it can; the next reconcile run starts it otherwise.
func Retry(ctx context.Context, st *store.Store, cat, id string) (store.Job, error) {
	j, err := failedJob(ctx, st, cat, id, "retry")
	if err != nil {
		return j, err
	}
	next := j
	next.Retries++
	err = st.RetryJob(ctx, j, executionName(next, 1),
		outbox.Record(JobEvent(eventbus.PurgeStarted, j, map[string]any{"retry": next.Retries})))
	switch {
	case errors.Is(err, store.ErrConditionFailed):
		return j, fmt.Errorf("retry job %s: it changed meanwhile: %w", id, ErrNotRetryable)
	case errors.Is(err, store.ErrLocationTaken):
		return j, fmt.Errorf("retry job %s: it no longer holds its claims (it failed before FAILED jobs kept them), so a retry could delete files another table owns now; its files stay: %w", id, ErrNotRetryable)
	case err != nil:
		return j, err
	}
	return st.GetJob(ctx, cat, id)
}

// Abandon lets a FAILED job's claims go: its files stay in the bucket,
// owned by nobody; kept names those locations. The job stays FAILED,
// marked abandoned.
func Abandon(ctx context.Context, st *store.Store, cat, id, by string) (j store.Job, kept []string, err error) {
	if j, err = failedJob(ctx, st, cat, id, "abandon"); err != nil {
		return j, nil, err
	}
	if !j.ClaimsKept {
		return j, nil, fmt.Errorf("abandon job %s: it holds no claims (it owned nothing, or failed before FAILED jobs kept them): %w", id, ErrNotRetryable)
	}
	if err := st.AbandonJob(ctx, j, by); errors.Is(err, store.ErrConditionFailed) {
		return j, nil, fmt.Errorf("abandon job %s: it changed meanwhile: %w", id, ErrNotRetryable)
	} else if err != nil {
		return j, nil, err
	}
	for _, h := range j.Holds() {
		kept = append(kept, h.URI())
	}
	j, err = st.GetJob(ctx, cat, id)
	return j, kept, err
}
