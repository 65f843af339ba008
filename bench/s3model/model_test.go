package s3model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/local/emulators"
)

func setup(t *testing.T, rate, burst float64) (*Model, *s3.Client, *emulators.S3Store) {
	t.Helper()
	emu, err := emulators.NewS3("", "bkt")
	if err != nil {
		t.Fatal(err)
	}
	backend := emu.Store
	m := New(emu, backend)
	m.Rate, m.Burst = rate, burst
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""), RetryMaxAttempts: 1})
	return m, client, backend
}

func ids(t *testing.T, backend *emulators.S3Store, dir string, n int) []s3types.ObjectIdentifier {
	out := make([]s3types.ObjectIdentifier, n)
	for i := range out {
		k := fmt.Sprintf("%s/%05d.parquet", dir, i)
		if _, err := backend.PutObject("bkt", k, bytes.NewReader(nil), emulators.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		out[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
	}
	return out
}

// Past a prefix's tokens each key is answered SlowDown and stays; a call
// with no token at all is a 503 SlowDown; another prefix has its own
// ceiling; a call takes at least the write latency.
func TestCeilingPerPrefix(t *testing.T) {
	m, client, backend := setup(t, 10, 500)
	// The buckets' clock stands still but when the test moves it: a slow
	// machine refills no token between calls.
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	m.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	ctx := context.Background()
	p1 := ids(t, backend, "t/data/p=1", 600)
	p2 := ids(t, backend, "t/data/p=2", 300)
	t0 := time.Now()
	out, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"),
		Delete: &s3types.Delete{Objects: append(p1[:600:600], p2...), Quiet: aws.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(t0); took < m.WriteLatency {
		t.Errorf("the call took %v, under the model's %v", took, m.WriteLatency)
	}
	if len(out.Errors) != 100 {
		t.Fatalf("%d keys refused, want 100 (600 asked on a prefix of 500)", len(out.Errors))
	}
	for _, e := range out.Errors {
		if aws.ToString(e.Code) != "SlowDown" || Prefix("bkt", aws.ToString(e.Key)) != "bkt/t/data/p=1/" {
			t.Fatalf("refused %s with %s", aws.ToString(e.Key), aws.ToString(e.Code))
		}
		if _, err := backend.HeadObject("bkt", aws.ToString(e.Key), ""); err != nil {
			t.Errorf("a refused key is gone: %s", aws.ToString(e.Key))
		}
	}
	// Nothing left on p=1: the whole call is a 503.
	_, err = client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"),
		Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{{Key: out.Errors[0].Key}}, Quiet: aws.Bool(true)}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "SlowDown" {
		t.Fatalf("an empty prefix answered %v, want SlowDown", err)
	}
	// A second later the prefix has 10 tokens again.
	clock.Add(int64(time.Second))
	out, err = client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"),
		Delete: &s3types.Delete{Objects: p1[500:510], Quiet: aws.Bool(true)}})
	if err != nil || len(out.Errors) > 1 {
		t.Fatalf("after a second: %v, %d refused", err, len(out.Errors))
	}
	st := m.Stats()
	if st.DeleteCalls != 3 || st.SlowCalls != 1 || st.SlowKeys != 100+int64(len(out.Errors)) || st.KeysDeleted != 800+10-int64(len(out.Errors)) {
		t.Errorf("stats %+v", st)
	}
	many := make([]s3types.ObjectIdentifier, 1001)
	for i := range many {
		many[i] = s3types.ObjectIdentifier{Key: aws.String(fmt.Sprintf("t/x/%d", i))}
	}
	if _, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"),
		Delete: &s3types.Delete{Objects: many}}); err == nil {
		t.Errorf("1001 keys in one call were accepted")
	}
}
