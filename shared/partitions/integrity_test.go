package partitions

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/local/awstest"
)

// Repair's restore on a versioned bucket: the newest prior version of the
// recorded size comes back as the current object (an overwrite and a
// delete alike), and a file no version of which matches is refused by
// name. Skipped on the embedded S3 (make test-moto runs it).
func TestRestoreFromVersions(t *testing.T) {
	if awstest.External() == "" {
		// gofakes3's in-memory backend keeps versions but its CopyObject
		// copies the current object whatever the source's versionId.
		t.Skip("the embedded S3 does not copy from a version: run under make test-moto")
	}
	b := awstest.NewS3(t)
	ctx := context.Background()
	_, err := b.Client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(b.Bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}})
	if got, gerr := b.Client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(b.Bucket)}); err != nil || gerr != nil || got.Status != s3types.BucketVersioningStatusEnabled {
		t.Skipf("%s keeps no versions (%v, %v)", awstest.Backend(), err, gerr)
	}
	put := func(key, body string) {
		t.Helper()
		if _, err := b.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	current := func(key string) string {
		t.Helper()
		out, err := b.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(key)})
		if err != nil {
			return "missing"
		}
		defer out.Body.Close()
		raw, _ := io.ReadAll(out.Body)
		return string(raw)
	}
	s := &Service{Storage: b.Client}
	uri := func(k string) string { return "s3://" + b.Bucket + "/" + k }

	put("t/data/over.parquet", "committed!")
	put("t/data/over.parquet", "garbage") // an engine's overwrite
	put("t/data/over.parquet", "garbage2")
	put("t/data/gone.parquet", "committed")
	if _, err := b.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String("t/data/gone.parquet")}); err != nil {
		t.Fatal(err)
	}
	put("t/data/never.parquet", "short")
	cases := []struct {
		key  string
		d    damage
		want string // the current object after; "" refused
	}{
		{"t/data/over.parquet", damage{reference{path: uri("t/data/over.parquet"), size: 10, what: fileData}, 8}, "committed!"},
		{"t/data/gone.parquet", damage{reference{path: uri("t/data/gone.parquet"), size: 9, what: fileData}, -1}, "committed"},
		{"t/data/never.parquet", damage{reference{path: uri("t/data/never.parquet"), size: 99, what: fileData}, 5}, ""},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			r, err := s.restore(ctx, c.d)
			if c.want == "" {
				if !errors.Is(err, ErrUnrepairable) || !strings.Contains(err.Error(), c.key) {
					t.Fatalf("restore: %+v, %v; want ErrUnrepairable naming %s", r, err, c.key)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := s.copyBack(ctx, r); err != nil {
				t.Fatal(err)
			}
			if got := current(c.key); got != c.want {
				t.Errorf("current %q after the restore, want %q", got, c.want)
			}
		})
	}
}
