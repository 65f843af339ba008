package purge

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/icehold/icehold/shared/store"
)

var testCreds = credentials.NewStaticCredentialsProvider("k", "s", "")

// stubS3 answers DeleteObjects calls from a script, recording the keys of each.
type stubS3 struct {
	mu     sync.Mutex
	calls  [][]string
	answer func(call int, keys []string) (int, string)
}

func (st *stubS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Objects []struct {
			Key string `xml:"Key"`
		} `xml:"Object"`
	}
	_ = xml.Unmarshal(body, &req)
	keys := make([]string, len(req.Objects))
	for i, o := range req.Objects {
		keys[i] = o.Key
	}
	st.mu.Lock()
	st.calls = append(st.calls, keys)
	n := len(st.calls)
	st.mu.Unlock()
	status, out := st.answer(n, keys)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, out)
}

func s3Client(url string) *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", Credentials: testCreds, BaseEndpoint: aws.String(url), UsePathStyle: true})
}

func objs(n int) []object {
	out := make([]object, n)
	for i := range out {
		out[i] = object{key: fmt.Sprintf("t/data/k%04d.parquet", i), size: 10, kind: kindData}
	}
	return out
}

// DeleteObjects through the SDK: SlowDown on the whole call and per key is
// retried (never dropped), NoSuchKey counts as missing, the pacer backs off.
func TestDeleteObjectsRetriesThrottlingAndCountsMissing(t *testing.T) {
	stub := &stubS3{answer: func(call int, keys []string) (int, string) {
		switch call {
		case 1:
			return 503, `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`
		case 2:
			return 200, `<DeleteResult>` +
				`<Error><Key>t/data/k0002.parquet</Key><Code>SlowDown</Code><Message>slow</Message></Error>` +
				`<Error><Key>t/data/k0003.parquet</Key><Code>NoSuchKey</Code><Message>gone</Message></Error>` +
				`</DeleteResult>`
		default:
			return 200, `<DeleteResult></DeleteResult>`
		}
	}}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	pacer := NewPacer()
	pacer.Start = 1000
	s := &Service{S3: s3Client(srv.URL), Pacer: pacer}

	got, err := s.deleteKeys(context.Background(), "b", "s3://b/t/", objs(1000))
	if err != nil {
		t.Fatal(err)
	}
	if got.deleted != 999 || got.missing != 1 || got.bytes != 9990 || got.byKind[kindData] != 999 {
		t.Errorf("deleted %d (%v) missing %d bytes %d, want 999 data files, 1, 9990", got.deleted, got.byKind, got.missing, got.bytes)
	}
	if len(stub.calls) != 3 || len(stub.calls[0]) != 1000 || len(stub.calls[1]) != 1000 ||
		len(stub.calls[2]) != 1 || stub.calls[2][0] != "t/data/k0002.parquet" {
		t.Errorf("calls: %d with %v keys", len(stub.calls), lens(stub.calls))
	}
	if r := pacer.Rate("s3://b/t/"); r >= 1000 {
		t.Errorf("pacer rate %v did not back off after SlowDown", r)
	}
	if _, err := s.deleteKeys(context.Background(), "b", "s3://b/t/", objs(1001)); err == nil {
		t.Errorf("1001 keys in one call were accepted")
	}
}

// Keys reach DeleteObjects exactly as the manifest spells them: escaped
// partition values stay escaped (the decoded key is another object), and
// s3a:// paths are the same objects as s3:// ones.
func TestDeleteSendsExactKeys(t *testing.T) {
	stub := &stubS3{answer: func(int, []string) (int, string) { return 200, `<DeleteResult></DeleteResult>` }}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	s := &Service{S3: s3Client(srv.URL), Pacer: NewPacer()}
	j := store.Job{Catalog: "c", Scope: "s3://b1x/wh/t/", Hold: &store.Hold{Bucket: "b1x", Prefix: "wh/t"}}
	g := newGuard(nil, j)
	paths := map[string]string{
		"s3://b1x/wh/t/data/city=M%C3%BCnchen/f.parquet": "wh/t/data/city=M%C3%BCnchen/f.parquet",
		"s3a://b1x/wh/t/data/city=New+York/f.parquet":    "wh/t/data/city=New+York/f.parquet",
		"s3n://b1x/wh/t/data/city=a%2Fb/f.parquet":       "wh/t/data/city=a%2Fb/f.parquet",
		"s3://b1x/wh/t/data/city=50%25off/f.parquet":     "wh/t/data/city=50%25off/f.parquet",
		"s3://b1x/wh/t/data/p=a b/f.parquet":             "wh/t/data/p=a b/f.parquet",
	}
	var batch []object
	want := map[string]bool{}
	for p, k := range paths {
		obj, ok, err := g.allows(context.Background(), p)
		if err != nil || !ok || obj.Key != k {
			t.Fatalf("%s: key %q allowed %v (%v), want %q", p, obj.Key, ok, err, k)
		}
		batch = append(batch, object{key: obj.Key})
		want[k] = true
	}
	for _, p := range []string{"s3://b1x/wh/t2/data/f", "s3://other/wh/t/f", "s3://b1x/wh/t", "http://b1x/wh/t/f"} {
		if _, ok, err := g.allows(context.Background(), p); ok || err != nil {
			t.Errorf("%s is allowed (%v)", p, err)
		}
	}
	if _, err := s.deleteKeys(context.Background(), g.bucket(), j.Scope, batch); err != nil {
		t.Fatal(err)
	}
	if len(stub.calls) != 1 || len(stub.calls[0]) != len(want) {
		t.Fatalf("calls %v", stub.calls)
	}
	for _, k := range stub.calls[0] {
		if !want[k] {
			t.Errorf("S3 was asked to delete %q", k)
		}
	}
}

