package purge

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/shared/store"
)

// versionedFake is an in-memory bucket that keeps versions as S3 does
// (versions of a key newest first, delete markers on a delete by key),
// for counting the requests of the versioned purge without a server.
type versionedFake struct {
	versioned bool
	keys      map[string][]fakeVersion // newest first
	next      int
	requests  atomic.Int64
}

type fakeVersion struct {
	id     string
	marker bool
}

func (f *versionedFake) put(key string) {
	f.next++
	v := fakeVersion{id: fmt.Sprintf("v%08d", f.next)}
	if !f.versioned {
		f.keys[key] = []fakeVersion{v}
		return
	}
	f.keys[key] = append([]fakeVersion{v}, f.keys[key]...)
}

func (f *versionedFake) GetBucketVersioning(context.Context, *s3.GetBucketVersioningInput, ...func(*s3.Options)) (*s3.GetBucketVersioningOutput, error) {
	f.requests.Add(1)
	if f.versioned {
		return &s3.GetBucketVersioningOutput{Status: s3types.BucketVersioningStatusEnabled}, nil
	}
	return &s3.GetBucketVersioningOutput{}, nil
}

func (f *versionedFake) DeleteObjects(_ context.Context, in *s3.DeleteObjectsInput, _ ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	f.requests.Add(1)
	for _, id := range in.Delete.Objects {
		k := aws.ToString(id.Key)
		switch {
		case id.VersionId != nil:
			vs := f.keys[k]
			for i, v := range vs {
				if v.id == *id.VersionId {
					f.keys[k] = append(vs[:i:i], vs[i+1:]...)
					break
				}
			}
			if len(f.keys[k]) == 0 {
				delete(f.keys, k)
			}
		case f.versioned:
			f.next++
			f.keys[k] = append([]fakeVersion{{id: fmt.Sprintf("v%08d", f.next), marker: true}}, f.keys[k]...)
		default:
			delete(f.keys, k)
		}
	}
	return &s3.DeleteObjectsOutput{}, nil
}

func (f *versionedFake) ListObjectVersions(_ context.Context, in *s3.ListObjectVersionsInput, _ ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error) {
	f.requests.Add(1)
	var keys []string
	for k := range f.keys {
		if strings.HasPrefix(k, aws.ToString(in.Prefix)) && k >= aws.ToString(in.KeyMarker) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := &s3.ListObjectVersionsOutput{}
	n, limit := 0, int(aws.ToInt32(in.MaxKeys))
	for _, k := range keys {
		for i, v := range f.keys[k] {
			if k == aws.ToString(in.KeyMarker) && (in.VersionIdMarker == nil || v.id >= *in.VersionIdMarker) {
				continue // at or before the marker (ids grow, newest first)
			}
			if n == limit {
				out.IsTruncated = aws.Bool(true)
				return out, nil
			}
			if v.marker {
				out.DeleteMarkers = append(out.DeleteMarkers, s3types.DeleteMarkerEntry{Key: aws.String(k), VersionId: aws.String(v.id), IsLatest: aws.Bool(i == 0)})
			} else {
				out.Versions = append(out.Versions, s3types.ObjectVersion{Key: aws.String(k), VersionId: aws.String(v.id), IsLatest: aws.Bool(i == 0), Size: aws.Int64(10)})
			}
			n++
			out.NextKeyMarker, out.NextVersionIdMarker = aws.String(k), aws.String(v.id)
		}
	}
	out.IsTruncated = aws.Bool(false)
	return out, nil
}

func (f *versionedFake) ListObjectsV2(context.Context, *s3.ListObjectsV2Input, ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	f.requests.Add(1)
	return &s3.ListObjectsV2Output{}, nil
}

// BenchmarkPurgeVersioned (make bench): the S3 requests per file of a
// table's data files going, as a purge's delete path makes them: the
// batches' DeleteObjects by key, 1000 a call, then, on a versioned bucket,
// the pruning of the owned prefix (every version and delete marker listed
// a page of 1000 at a time and deleted by version id). Beside it the same
// on an unversioned bucket (today's figure for these files; the pipeline's
// own, manifests and metadata included, is BenchmarkPurge in bench/).
func BenchmarkPurgeVersioned(b *testing.B) {
	const files = 20_000
	run := func(versioned bool) float64 {
		f := &versionedFake{versioned: versioned, keys: map[string][]fakeVersion{}}
		var objs []object
		for i := range files {
			k := fmt.Sprintf("w/t/data/%08d.parquet", i)
			f.put(k)
			objs = append(objs, object{key: k, size: 10, kind: kindData})
		}
		s := &Service{S3: f, Pacer: NewPacer()}
		ctx := context.Background()
		f.requests.Store(0)
		for i := 0; i < len(objs); i += MaxKeysPerCall {
			if _, err := s.deleteKeys(ctx, "b", "s3://b/w/t", objs[i:min(i+MaxKeysPerCall, len(objs))]); err != nil {
				b.Fatal(err)
			}
		}
		j := store.Job{Kind: store.KindPurge, GCEnabled: true, Hold: &store.Hold{Bucket: "b", Prefix: "w/t"}}
		for done := false; !done; {
			var err error
			if done, err = s.pruneVersions(ctx, j, "b", ""); err != nil {
				b.Fatal(err)
			}
		}
		if len(f.keys) != 0 {
			b.Fatalf("%d keys left with versions", len(f.keys))
		}
		return float64(f.requests.Load()) / files
	}
	var plain, versioned float64
	for range b.N {
		plain, versioned = run(false), run(true)
	}
	fmt.Printf("\n== a purge's data files on a versioned warehouse (%d files; requests of the delete path) ==\n", files)
	fmt.Printf("%-52s %12s\n", "", "S3 req/file")
	fmt.Printf("%-52s %12.5f\n", "unversioned bucket: DeleteObjects by key (today)", plain)
	fmt.Printf("%-52s %12.5f\n", "versioned: by key, then versions listed and deleted", versioned)
	fmt.Printf("(a version and a delete marker per file: 2 listings + 2 deletes per 1000 files on top; target ≤ 1/1000 + manifests + metadata is the unversioned pipeline's)\n")
	b.ReportMetric(versioned, "req/file")
}
