package emulators

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSConsumer lists the SQS calls the poller makes; *sqs.Client satisfies it.
type SQSConsumer interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// SQSHandler is a Lambda handler for SQS events with ReportBatchItemFailures.
type SQSHandler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Poller plays the Lambda event source mapping of an SQS queue: workers
// receive messages, hand them to the handler as an SQS event, and delete the
// ones not reported as failures; failed ones come back when their
// visibility timeout passes, as in AWS.
type Poller struct {
	Client    SQSConsumer
	QueueURL  string
	QueueARN  string
	Handler   SQSHandler
	Workers   int
	BatchSize int
	// Timeout plays the function's timeout: the handler's context ends then,
	// and a handler that has not answered by then counts as failed (its
	// messages come back after their visibility timeout), as when Lambda
	// times out or is killed. 0: no timeout.
	Timeout time.Duration
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range max(p.Workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if !p.once(ctx) {
					sleep(ctx, 200*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// once receives and handles one batch; false when the queue had nothing.
func (p *Poller) once(ctx context.Context) bool {
	out, err := p.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(p.QueueURL), MaxNumberOfMessages: int32(max(p.BatchSize, 1)), WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		if ctx.Err() == nil {
			slog.Warn("receive", "queue", p.QueueURL, "error", err)
		}
		return false
	}
	if len(out.Messages) == 0 {
		return false
	}
	ev := events.SQSEvent{}
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
			Attributes: m.Attributes, EventSource: "aws:sqs", EventSourceARN: p.QueueARN, Md5OfBody: aws.ToString(m.MD5OfBody),
		})
	}
	res, err := p.invoke(ctx, ev)
	failed := map[string]bool{}
	if err != nil {
		for _, r := range ev.Records {
			failed[r.MessageId] = true
		}
	}
	for _, f := range res.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, r := range ev.Records {
		if failed[r.MessageId] {
			continue
		}
		if _, err := p.Client.DeleteMessage(context.WithoutCancel(ctx), &sqs.DeleteMessageInput{
			QueueUrl: aws.String(p.QueueURL), ReceiptHandle: aws.String(r.ReceiptHandle),
		}); err != nil {
			slog.Warn("delete message", "error", err)
		}
	}
	return true
}

// invoke runs the handler within the function's timeout.
func (p *Poller) invoke(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	if p.Timeout <= 0 {
		return p.Handler(ctx, ev)
	}
	tctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	type answer struct {
		res events.SQSEventResponse
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := p.Handler(tctx, ev)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		return a.res, a.err
	case <-tctx.Done():
		return events.SQSEventResponse{}, context.DeadlineExceeded // the invocation timed out
	}
}
