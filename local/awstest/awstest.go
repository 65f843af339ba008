// Package awstest gives tests their AWS backend: the embedded emulators
// (local/emulators), or an AWS implementation no one here wrote when
// ICEHOLD_TEST_AWS_ENDPOINT names one (`make test-moto` points it at a
// moto_server). The same test body runs on both, so a bug shared by an
// adapter and the emulator it was written against shows up as a failure on
// the other backend instead of after `cdk deploy`.
//
// On an external endpoint every test gets resources of its own (unique
// names, deleted at cleanup): packages run in parallel against one server.
package awstest

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/uuid"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/awsconfig"
)

// EnvEndpoint names the external AWS endpoint the tests use instead of the
// embedded emulators ("" or unset: embedded).
const EnvEndpoint = "ICEHOLD_TEST_AWS_ENDPOINT"

// Credentials any emulator accepts (moto checks no signature by default).
const (
	Region    = "us-east-1"
	AccessKey = "icehold"
	SecretKey = "icehold-local-secret"
)

// External is the external endpoint, "" for the embedded emulators.
func External() string { return strings.TrimRight(os.Getenv(EnvEndpoint), "/") }

// Backend names where a test's AWS calls go, for its log lines.
func Backend() string {
	if ep := External(); ep != "" {
		return "external " + ep
	}
	return "embedded"
}

// Name is a resource name unique to this run (moto keeps state across tests).
func Name(prefix string) string {
	return prefix + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
}

func config(t testing.TB, ep awsconfig.Endpoints) aws.Config {
	t.Helper()
	ep.Region, ep.AccessKey, ep.SecretKey = Region, AccessKey, SecretKey
	cfg, err := awsconfig.Load(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var (
	serialOnce sync.Once
	serialURL  string
)

// DynamoDBEndpoint is where this test process sends DynamoDB requests for
// the external endpoint: through SerialDynamoDB (one proxy per process; its
// tests use tables no other process touches). "" when embedded.
func DynamoDBEndpoint() string {
	ext := External()
	if ext == "" {
		return ""
	}
	serialOnce.Do(func() {
		target, err := url.Parse(ext)
		if err != nil {
			panic(fmt.Sprintf("%s: %v", EnvEndpoint, err))
		}
		serialURL = httptest.NewServer(SerialDynamoDB(target)).URL // lives as long as the process
	})
	return serialURL
}

// DynamoDB returns a client and a table name no other test uses: a fresh
// embedded emulator, or a unique name on the external endpoint (deleted at
// cleanup if the test created it). The test creates the table.
func DynamoDB(t testing.TB) (*dynamodb.Client, string) {
	t.Helper()
	url := External()
	if url == "" {
		emu, err := emulators.NewDynamoDB("")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(emu)
		t.Cleanup(srv.Close)
		url = srv.URL
		ep := awsconfig.Endpoints{DynamoDB: url}
		return awsconfig.DynamoDB(config(t, ep), ep), "t"
	}
	ep := awsconfig.Endpoints{DynamoDB: DynamoDBEndpoint()}
	db := awsconfig.DynamoDB(config(t, ep), ep)
	name := Name("t")
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.WithoutCancel(context.Background()), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return db, name
}

// S3 returns a client and an existing empty bucket; Emulator is the embedded
// S3 (nil on an external endpoint).
type S3 struct {
	Client   *s3.Client
	Bucket   string
	Endpoint string
	Emulator *emulators.S3
}

// NewS3 makes the bucket (and, embedded, the emulator serving it).
func NewS3(t testing.TB) S3 {
	t.Helper()
	ctx := context.Background()
	url, bucket := External(), Name("b")
	var emu *emulators.S3
	if url == "" {
		var err error
		if emu, err = emulators.NewS3(""); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(emu)
		t.Cleanup(srv.Close)
		url = srv.URL
	}
	ep := awsconfig.Endpoints{S3: url}
	c := awsconfig.S3(config(t, ep), ep)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	if emu == nil {
		t.Cleanup(func() { emptyAndDelete(c, bucket) })
	}
	return S3{Client: c, Bucket: bucket, Endpoint: url, Emulator: emu}
}

// emptyAndDelete removes a test's bucket from the shared external server:
// every version and delete marker, then the bucket.
func emptyAndDelete(c *s3.Client, bucket string) {
	ctx := context.Background()
	for range 1000 {
		page, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
		if err != nil || len(page.Versions)+len(page.DeleteMarkers) == 0 {
			break
		}
		var ids []s3types.ObjectIdentifier
		for _, v := range page.Versions {
			ids = append(ids, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, d := range page.DeleteMarkers {
			ids = append(ids, s3types.ObjectIdentifier{Key: d.Key, VersionId: d.VersionId})
		}
		_, _ = c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
	}
	_, _ = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
}

// SQS returns a client of a queue service: a fresh embedded one, or the
// external endpoint (name queues with Name).
func SQS(t testing.TB) *sqs.Client {
	t.Helper()
	url := External()
	if url == "" {
		emu, err := emulators.NewSQS("")
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(emu)
		t.Cleanup(srv.Close)
		t.Cleanup(func() { _ = emu.Close() })
		emu.SetBaseURL(srv.URL)
		url = srv.URL
	}
	ep := awsconfig.Endpoints{SQS: url}
	return awsconfig.SQS(config(t, ep), ep)
}

// Queue creates a queue (deleted at cleanup) and returns its URL and ARN.
func Queue(t testing.TB, c *sqs.Client, name string, attrs map[string]string) (url, arn string) {
	t.Helper()
	ctx := context.Background()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	url = aws.ToString(out.QueueUrl)
	t.Cleanup(func() { _, _ = c.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}) })
	a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatalf("queue arn of %s: %v", name, err)
	}
	if arn = a.Attributes["QueueArn"]; arn == "" {
		t.Fatalf("queue %s has no QueueArn attribute", name)
	}
	return url, arn
}

// Skip skips a test that needs what only one backend offers, saying why.
func Skip(t testing.TB, why string) {
	t.Helper()
	t.Skipf("%s: %s", Backend(), why)
}

// ErrCode is an AWS error's code ("" if err is not an API error).
func ErrCode(err error) string {
	var ae interface{ ErrorCode() string }
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Describe is a one-line description of the backend for test logs.
func Describe() string { return fmt.Sprintf("AWS backend: %s", Backend()) }
