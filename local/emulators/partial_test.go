package emulators_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/awsconfig"
)

// Calls that succeed while part of what they carried failed: the SDK sees
// SendMessageBatch's Failed entries and DeleteObjects' per-key errors, and
// what was refused is neither sent nor deleted (the simulation's faults).
func TestPartialFailuresReachTheSDK(t *testing.T) {
	ctx := context.Background()
	t.Run("SendMessageBatch refuses the next entries", func(t *testing.T) {
		emu, err := emulators.NewSQS("")
		if err != nil {
			t.Fatal(err)
		}
		c := awsconfig.SQS(served(t, emu, func(e *awsconfig.Endpoints) *string { return &e.SQS }))
		q, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q")})
		if err != nil {
			t.Fatal(err)
		}
		emu.SetRefuse(2)
		var entries []sqstypes.SendMessageBatchRequestEntry
		for _, id := range []string{"a", "b", "c"} {
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(id)})
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) != 2 || len(out.Successful) != 1 || aws.ToString(out.Failed[0].Id) != "a" || out.Failed[0].SenderFault {
			t.Fatalf("failed %+v, successful %+v: want a and b refused (not the sender's fault), c sent", out.Failed, out.Successful)
		}
		// The refusals are spent: a retry of the refused entries is sent.
		out, err = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: entries[:2]})
		if err != nil || len(out.Failed) != 0 {
			t.Fatalf("retry: %v, failed %+v", err, out)
		}
		got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
		if err != nil || len(got.Messages) != 3 {
			t.Fatalf("received %v, %v: want the 3 messages sent once each", got, err)
		}
	})
	t.Run("DeleteObjects answers a per-key error", func(t *testing.T) {
		emu, err := emulators.NewS3("", "bkt")
		if err != nil {
			t.Fatal(err)
		}
		c := awsconfig.S3(served(t, emu, func(e *awsconfig.Endpoints) *string { return &e.S3 }))
		var ids []s3types.ObjectIdentifier
		for _, k := range []string{"t/a", "t/b"} {
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k), Body: strings.NewReader("x")}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, s3types.ObjectIdentifier{Key: aws.String(k)})
		}
		emu.SetKeyFault(&emulators.KeyFault{Code: "InternalError", Match: func(k string) bool { return k == "t/b" }})
		out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &s3types.Delete{Objects: ids}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Deleted) != 1 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "t/b" || aws.ToString(out.Errors[0].Code) != "InternalError" {
			t.Fatalf("deleted %+v, errors %+v: want t/a deleted, t/b refused", out.Deleted, out.Errors)
		}
		if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("t/b")}); err != nil {
			t.Fatalf("t/b was refused, yet: %v", err)
		}
	})
}
