package purge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/icehold/icehold/shared/store"
)

// QueueConfig is what the delete handler knows of its queue.
type QueueConfig struct {
	URL string
	// Visibility is the queue's visibility timeout: the lease length.
	Visibility time.Duration
	// MaxReceives is the redrive policy's maxReceiveCount.
	MaxReceives int
}

// HandleSQS is the delete Lambda's handler: one batch per record, each under
// a lease that a goroutine extends independently of the delete calls;
// failures are reported per item (ReportBatchItemFailures) so SQS retries
// only those and dead-letters them after MaxReceives.
func (s *Service) HandleSQS(ctx context.Context, lease Lease, q QueueConfig, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var res events.SQSEventResponse
	for _, rec := range ev.Records {
		if err := s.handleRecord(ctx, lease, q, rec); err != nil {
			slog.Warn("delete batch failed", "message", rec.MessageId, "error", err)
			res.BatchItemFailures = append(res.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
	return res, nil
}

func (s *Service) handleRecord(ctx context.Context, lease Lease, q QueueConfig, rec events.SQSMessage) error {
	var m BatchMessage
	if err := json.Unmarshal([]byte(rec.Body), &m); err != nil || m.JobID == "" {
		return fmt.Errorf("not a batch message: %q", rec.Body)
	}
	receives, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	// Which receive this is, and until when it holds the message: if the
	// invocation dies without answering (timeout, out of memory), reconcile
	// sees the last receive's lease run out and marks the batch dead.
	inflight := func() {
		f := store.InFlight{Batch: m.Batch, Receives: receives, LeaseUntil: s.now().Add(q.Visibility).Unix(), Message: rec.MessageId}
		if err := s.Store.PutInFlight(context.WithoutCancel(ctx), m.JobID, f); err != nil {
			slog.Warn("record the batch in flight", "job", m.JobID, "batch", m.Batch, "error", err)
		}
	}
	inflight()
	stop := s.holdLease(ctx, lease, q, rec.ReceiptHandle, inflight)
	defer stop()
	err := s.DeleteBatch(ctx, m, receives, q.MaxReceives)
	if errors.Is(err, errContinue) {
		// Checkpointed before the deadline: the rest goes in a fresh message
		// (first, so a crash here leaves a duplicate, never a lost batch).
		body, _ := json.Marshal(m)
		err = s.sendBatch(context.WithoutCancel(ctx), []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String(string(body))}})
		if err != nil {
			return fmt.Errorf("continue batch %d: %w", m.Batch, err)
		}
		// This delivery ended healthy: its record goes (once the lease no
		// longer refreshes it), or reconcile would take it, while the new
		// message waits, for a last receive that died. A record of the new
		// message's receive, if one came first, stays.
		stop()
		if err := s.Store.ForgetInFlight(context.WithoutCancel(ctx), m.JobID, m.Batch, rec.MessageId); err != nil {
			return fmt.Errorf("continue batch %d: %w", m.Batch, err)
		}
		return err
	}
	if err == nil {
		// Done (by this delivery, whose last step deleted the record, or
		// before it: a late duplicate): nothing of this delivery stays in
		// flight, not even a lease refresh that raced the last step.
		stop()
		if err := s.Store.ForgetInFlight(context.WithoutCancel(ctx), m.JobID, m.Batch, rec.MessageId); err != nil {
			slog.Warn("forget a finished delivery", "job", m.JobID, "batch", m.Batch, "error", err)
		}
	}
	return err
}

// holdLease extends the message's visibility every third of the timeout
// until stop is called, calling extended after each extension.
func (s *Service) holdLease(ctx context.Context, lease Lease, q QueueConfig, receipt string, extended func()) (stop func()) {
	if lease == nil || q.Visibility <= 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(q.Visibility / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				_, err := lease.ChangeMessageVisibility(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityInput{
					QueueUrl: aws.String(q.URL), ReceiptHandle: aws.String(receipt),
					VisibilityTimeout: int32(q.Visibility / time.Second),
				})
				if err != nil {
					slog.Warn("extend lease", "error", err)
				} else if extended != nil {
					extended()
				}
			}
		}
	}()
	var once sync.Once
	// stop returns once the goroutine is gone: no extension comes after it.
	return func() {
		once.Do(func() { close(done) })
		<-exited
	}
}

// DeleteHandler is the delete function's entry: an SQS event is a delivery of
// batches; anything else is the workflow's finalize step.
func (s *Service) DeleteHandler(lease Lease, q QueueConfig) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Records []json.RawMessage `json:"Records"`
		}
		if err := json.Unmarshal(raw, &probe); err == nil && probe.Records != nil {
			var ev events.SQSEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, err
			}
			return s.HandleSQS(ctx, lease, q, ev)
		}
		var in StepInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		return s.FinalizeStep(ctx, in)
	}
}
