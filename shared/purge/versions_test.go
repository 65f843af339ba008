package purge

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/shared/store"
)

// versionedBucket is a test bucket with versioning on; the test is skipped
// on a backend that keeps no versions.
func versionedBucket(t *testing.T) awstest.S3 {
	t.Helper()
	ctx := context.Background()
	b := awstest.NewS3(t)
	_, err := b.Client.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(b.Bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}})
	got, gerr := b.Client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(b.Bucket)})
	if err != nil || gerr != nil || got.Status != s3types.BucketVersioningStatusEnabled {
		t.Skipf("%s keeps no versions (%v, %v): run under make test-moto", awstest.Backend(), err, gerr)
	}
	return b
}

// versionsUnder lists every version and delete marker under prefix.
func versionsUnder(t *testing.T, b awstest.S3, prefix string) []string {
	t.Helper()
	var out []string
	p := s3.NewListObjectVersionsPaginator(b.Client, &s3.ListObjectVersionsInput{Bucket: aws.String(b.Bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			out = append(out, aws.ToString(v.Key)+"@"+aws.ToString(v.VersionId))
		}
		for _, m := range page.DeleteMarkers {
			out = append(out, aws.ToString(m.Key)+"@marker")
		}
	}
	return out
}

// On a versioned bucket, icehold's deletes leave nothing: deleteObjects
// removes every version and delete marker of its keys (and counts a key
// deleted only when it had a current version), and a purge's pruning of
// its owned prefix removes what deleting by key left (noncurrent versions,
// delete markers) but the current metadata file, over several pages.
func TestDeletesLeaveNoVersion(t *testing.T) {
	b := versionedBucket(t)
	ctx := context.Background()
	put := func(key, body string) {
		t.Helper()
		if _, err := b.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	s := &Service{S3: b.Client, Pacer: NewPacer()}

	t.Run("deleteObjects", func(t *testing.T) {
		put("e/data/a.parquet", "one")
		put("e/data/a.parquet", "overwritten") // an engine's overwrite: two versions
		put("e/data/ab.parquet", "a sibling whose key extends a's")
		put("e/data/gone.parquet", "x")
		if _, err := b.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.Bucket), Key: aws.String("e/data/gone.parquet")}); err != nil {
			t.Fatal(err)
		}
		got, err := s.deleteObjects(ctx, b.Bucket, "s3://"+b.Bucket+"/e", []object{
			{key: "e/data/a.parquet", size: 11, kind: kindData}, {key: "e/data/gone.parquet", size: 1, kind: kindData}})
		if err != nil {
			t.Fatal(err)
		}
		if got.deleted != 1 || got.missing != 1 || got.bytes != 11 {
			t.Errorf("deleted %d, missing %d, bytes %d; want 1, 1 (the key with only a delete marker), 11", got.deleted, got.missing, got.bytes)
		}
		left := versionsUnder(t, b, "e/")
		if len(left) != 1 || !strings.HasPrefix(left[0], "e/data/ab.parquet@") {
			t.Errorf("left %v, want only the sibling's version", left)
		}
	})

	t.Run("a named version goes alone", func(t *testing.T) {
		// The storage sweep's batches name the versions to delete (a
		// noncurrent one past its window): the current one stays.
		put("v/data/a.parquet", "old")
		put("v/data/a.parquet", "current")
		vs := versionsUnder(t, b, "v/")
		if len(vs) != 2 {
			t.Fatalf("versions %v", vs)
		}
		var old string
		p, err := b.Client.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(b.Bucket), Prefix: aws.String("v/")})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range p.Versions {
			if !aws.ToBool(v.IsLatest) {
				old = aws.ToString(v.VersionId)
			}
		}
		got, err := s.deleteObjects(ctx, b.Bucket, "s3://"+b.Bucket+"/v", []object{{key: "v/data/a.parquet", version: old, size: 3, kind: kindData}})
		if err != nil {
			t.Fatal(err)
		}
		left := versionsUnder(t, b, "v/")
		if got.deleted != 1 || len(left) != 1 || strings.HasSuffix(left[0], "@"+old) {
			t.Errorf("deleted %d, left %v; want the named version alone gone", got.deleted, left)
		}
	})

	t.Run("pruneVersions", func(t *testing.T) {
		const n = 1500 // more than a page of versions
		for i := range n {
			put(fmt.Sprintf("p/t/data/%04d.parquet", i), "v1")
		}
		put("p/t/data/0000.parquet", "v2")
		put("p/t/metadata/00001.metadata.json", "{}")
		put("p/t2/data/x.parquet", "a sibling table's")
		var keys []object
		for i := range n {
			keys = append(keys, object{key: fmt.Sprintf("p/t/data/%04d.parquet", i)})
		}
		for len(keys) > 0 { // what the batches do: delete by key
			k := min(len(keys), MaxKeysPerCall)
			if _, err := s.deleteKeys(ctx, b.Bucket, "s", keys[:k]); err != nil {
				t.Fatal(err)
			}
			keys = keys[k:]
		}
		j := store.Job{Kind: store.KindPurge, GCEnabled: true, Hold: &store.Hold{Bucket: b.Bucket, Prefix: "p/t"}}
		done, err := s.pruneVersions(ctx, j, b.Bucket, "p/t/metadata/00001.metadata.json")
		if err != nil || !done {
			t.Fatalf("prune: done %v, %v", done, err)
		}
		left := versionsUnder(t, b, "p/")
		if len(left) != 2 || !strings.HasPrefix(left[0], "p/t/metadata/00001.metadata.json@") || !strings.HasPrefix(left[1], "p/t2/") {
			t.Errorf("left %d versions (%v); want the kept metadata file's and the sibling's", len(left), left[:min(len(left), 3)])
		}
	})
}
