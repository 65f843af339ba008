package purge

// The purge's AWS adapters against a real backend: the embedded emulators,
// or moto under `make test-moto` (local/awstest). The stub tests beside
// these script answers a backend cannot be made to give (SlowDown); these
// check what a backend must do by itself.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"golang.org/x/sync/errgroup"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/local/emulators"
)

// putObjects writes the objects (10 bytes each), a few at a time.
func putObjects(t *testing.T, b awstest.S3, objs []object) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(16)
	for _, o := range objs {
		g.Go(func() error {
			_, err := b.Client.PutObject(context.Background(), &s3.PutObjectInput{
				Bucket: aws.String(b.Bucket), Key: aws.String(o.key), Body: strings.NewReader("0123456789"),
			})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("put objects: %v", err)
	}
}

func listKeys(t *testing.T, b awstest.S3, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(b.Client, &s3.ListObjectsV2Input{Bucket: aws.String(b.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

func keysUnder(prefix string, n int) []object {
	out := make([]object, n)
	for i := range out {
		out[i] = object{key: fmt.Sprintf("%sk%04d.parquet", prefix, i), size: 10}
	}
	return out
}

// DeleteObjects on S3 itself: 1000 keys in one call, keys already gone
// answered as deleted (S3 reports a missing key of an unversioned bucket as
// deleted), and a key a bucket policy denies failing the batch by name
// while S3 still deletes the others.
func TestDeleteObjectsOnS3(t *testing.T) {
	t.Logf("%s", awstest.Describe())
	b := awstest.NewS3(t)
	cases := []struct {
		name    string
		keys    int
		present int    // the first present keys exist before the call
		denied  string // a key prefix the bucket policy denies deleting
		deleted int64
		errLike string
	}{
		{name: "1000 keys in one call", keys: 1000, present: 1000, deleted: 1000},
		{name: "keys already gone count as deleted", keys: 1000, present: 600, deleted: 1000},
		{name: "a denied key fails the batch and the others go", keys: 20, present: 20, denied: "locked/", errLike: "AccessDenied"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			prefix := fmt.Sprintf("t%d/data/", i)
			objs := keysUnder(prefix, tc.keys)
			if tc.denied != "" {
				for j := range objs[:tc.keys/2] {
					objs[j].key = prefix + tc.denied + strings.TrimPrefix(objs[j].key, prefix)
				}
				policy, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []map[string]any{{
					"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
					"Resource": "arn:aws:s3:::" + b.Bucket + "/" + prefix + tc.denied + "*",
				}}})
				if _, err := b.Client.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String(b.Bucket), Policy: aws.String(string(policy))}); err != nil {
					t.Fatalf("put bucket policy: %v", err)
				}
				t.Cleanup(func() {
					_, _ = b.Client.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String(b.Bucket)})
				})
			}
			putObjects(t, b, objs[:tc.present])
			s := &Service{S3: b.Client, Pacer: NewPacer()}
			start := time.Now()
			got, err := s.deleteObjects(ctx, b.Bucket, "s3://"+b.Bucket+"/"+prefix, objs)
			deleted, missing, bytes := got.deleted, got.missing, got.bytes
			t.Logf("%d keys: deleted %d, missing %d in %v (%v)", len(objs), deleted, missing, time.Since(start).Round(time.Millisecond), err)
			left := listKeys(t, b, prefix)
			if tc.errLike != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errLike) {
					t.Fatalf("err = %v, want one naming %s", err, tc.errLike)
				}
				for _, k := range left {
					if !strings.HasPrefix(k, prefix+tc.denied) {
						t.Errorf("%s survives although only %s* is denied", k, prefix+tc.denied)
					}
				}
				if len(left) != tc.keys/2 {
					t.Errorf("%d keys left, want the %d denied ones", len(left), tc.keys/2)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if deleted != tc.deleted || missing != 0 || bytes != 10*tc.deleted {
				t.Errorf("deleted %d missing %d bytes %d, want %d, 0, %d", deleted, missing, bytes, tc.deleted, 10*tc.deleted)
			}
			if len(left) != 0 {
				t.Errorf("%d keys left after the delete, e.g. %s", len(left), left[0])
			}
		})
	}
	t.Run("S3 refuses more than 1000 keys", func(t *testing.T) {
		// Our own limit comes first (deleteObjects refuses 1001); this is
		// the service's, so the limit we hold is the one S3 enforces.
		if awstest.External() != "" {
			// moto 5.2 deletes all 1001 (docs/design/local.md, "Fidelity").
			awstest.Skip(t, "moto does not enforce DeleteObjects' 1000-key limit")
		}
		ids := make([]string, 1001)
		for i := range ids {
			ids[i] = fmt.Sprintf("over/k%04d", i)
		}
		err := rawDeleteObjects(b, ids)
		if code := awstest.ErrCode(err); code != "MalformedXML" {
			t.Errorf("DeleteObjects of 1001 keys: %v (code %q), want MalformedXML", err, code)
		}
	})
}

