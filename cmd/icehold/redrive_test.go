package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/store"
)

// local redrive waits for its move task and says how many messages moved;
// jobs show says whether a dead batch has reached the DLQ yet.
func TestRedriveCountsAndDeadNote(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := server.Start(ctx, server.Options{Dir: dir, DeleteWorkers: -1, MaxReceives: 1, ReconcileEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dead := store.Job{ID: "pj-dead", Kind: store.KindPurge, Catalog: "demo", Namespace: []string{"ops"}, Table: "t",
		State: store.JobDeadLettered, BatchesTotal: 2, BatchesDone: 1, BatchesDead: 1}
	if err := srv.Catalog.Store().CreateJob(ctx, dead); err != nil {
		t.Fatal(err)
	}
	step := func(name string, args []string, want string) {
		t.Helper()
		out, _, err := cli(append(args, "--dir", dir)...)
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v, output lacks %q:\n%s", name, err, want, out)
		}
	}
	step("redrive of an empty DLQ", []string{"local", "redrive"}, "moved 0 messages: the DLQ is empty")
	step("dead batch on its way", []string{"jobs", "show", "pj-dead"}, "1 batch dead, reaching the DLQ after its visibility timeout (~30 s)")

	// A batch dies: its second receive (maxReceiveCount 1) moves it to the DLQ.
	if _, err := srv.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(srv.Info.DeleteQueue), MessageBody: aws.String(`{"batch":1}`)}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // VisibilityTimeout 0, which the SDK does not send
		req, _ := http.NewRequest("POST", srv.Info.SQS, strings.NewReader(`{"QueueUrl":"`+srv.Info.DeleteQueue+`","VisibilityTimeout":0}`))
		req.Header.Set("X-Amz-Target", "AmazonSQS.ReceiveMessage")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("receive: %v %v", err, res)
		}
		res.Body.Close()
	}
	if n, err := srv.QueueDepth(ctx, true); err != nil || n != 1 {
		t.Fatalf("DLQ holds %d (%v), want the dead batch", n, err)
	}
	step("dead batch arrived", []string{"jobs", "show", "pj-dead"}, "in the DLQ: `icehold local redrive` moves them back")
	step("redrive with --url of the server", []string{"local", "redrive", "--url", srv.Info.RESTURL}, "moved 1 message from Icehold-DeleteDLQ back to Icehold-DeleteQueue")
	if n, err := srv.QueueDepth(ctx, false); err != nil || n != 1 {
		t.Errorf("delete queue holds %d (%v) after the redrive, want the batch back", n, err)
	}
	if _, _, err := cli("local", "redrive", "--dir", dir, "--url", "http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "not http://127.0.0.1:1") {
		t.Errorf("redrive of another server's DLQ: %v", err)
	}
}

// fakeSQS is an SQS without StartMessageMoveTask (moto 5.2's 500).
type fakeSQS struct {
	sqsAPI
	queues map[string][]string
}

func (f *fakeSQS) StartMessageMoveTask(context.Context, *sqs.StartMessageMoveTaskInput, ...func(*sqs.Options)) (*sqs.StartMessageMoveTaskOutput, error) {
	return nil, &smithy.DeserializationError{Err: errors.New("invalid character '<' looking for beginning of value")}
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	var out sqs.ReceiveMessageOutput
	q := aws.ToString(in.QueueUrl)
	for i, body := range f.queues[q] {
		if i == int(in.MaxNumberOfMessages) {
			break
		}
		out.Messages = append(out.Messages, sqstypes.Message{Body: aws.String(body), ReceiptHandle: aws.String(body)})
	}
	return &out, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q := aws.ToString(in.QueueUrl)
	f.queues[q] = append(f.queues[q], aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{}, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q := aws.ToString(in.QueueUrl)
	f.queues[q] = slices.DeleteFunc(f.queues[q], func(b string) bool { return b == aws.ToString(in.ReceiptHandle) })
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{}}, nil
}

// On an SQS without StartMessageMoveTask (moto) the redrive moves the
// messages itself instead of failing with the SDK's decoding error.
func TestRedriveWithoutMoveTasks(t *testing.T) {
	info := &server.Info{SQS: "http://moto", DeleteQueue: "http://moto/123/Q", DeleteDLQ: "http://moto/123/DLQ"}
	f := &fakeSQS{queues: map[string][]string{info.DeleteDLQ: {"b1", "b2", "b3"}}}
	var out strings.Builder
	if err := redrive(context.Background(), f, info, &out, time.Millisecond); err != nil {
		t.Fatalf("redrive: %v\n%s", err, out.String())
	}
	if len(f.queues[info.DeleteDLQ]) != 0 || len(f.queues[info.DeleteQueue]) != 3 || !strings.Contains(out.String(), "moved 3 messages from DLQ back to Q") {
		t.Errorf("queues %v after the redrive, printed:\n%s", f.queues, out.String())
	}
}