func lens(calls [][]string) []int {
	out := make([]int, len(calls))
	for i, c := range calls {
		out[i] = len(c)
	}
	return out
}

// A throttled batch is never lost: past the retries it fails (SQS redelivers).
func TestPersistentSlowDownFailsTheBatch(t *testing.T) {
	stub := &stubS3{answer: func(int, []string) (int, string) {
		return 503, `<Error><Code>SlowDown</Code><Message>slow</Message></Error>`
	}}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	pacer := NewPacer()
	pacer.Start, pacer.Min = 1e6, 1e5
	s := &Service{S3: s3Client(srv.URL), Pacer: pacer, Backoff: time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := s.deleteKeys(ctx, "b", "s3://b/t/", objs(3))
	if err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Errorf("err = %v, want throttled", err)
	}
}

func TestAIMDPacer(t *testing.T) {
	p := &Pacer{state: map[string]*pace{}, Start: 10, Min: 1, Max: 100}
	for range 3 {
		p.Success("a")
	}
	if r := p.Rate("a"); r != 80 {
		t.Errorf("slow start: rate %v after 3 successes, want 80", r)
	}
	p.Throttled("a")
	if r := p.Rate("a"); r != 40 {
		t.Errorf("multiplicative decrease: %v, want 40", r)
	}
	p.Success("a")
	if r := p.Rate("a"); r != 41 {
		t.Errorf("additive increase after the first throttle: %v, want 41", r)
	}
	if r := p.Rate("b"); r != 10 {
		t.Errorf("another prefix is paced on its own: %v", r)
	}
}

// The lease: ChangeMessageVisibility from a goroutine while the batch runs.
func TestLeaseExtendsVisibilityWhileWorking(t *testing.T) {
	var mu sync.Mutex
	var extends []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), "ChangeMessageVisibility") {
			mu.Lock()
			extends = append(extends, req)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	client := sqs.New(sqs.Options{Region: "us-east-1", Credentials: testCreds, BaseEndpoint: aws.String(srv.URL)})
	s := &Service{}
	stop := s.holdLease(context.Background(), client, QueueConfig{URL: "http://q/000/delete", Visibility: 1500 * time.Millisecond}, "rh-1", nil)
	time.Sleep(1300 * time.Millisecond)
	stop()
	time.Sleep(600 * time.Millisecond) // no extension after stop
	mu.Lock()
	defer mu.Unlock()
	if len(extends) != 2 {
		t.Fatalf("%d extensions in 1.3 s with a 1.5 s lease, want 2", len(extends))
	}
	if extends[0]["ReceiptHandle"] != "rh-1" || fmt.Sprint(extends[0]["VisibilityTimeout"]) != "1" {
		t.Errorf("extension request: %v", extends[0])
	}
}

// StartExecution is named after the job: a repeated start is idempotent in
// Step Functions, and reconcile finds the execution by name.
func TestStartExecutionNamedAfterJob(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{"executionArn":"arn:aws:states:us-east-1:1:execution:m:pj-1","startDate":1.7e9}`)
	}))
	defer srv.Close()
	s := &Service{
		Workflow:        sfn.New(sfn.Options{Region: "us-east-1", Credentials: testCreds, BaseEndpoint: aws.String(srv.URL)}),
		StateMachineARN: "arn:aws:states:us-east-1:1:stateMachine:m",
	}
	if err := s.Start(context.Background(), store.Job{ID: "pj-1", Catalog: "c", Execution: "pj-1"}); err != nil {
		t.Fatal(err)
	}
	if got["name"] != "pj-1" || got["stateMachineArn"] != s.StateMachineARN || !strings.Contains(fmt.Sprint(got["input"]), `"job_id":"pj-1"`) {
		t.Errorf("StartExecution request: %v", got)
	}
	if arn := ExecutionARN(s.StateMachineARN, "pj-1"); arn != "arn:aws:states:us-east-1:1:execution:m:pj-1" {
		t.Errorf("execution ARN %s", arn)
	}
}