// The lease on a real queue: while holdLease extends the message's
// visibility it is received by no one, past its original timeout; after the
// lease stops it comes back with its receive count up by one. A receive
// that asks for no attributes gets none (the poller asks for them).
func TestLeaseOnSQS(t *testing.T) {
	t.Logf("%s", awstest.Describe())
	ctx := context.Background()
	c := awstest.SQS(t)
	url, _ := awstest.Queue(t, c, awstest.Name("lease"), map[string]string{"VisibilityTimeout": "2"})
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(`{"job_id":"j"}`)}); err != nil {
		t.Fatal(err)
	}
	first := receiveOne(t, c, url, 5, true)
	if n := first.Attributes["ApproximateReceiveCount"]; n != "1" {
		t.Fatalf("first receive: ApproximateReceiveCount %q, want 1", n)
	}
	var extensions sync.WaitGroup
	var mu sync.Mutex
	n := 0
	extensions.Add(1)
	s := &Service{}
	stop := s.holdLease(ctx, c, QueueConfig{URL: url, Visibility: 2 * time.Second}, aws.ToString(first.ReceiptHandle), func() {
		mu.Lock()
		defer mu.Unlock()
		if n++; n == 1 {
			extensions.Done()
		}
	})
	extensions.Wait()
	deadline := time.Now().Add(4 * time.Second) // twice the visibility timeout
	for time.Now().Before(deadline) {
		if m := receiveAny(t, c, url, false); m != nil {
			stop()
			t.Fatalf("received during the lease (receive count %s)", m.Attributes["ApproximateReceiveCount"])
		}
		time.Sleep(300 * time.Millisecond)
	}
	stop()
	again := receiveOne(t, c, url, 10, false)
	if len(again.Attributes) != 0 {
		t.Errorf("a receive asking for no attributes got %v", again.Attributes)
	}
	if aws.ToString(again.Body) != aws.ToString(first.Body) {
		t.Errorf("body %q after the lease, want %q", aws.ToString(again.Body), aws.ToString(first.Body))
	}
	mu.Lock()
	t.Logf("%d extensions of a 2 s lease over 4 s", n)
	mu.Unlock()
}

// Receive counts and the redrive policy, through the poller that plays the
// event source mapping: a handler that always fails sees receive counts 1,
// 2, 3 (maxReceiveCount 3), then the message is in the DLQ and no longer in
// its queue; batches enqueued with SendMessageBatch arrive whole.
func TestRedrivePolicyOnSQS(t *testing.T) {
	t.Logf("%s", awstest.Describe())
	ctx := context.Background()
	c := awstest.SQS(t)
	dlqURL, dlqARN := awstest.Queue(t, c, awstest.Name("dlq"), nil)
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": 3})
	url, arn := awstest.Queue(t, c, awstest.Name("delete"), map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": string(redrive)})

	s := &Service{Sender: c, Queue: QueueConfig{URL: url}}
	var entries []sqstypes.SendMessageBatchRequestEntry
	for i := range 10 {
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(fmt.Sprintf(`{"job_id":"j","batch":%d}`, i))})
	}
	if err := s.sendBatch(ctx, entries); err != nil {
		t.Fatalf("SendMessageBatch: %v", err)
	}
	var bodies []string
	for len(bodies) < 10 {
		m := receiveOne(t, c, url, 5, false)
		bodies = append(bodies, aws.ToString(m.Body))
		if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(bodies)
	if bodies[0] != `{"job_id":"j","batch":0}` || len(slices.Compact(bodies)) != 10 {
		t.Errorf("batch bodies %v", bodies)
	}

	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("poison")}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var counts []string
	pctx, cancel := context.WithCancel(ctx)
	p := &emulators.Poller{Client: c, QueueURL: url, QueueARN: arn, Workers: 1, BatchSize: 1,
		Handler: func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			var res events.SQSEventResponse
			for _, r := range ev.Records {
				mu.Lock()
				counts = append(counts, r.Attributes["ApproximateReceiveCount"])
				mu.Unlock()
				res.BatchItemFailures = append(res.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
			return res, nil
		}}
	done := make(chan struct{})
	go func() { p.Run(pctx); close(done) }()
	deadline := time.Now().Add(20 * time.Second)
	for depth(t, c, dlqURL) == 0 {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("nothing in the DLQ after 20 s; receive counts %v", counts)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(counts, []string{"1", "2", "3"}) {
		t.Errorf("receive counts %v, want [1 2 3] (maxReceiveCount 3)", counts)
	}
	if d := depth(t, c, url); d != 0 {
		t.Errorf("the queue still holds %d messages", d)
	}
	dead := receiveOne(t, c, dlqURL, 5, true)
	if aws.ToString(dead.Body) != "poison" {
		t.Errorf("DLQ message %q", aws.ToString(dead.Body))
	}
	t.Logf("receive counts %v, then the DLQ (its receive count there: %s)", counts, dead.Attributes["ApproximateReceiveCount"])
}

func receiveAny(t *testing.T, c *sqs.Client, url string, attrs bool) *sqstypes.Message {
	t.Helper()
	in := &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1}
	if attrs {
		in.MessageSystemAttributeNames = []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}
	}
	out, err := c.ReceiveMessage(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return nil
	}
	return &out.Messages[0]
}

// receiveOne long-polls for a message for up to wait seconds.
func receiveOne(t *testing.T, c *sqs.Client, url string, wait int32, attrs bool) sqstypes.Message {
	t.Helper()
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for {
		in := &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 1, WaitTimeSeconds: 1}
		if attrs {
			in.MessageSystemAttributeNames = []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}
		}
		out, err := c.ReceiveMessage(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) > 0 {
			return out.Messages[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no message on %s within %d s", url, wait)
		}
	}
}

func depth(t *testing.T, c *sqs.Client, url string) int {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	b, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return a + b
}

// rawDeleteObjects is one DeleteObjects call with the keys as given.
func rawDeleteObjects(b awstest.S3, keys []string) error {
	ids := make([]s3types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		ids[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
	}
	_, err := b.Client.DeleteObjects(context.Background(), &s3.DeleteObjectsInput{
		Bucket: aws.String(b.Bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)},
	}, func(o *s3.Options) { o.RetryMaxAttempts = 1 })
	return err
}
