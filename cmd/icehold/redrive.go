package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/spf13/cobra"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
)

// sqsAPI is what redrive and jobs show use of SQS.
type sqsAPI interface {
	StartMessageMoveTask(ctx context.Context, in *sqs.StartMessageMoveTaskInput, opts ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error)
	ListMessageMoveTasks(ctx context.Context, in *sqs.ListMessageMoveTasksInput, opts ...func(*sqs.Options)) (*sqs.ListMessageMoveTasksOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// dlqARNOf is the DLQ's ARN as its SQS states it (local.json), the
// embedded SQS's for a local.json of an older server.
func dlqARNOf(info *server.Info) string {
	return cmp.Or(info.DLQARN, "arn:aws:sqs:us-east-1:000000000000:"+queueName(info.DeleteDLQ))
}

// queueName is the name at the end of a queue URL.
func queueName(url string) string { return path.Base(url) }

// localSQS is the running local server's SQS: the server --dir's
// local.json names, which must be the one --url names when given.
func localSQS(ctx context.Context, conn *connOpts) (sqsAPI, *server.Info, error) {
	info, err := conn.localInfo()
	if err != nil {
		return nil, nil, err
	}
	if info == nil {
		return nil, nil, fmt.Errorf("no local server in %s (no local.json): start it with `make run`, or name its state folder with --dir", conn.stateDir())
	}
	if conn.url != "" && !sameServer(conn.url, info.RESTURL) {
		return nil, nil, fmt.Errorf("the local server of %s is at %s, not %s: name the state folder of the one at %s with --dir", conn.stateDir(), info.RESTURL, conn.url, conn.url)
	}
	return sqsOf(ctx, info)
}

func sqsOf(ctx context.Context, info *server.Info) (sqsAPI, *server.Info, error) {
	ep := awsconfig.Endpoints{SQS: info.SQS, Region: info.Region, AccessKey: info.AccessKey, SecretKey: info.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		return nil, nil, err
	}
	return awsconfig.SQS(cfg, ep), info, nil
}

func redriveCmd(conn *connOpts) *cobra.Command {
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "Move the local delete DLQ back to its queue (the SQS console's DLQ redrive) and wait for it",
		Long: `Moves the dead-lettered delete batches back to the delete queue, as the SQS
console's "start DLQ redrive" does, waits for the move task to complete and
prints how many messages it moved. A batch that has just died reaches the DLQ
only after its visibility timeout (about 30 s): redrive after that.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sq, info, err := localSQS(cmd.Context(), conn)
			if err != nil {
				return err
			}
			if _, err := sq.GetQueueAttributes(cmd.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(info.DeleteDLQ)}); err != nil {
				return fmt.Errorf("cannot reach the local SQS at %s: is `make run` running? (%v)", info.SQS, err)
			}
			return redrive(cmd.Context(), sq, info, cmd.OutOrStdout(), every)
		},
	}
	cmd.Flags().DurationVar(&every, "every", 200*time.Millisecond, "how often to ask whether the move task has ended")
	return cmd
}

// redrive starts the move task out of the DLQ and waits until it ends:
// ListMessageMoveTasks lists the newest task first (one runs at a time per
// queue).
func redrive(ctx context.Context, sq sqsAPI, info *server.Info, out io.Writer, every time.Duration) error {
	start, err := sq.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqARNOf(info))})
	if unsupported(err) {
		// moto 5.2 answers StartMessageMoveTask with an internal error.
		fmt.Fprintf(out, "%s has no StartMessageMoveTask (%v): moving the messages one by one\n", info.SQS, err)
		moved, err := moveByHand(ctx, sq, info.DeleteDLQ, info.DeleteQueue)
		if err != nil {
			return fmt.Errorf("redrive after moving %d messages: %w", moved, err)
		}
		return reportMoved(ctx, sq, info, out, moved)
	}
	if err != nil {
		return err
	}
	for {
		res, err := sq.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqARNOf(info)), MaxResults: aws.Int32(1)})
		if err != nil {
			return err
		}
		if len(res.Results) > 0 {
			t := res.Results[0]
			mine := t.TaskHandle == nil || aws.ToString(t.TaskHandle) == aws.ToString(start.TaskHandle)
			switch status := aws.ToString(t.Status); {
			case !mine:
			case status == "COMPLETED":
				return reportMoved(ctx, sq, info, out, t.ApproximateNumberOfMessagesMoved)
			case status == "FAILED" || status == "CANCELLED":
				return fmt.Errorf("redrive %s after moving %d messages: %s", status, t.ApproximateNumberOfMessagesMoved, aws.ToString(t.FailureReason))
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// unsupported: the SQS answered a call with an internal error or an
// answer that is not its protocol (moto's HTML page), not a refusal.
func unsupported(err error) bool {
	var re *awshttp.ResponseError
	var de *smithy.DeserializationError
	return errors.As(err, &de) || errors.As(err, &re) && re.HTTPStatusCode() >= 500
}

// moveByHand moves the DLQ's visible messages to the queue, each sent
// before it is deleted (a crash between sends it twice: a batch is
// idempotent).
func moveByHand(ctx context.Context, sq sqsAPI, from, to string) (int64, error) {
	var moved int64
	for {
		got, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(from), MaxNumberOfMessages: 10})
		if err != nil || len(got.Messages) == 0 {
			return moved, err
		}
		for _, m := range got.Messages {
			if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(to), MessageBody: m.Body}); err != nil {
				return moved, err
			}
			if _, err := sq.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(from), ReceiptHandle: m.ReceiptHandle}); err != nil {
				return moved, err
			}
			moved++
		}
	}
}

func reportMoved(ctx context.Context, sq sqsAPI, info *server.Info, out io.Writer, moved int64) error {
	if moved > 0 {
		_, err := fmt.Fprintf(out, "moved %d message%s from %s back to %s\n", moved, plural(moved), queueName(info.DeleteDLQ), queueName(info.DeleteQueue))
		return err
	}
	fmt.Fprintln(out, "moved 0 messages: the DLQ is empty")
	// Batches in flight on the delete queue may be on their way to it.
	if _, inflight, vis, err := queueDepth(ctx, sq, info.DeleteQueue); err == nil && inflight > 0 {
		fmt.Fprintf(out, "%d batch%s in flight on %s: one that has died reaches the DLQ after its visibility timeout (~%d s); redrive then\n",
			inflight, pluralES(int64(inflight)), queueName(info.DeleteQueue), vis)
	}
	return nil
}

// queueDepth answers a queue's visible and in-flight messages and its
// visibility timeout in seconds.
func queueDepth(ctx context.Context, sq sqsAPI, url string) (visible, inflight, visibility int, err error) {
	out, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible, sqstypes.QueueAttributeNameVisibilityTimeout}})
	if err != nil {
		return 0, 0, 0, err
	}
	visible, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	inflight, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	visibility, err = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	if err != nil {
		visibility = 30
	}
	return visible, inflight, visibility, nil
}

// deadNote says where a DEAD_LETTERED job's dead batches are: a batch is
// marked dead when its last try fails, but its message reaches the DLQ
// only once its visibility timeout runs out, so a redrive right away moves
// nothing. Only the local server's queues can be asked; in AWS the note
// says where to look.
func deadNote(ctx context.Context, c *client, j job) string {
	if j.State != "DEAD_LETTERED" || j.BatchesDead == 0 {
		return ""
	}
	n := fmt.Sprintf("%d batch%s dead", j.BatchesDead, pluralES(int64(j.BatchesDead)))
	if c.local == nil {
		return n + ": redrive the delete DLQ (the SQS console's DLQ redrive) once its messages are there (after the delete queue's visibility timeout)"
	}
	sq, _, err := sqsOf(ctx, c.local)
	if err != nil {
		return n
	}
	inDLQ, dlqInflight, _, err1 := queueDepth(ctx, sq, c.local.DeleteDLQ)
	_, _, vis, err2 := queueDepth(ctx, sq, c.local.DeleteQueue)
	if err1 != nil || err2 != nil {
		return n
	}
	if inDLQ+dlqInflight == 0 {
		return fmt.Sprintf("%s, reaching the DLQ after its visibility timeout (~%d s): then `icehold local redrive`", n, vis)
	}
	return n + ", in the DLQ: `icehold local redrive` moves them back"
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pluralES(n int64) string {
	if n == 1 {
		return ""
	}
	return "es"
}
