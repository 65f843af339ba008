package emulators_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/awsconfig"
)

// The S3 contract: the behaviours icehold relies on (versions, delete
// markers, listings that page, literal keys, DeleteObjects' limits and
// missing keys, conditional puts), run against the embedded S3 in memory
// and on disk and, under `make test-moto`, against moto. Where moto and
// AWS's documentation disagree the documentation decides, and the
// assertion skips on moto naming the difference.

// s3Target is one S3 under test: a client, an empty bucket of its own.
type s3Target struct {
	c        *s3.Client
	bucket   string
	endpoint string
	external bool
	// restart reopens the embedded S3 on its state folder (nil: no folder).
	restart func(t *testing.T)
}

// swappable serves whichever emulator is current (a restart swaps it).
type swappable struct{ cur atomic.Pointer[emulators.S3] }

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.cur.Load().ServeHTTP(w, r) }

// forEachS3 runs fn against the embedded S3 in memory and on disk, or
// against the external endpoint when tests are aimed at one.
func forEachS3(t *testing.T, fn func(t *testing.T, s s3Target)) {
	t.Helper()
	if awstest.External() != "" {
		t.Run("moto", func(t *testing.T) {
			a := awstest.NewS3(t)
			fn(t, s3Target{c: a.Client, bucket: a.Bucket, endpoint: a.Endpoint, external: true})
		})
		return
	}
	for _, disk := range []bool{false, true} {
		name := "memory"
		if disk {
			name = "disk"
		}
		t.Run(name, func(t *testing.T) {
			dir := ""
			if disk {
				dir = t.TempDir()
			}
			sw := &swappable{}
			open := func() {
				emu, err := emulators.NewS3(dir, "bkt")
				if err != nil {
					t.Fatal(err)
				}
				sw.cur.Store(emu)
			}
			open()
			t.Cleanup(func() { _ = sw.cur.Load().Close() })
			srv := httptest.NewServer(sw)
			t.Cleanup(srv.Close)
			ep := awsconfig.Endpoints{S3: srv.URL, Region: "us-east-1", AccessKey: "k", SecretKey: "s"}
			cfg, err := awsconfig.Load(context.Background(), ep)
			if err != nil {
				t.Fatal(err)
			}
			target := s3Target{c: awsconfig.S3(cfg, ep), bucket: "bkt", endpoint: srv.URL}
			if disk {
				target.restart = func(t *testing.T) {
					t.Helper()
					if err := sw.cur.Load().Close(); err != nil {
						t.Fatal(err)
					}
					open()
				}
			}
			fn(t, target)
		})
	}
}

func (s s3Target) put(t *testing.T, key, body string) *s3.PutObjectOutput {
	t.Helper()
	out, err := s.c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: strings.NewReader(body)})
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return out
}

// get is a version's body ("" for the current one); err for S3's refusals.
func (s s3Target) get(key, version string) (string, error) {
	in := &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)}
	if version != "" {
		in.VersionId = aws.String(version)
	}
	out, err := s.c.GetObject(context.Background(), in)
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func (s s3Target) versioning(t *testing.T, status s3types.BucketVersioningStatus) {
	t.Helper()
	_, err := s.c.PutBucketVersioning(context.Background(), &s3.PutBucketVersioningInput{Bucket: aws.String(s.bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: status}})
	if err != nil {
		t.Fatal(err)
	}
}

// entry is a listed version: key, version id, latest, delete marker.
type entry struct {
	key, id        string
	latest, marker bool
}

// versions lists every version and delete marker, pages of max, in S3's
// order (by key, newest first), checking the markers chain the pages.
func (s s3Target) versions(t *testing.T, prefix string, max int32) []entry {
	t.Helper()
	var out []entry
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
	if max > 0 {
		in.MaxKeys = aws.Int32(max)
	}
	for pages := 0; ; pages++ {
		page, err := s.c.ListObjectVersions(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		var got []entry
		for _, v := range page.Versions {
			got = append(got, entry{aws.ToString(v.Key), aws.ToString(v.VersionId), aws.ToBool(v.IsLatest), false})
		}
		for _, d := range page.DeleteMarkers {
			got = append(got, entry{aws.ToString(d.Key), aws.ToString(d.VersionId), aws.ToBool(d.IsLatest), true})
		}
		if max > 0 && len(got) > int(max) {
			t.Fatalf("a page of at most %d has %d entries", max, len(got))
		}
		// Versions and delete markers come as two lists: order them as S3
		// does (by key, then the order versions have, newest first), which
		// the paging markers must follow.
		slices.SortStableFunc(got, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		out = append(out, got...)
		if !aws.ToBool(page.IsTruncated) {
			return out
		}
		if pages > 1000 {
			t.Fatal("ListObjectVersions never ends")
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// keys lists the current keys under prefix, pages of max.
func (s s3Target) keys(t *testing.T, prefix string, max int32) []string {
	t.Helper()
	var out []string
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
	if max > 0 {
		in.MaxKeys = aws.Int32(max)
	}
	p := s3.NewListObjectsV2Paginator(s.c, in)
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, aws.ToString(o.Key))
		}
	}
	return out
}

// raw sends a signed request as written (path and headers) and returns
// its status and body.
func (s s3Target) raw(t *testing.T, method, path string, body []byte, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.endpoint+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	creds := aws.Credentials{AccessKeyID: awstest.AccessKey, SecretAccessKey: awstest.SecretKey}
	if err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(), creds, req,
		req.Header.Get("X-Amz-Content-Sha256"), "s3", awstest.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// objectPath is the path of a key, each byte S3 needs escaped escaped,
// '/' and dot segments left as they are (the SDK sends them so).
func (s s3Target) objectPath(key string) string {
	return "/" + s.bucket + "/" + strings.ReplaceAll(url.PathEscape(key), "%2F", "/")
}

func code(err error) string { return awstest.ErrCode(err) }

func TestS3ContractVersioning(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		ctx := context.Background()
		got, err := s.c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(s.bucket)})
		if err != nil || got.Status != "" {
			t.Fatalf("a new bucket's versioning: %q, %v; want none", got.Status, err)
		}
		for _, status := range []s3types.BucketVersioningStatus{s3types.BucketVersioningStatusEnabled, s3types.BucketVersioningStatusSuspended} {
			s.versioning(t, status)
			got, err := s.c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(s.bucket)})
			if err != nil || got.Status != status {
				t.Errorf("versioning after setting %s: %q, %v", status, got.Status, err)
			}
		}
		if s.external {
			return // moto 5.2 takes any status (S3: Enabled or Suspended)
		}
		_, err = s.c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(s.bucket),
			VersioningConfiguration: &s3types.VersioningConfiguration{Status: "Sometimes"}})
		if code(err) != "MalformedXML" {
			t.Errorf("versioning status Sometimes: %v, want MalformedXML", err)
		}
	})
}

func TestS3ContractVersionsAndDeleteMarkers(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		ctx := context.Background()
		s.versioning(t, s3types.BucketVersioningStatusEnabled)
		v1 := aws.ToString(s.put(t, "t/k", "one").VersionId)
		v2 := aws.ToString(s.put(t, "t/k", "two").VersionId)
		if v1 == "" || v2 == "" || v1 == v2 || v1 == "null" {
			t.Fatalf("version ids %q, %q: want two distinct ids", v1, v2)
		}
		check := func(version, want string) {
			t.Helper()
			if got, err := s.get("t/k", version); err != nil || got != want {
				t.Errorf("get version %q: %q, %v; want %q", version, got, err, want)
			}
		}
		check("", "two")
		check(v1, "one")
		check(v2, "two")
		head, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("t/k"), VersionId: aws.String(v1)})
		if err != nil || aws.ToInt64(head.ContentLength) != 3 || aws.ToString(head.VersionId) != v1 {
			t.Errorf("head of %s: %+v, %v", v1, head, err)
		}
		if want := []entry{{"t/k", v2, true, false}, {"t/k", v1, false, false}}; !slices.Equal(s.versions(t, "t/", 0), want) {
			t.Errorf("versions: %+v, want %+v", s.versions(t, "t/", 0), want)
		}

		// A delete without a version id adds a delete marker; the key is
		// gone from reads and listings, its versions stay.
		del, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("t/k")})
		if err != nil || !aws.ToBool(del.DeleteMarker) || aws.ToString(del.VersionId) == "" {
			t.Fatalf("delete: %+v, %v; want a delete marker with its version id", del, err)
		}
		marker := aws.ToString(del.VersionId)
		var nsk *s3types.NoSuchKey
		if _, err := s.get("t/k", ""); !errors.As(err, &nsk) {
			t.Errorf("get after the delete: %v, want NoSuchKey", err)
		}
		var nf *s3types.NotFound
		if _, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("t/k")}); !errors.As(err, &nf) {
			t.Errorf("head after the delete: %v, want NotFound", err)
		}
		if keys := s.keys(t, "t/", 0); len(keys) != 0 {
			t.Errorf("listed after the delete: %v", keys)
		}
		// S3 API Reference, GetObject: a version id naming a delete marker
		// is a 405 (moto 5.2: 404 NoSuchVersion).
		if _, err := s.get("t/k", marker); code(err) != "MethodNotAllowed" && !s.external {
			t.Errorf("get of the delete marker by version: %v, want MethodNotAllowed", err)
		}
		check(v1, "one")
		want := []entry{{"t/k", marker, true, true}, {"t/k", v2, false, false}, {"t/k", v1, false, false}}
		if got := s.versions(t, "t/", 0); !sameEntries(got, want) {
			t.Errorf("versions after the delete: %+v, want %+v", got, want)
		}
		if s.restart != nil {
			s.restart(t)
			if got := s.versions(t, "t/", 0); !sameEntries(got, want) {
				t.Errorf("versions after a restart: %+v, want %+v", got, want)
			}
		}

		// Deleting the delete marker brings the object back; deleting a
		// version removes it for good.
		del, err = s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("t/k"), VersionId: aws.String(marker)})
		// S3 API Reference, DeleteObject (x-amz-delete-marker): true when
		// the version deleted was a delete marker (moto 5.2 omits it).
		if err != nil || (!aws.ToBool(del.DeleteMarker) && !s.external) || aws.ToString(del.VersionId) != marker {
			t.Errorf("delete of the marker: marker %v, version %q, %v; want marker true, version %s", aws.ToBool(del.DeleteMarker), aws.ToString(del.VersionId), err, marker)
		}
		check("", "two")
		if _, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("t/k"), VersionId: aws.String(v2)}); err != nil {
			t.Fatal(err)
		}
		check("", "one")
		if _, err := s.get("t/k", v2); code(err) != "NoSuchVersion" {
			t.Errorf("get of a deleted version: %v, want NoSuchVersion", err)
		}
		if got, want := s.versions(t, "t/", 0), []entry{{"t/k", v1, true, false}}; !slices.Equal(got, want) {
			t.Errorf("versions: %+v, want %+v", got, want)
		}
		// A delete marker is added even where no object is (S3 User Guide,
		// "Deleting object versions": a simple DELETE inserts a delete
		// marker; moto 5.2 adds none).
		if s.external {
			return
		}
		del, err = s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("t/never")})
		if err != nil || !aws.ToBool(del.DeleteMarker) {
			t.Errorf("delete of a missing key in a versioned bucket: %+v, %v; want a delete marker", del, err)
		}
	})
}

// sameEntries compares listings whose delete markers and versions of one
// key S3 answers as two lists (their relative order is the key's).
func sameEntries(got, want []entry) bool {
	sorted := func(es []entry) []entry {
		es = slices.Clone(es)
		slices.SortStableFunc(es, func(a, b entry) int { return strings.Compare(a.key+a.id, b.key+b.id) })
		return es
	}
	return slices.Equal(sorted(got), sorted(want))
}

func TestS3ContractUnversionedAndSuspended(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		ctx := context.Background()
		s.put(t, "u/k", "one")
		s.put(t, "u/k", "two")
		if got, want := s.versions(t, "u/", 0), []entry{{"u/k", "null", true, false}}; !slices.Equal(got, want) {
			t.Errorf("versions of an unversioned bucket: %+v, want %+v (a PUT replaces the null version)", got, want)
		}
		if body, err := s.get("u/k", "null"); err != nil || body != "two" {
			t.Errorf("get version null: %q, %v", body, err)
		}
		del, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("u/k")})
		if err != nil || aws.ToBool(del.DeleteMarker) {
			t.Errorf("delete in an unversioned bucket: %+v, %v; want no delete marker", del, err)
		}
		if got := s.versions(t, "u/", 0); len(got) != 0 {
			t.Errorf("versions after the delete: %+v, want none", got)
		}

		// Enabled, then suspended: a PUT replaces the null version, kept
		// versions stay; a delete adds a null delete marker (S3 User Guide,
		// "Working with objects in a versioning-suspended bucket"; moto 5.2
		// drops the kept versions and adds no marker).
		if s.external {
			return
		}
		s.versioning(t, s3types.BucketVersioningStatusEnabled)
		v1 := aws.ToString(s.put(t, "s/k", "one").VersionId)
		s.versioning(t, s3types.BucketVersioningStatusSuspended)
		s.put(t, "s/k", "two")
		s.put(t, "s/k", "three")
		if got, want := s.versions(t, "s/", 0), []entry{{"s/k", "null", true, false}, {"s/k", v1, false, false}}; !slices.Equal(got, want) {
			t.Errorf("versions after puts while suspended: %+v, want %+v", got, want)
		}
		del, err = s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("s/k")})
		if err != nil || !aws.ToBool(del.DeleteMarker) {
			t.Fatalf("delete while suspended: %+v, %v; want a delete marker", del, err)
		}
		if got, want := s.versions(t, "s/", 0), []entry{{"s/k", "null", true, true}, {"s/k", v1, false, false}}; !sameEntries(got, want) {
			t.Errorf("versions after a delete while suspended: %+v, want %+v (the null marker replaces the null version)", got, want)
		}
	})
}

func TestS3ContractListObjectVersionsPages(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		ctx := context.Background()
		s.versioning(t, s3types.BucketVersioningStatusEnabled)
		var want []entry
		for i := range 5 {
			key := fmt.Sprintf("p/d%d/k", i%2) + fmt.Sprint(i)
			var ids []string
			for range i%3 + 1 {
				ids = append(ids, aws.ToString(s.put(t, key, "x").VersionId))
			}
			var es []entry
			if i == 3 {
				del, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, entry{key, aws.ToString(del.VersionId), true, true})
			}
			for j := len(ids) - 1; j >= 0; j-- {
				es = append(es, entry{key, ids[j], len(es) == 0, false})
			}
			want = append(want, es...)
		}
		s.put(t, "p0/outside", "x")
		slices.SortStableFunc(want, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		whole := s.versions(t, "p/", 0)
		if !sameEntries(whole, want) {
			t.Fatalf("versions under p/: %+v, want %+v", whole, want)
		}
		for _, max := range []int32{1, 2, 3} {
			if got := s.versions(t, "p/", max); !sameEntries(got, want) || len(got) != len(want) {
				t.Errorf("paged by %d: %+v, want %+v", max, got, want)
			}
		}
		out, err := s.c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(s.bucket), Prefix: aws.String("p/"), Delimiter: aws.String("/")})
		if err != nil {
			t.Fatal(err)
		}
		var prefixes []string
		for _, p := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(p.Prefix))
		}
		if !slices.Equal(prefixes, []string{"p/d0/", "p/d1/"}) || len(out.Versions)+len(out.DeleteMarkers) != 0 {
			t.Errorf("versions with delimiter /: prefixes %v, %d versions; want p/d0/, p/d1/ and none", prefixes, len(out.Versions))
		}
		// Current objects page as before: the delete-marked key is gone.
		var keys []string
		for _, e := range want {
			if e.latest && !e.marker {
				keys = append(keys, e.key)
			}
		}
		if got := s.keys(t, "p/", 2); !slices.Equal(got, keys) {
			t.Errorf("current keys paged by 2: %v, want %v", got, keys)
		}
	})
}

func TestS3ContractDeleteObjects(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		ctx := context.Background()
		s.versioning(t, s3types.BucketVersioningStatusEnabled)
		v1 := aws.ToString(s.put(t, "d/a", "1").VersionId)
		v2 := aws.ToString(s.put(t, "d/a", "2").VersionId)
		s.put(t, "d/b", "1")
		out, err := s.c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.bucket), Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{
			{Key: aws.String("d/a"), VersionId: aws.String(v1)},
			{Key: aws.String("d/b")},
			{Key: aws.String("d/missing")},
		}}})
		if err != nil || len(out.Errors) != 0 || len(out.Deleted) != 3 {
			t.Fatalf("DeleteObjects: %+v, %v", out, err)
		}
		byKey := map[string]s3types.DeletedObject{}
		for _, d := range out.Deleted {
			byKey[aws.ToString(d.Key)] = d
		}
		if d := byKey["d/a"]; aws.ToString(d.VersionId) != v1 || aws.ToBool(d.DeleteMarker) {
			t.Errorf("the version deleted: %+v, want version %s, no marker", d, v1)
		}
		if d := byKey["d/b"]; !aws.ToBool(d.DeleteMarker) || aws.ToString(d.DeleteMarkerVersionId) == "" {
			t.Errorf("the key deleted without a version: %+v, want a delete marker", d)
		}
		if _, ok := byKey["d/missing"]; !ok {
			t.Error("a missing key is not reported deleted")
		}
		if body, err := s.get("d/a", ""); err != nil || body != "2" {
			t.Errorf("d/a after deleting its older version: %q, %v", body, err)
		}
		if _, err := s.get("d/a", v1); code(err) != "NoSuchVersion" {
			t.Errorf("the deleted version: %v, want NoSuchVersion", err)
		}
		_ = v2
		if s.external {
			return // moto 5.2 takes 1,001 keys (docs/design/local.md)
		}
		var ids []s3types.ObjectIdentifier
		for i := range 1001 {
			ids = append(ids, s3types.ObjectIdentifier{Key: aws.String(fmt.Sprint("d/", i))})
		}
		_, err = s.c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.bucket), Delete: &s3types.Delete{Objects: ids}})
		if code(err) != "MalformedXML" {
			t.Errorf("DeleteObjects of 1,001 keys: %v, want MalformedXML", err)
		}
	})
}

func TestS3ContractConditionalPuts(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		ctx := context.Background()
		put := func(key, body string, ifNone, ifMatch string) (*s3.PutObjectOutput, error) {
			in := &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: strings.NewReader(body)}
			if ifNone != "" {
				in.IfNoneMatch = aws.String(ifNone)
			}
			if ifMatch != "" {
				in.IfMatch = aws.String(ifMatch)
			}
			return s.c.PutObject(ctx, in)
		}
		first, err := put("c/k", "one", "*", "")
		if err != nil {
			t.Fatalf("If-None-Match * of a new key: %v", err)
		}
		if _, err := put("c/k", "two", "*", ""); code(err) != "PreconditionFailed" {
			t.Errorf("If-None-Match * of an existing key: %v, want PreconditionFailed", err)
		}
		if _, err := put("c/k", "two", "", `"0123456789abcdef0123456789abcdef"`); code(err) != "PreconditionFailed" {
			t.Errorf("If-Match of another ETag: %v, want PreconditionFailed", err)
		}
		if _, err := put("c/k", "two", "", aws.ToString(first.ETag)); err != nil {
			t.Errorf("If-Match of the current ETag: %v", err)
		}
		if body, _ := s.get("c/k", ""); body != "two" {
			t.Errorf("after the conditional puts: %q, want two", body)
		}
		if _, err := put("c/missing", "x", "", aws.ToString(first.ETag)); code(err) != "NoSuchKey" {
			t.Errorf("If-Match of a missing key: %v, want NoSuchKey", err)
		}
		// In a versioned bucket a delete marker is no object.
		s.versioning(t, s3types.BucketVersioningStatusEnabled)
		if _, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String("c/k")}); err != nil {
			t.Fatal(err)
		}
		if _, err := put("c/k", "three", "*", ""); err != nil {
			t.Errorf("If-None-Match * over a delete marker: %v", err)
		}
	})
}

// Keys are literal: any UTF-8 sequence up to 1,024 bytes is one key,
// stored and listed as written, never resolved as a path. The on-disk
// backend stored `t/../t2/…` in t2, and listings of a prefix holding one
// answered 500.
func TestS3ContractLiteralKeys(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		keys := []string{
			"t1/../t2/metadata/x.metadata.json/",
			"t/../t2/data/f.parquet",
			"./x", "x/", "a//b", "a/./b", "..", "%41%", "%2F", "sp ace+plus", "ü/ñ", "t2/data/real.parquet",
		}
		for i, k := range keys {
			s.put(t, k, fmt.Sprint("body-", i))
		}
		for i, k := range keys {
			if got, err := s.get(k, ""); err != nil || got != fmt.Sprint("body-", i) {
				t.Errorf("get %q: %q, %v; want body-%d", k, got, err, i)
			}
		}
		want := slices.Sorted(slices.Values(keys))
		if got := s.keys(t, "", 0); !slices.Equal(got, want) {
			t.Errorf("listed: %q, want %q", got, want)
		}
		if got := s.keys(t, "", 3); !slices.Equal(got, want) {
			t.Errorf("listed by 3: %q, want %q", got, want)
		}
		if got := s.keys(t, "t2/", 0); !slices.Equal(got, []string{"t2/data/real.parquet"}) {
			t.Errorf("listed under t2/: %q, want only t2/data/real.parquet", got)
		}
		if got := s.keys(t, "t/", 0); !slices.Equal(got, []string{"t/../t2/data/f.parquet"}) {
			t.Errorf("listed under t/: %q", got)
		}
		out, err := s.c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String("t/"), Delimiter: aws.String("/")})
		if err != nil || len(out.CommonPrefixes) != 1 || aws.ToString(out.CommonPrefixes[0].Prefix) != "t/../" {
			t.Errorf("t/ by /: %+v, %v; want the common prefix t/../", out, err)
		}
		// The SDK sends keys escaped; a raw request with its dot segments
		// as they are names the same keys.
		if status, body := s.raw(t, "GET", s.objectPath("t/../t2/data/f.parquet"), nil, nil); status != 200 || body != "body-1" {
			t.Errorf("raw GET of t/../t2/data/f.parquet: %d %q", status, body)
		}
		if status, _ := s.raw(t, "GET", s.objectPath("t2/data/f.parquet"), nil, nil); status != 404 {
			t.Errorf("raw GET of t2/data/f.parquet: %d, want 404 (the .. key is not there)", status)
		}
		_, err = s.c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(strings.Repeat("k", 1025)), Body: strings.NewReader("x")})
		// S3 User Guide, "Naming objects": at most 1,024 bytes (moto 5.2
		// takes more).
		if code(err) != "KeyTooLongError" && !s.external {
			t.Errorf("a key of 1,025 bytes: %v, want KeyTooLongError", err)
		}
		if s.restart != nil {
			s.restart(t)
			if got := s.keys(t, "", 0); !slices.Equal(got, want) {
				t.Errorf("listed after a restart: %q, want %q", got, want)
			}
		}
	})
}

// A DELETE with an empty uploadId is an AbortMultipartUpload of no upload
// (S3: NoSuchUpload); it never deletes the object.
func TestS3ContractEmptyUploadID(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		if s.external {
			awstest.Skip(t, "moto 5.2 takes an empty uploadId as none and deletes the object (docs/design/local.md)")
		}
		s.put(t, "m/k", "keep")
		for _, method := range []string{"DELETE", "GET", "POST"} {
			status, body := s.raw(t, method, s.objectPath("m/k")+"?uploadId=", nil, nil)
			if status != 404 || !strings.Contains(body, "NoSuchUpload") {
				t.Errorf("%s ?uploadId=: %d %s, want 404 NoSuchUpload", method, status, body)
			}
		}
		status, body := s.raw(t, "PUT", s.objectPath("m/k")+"?partNumber=1&uploadId=", []byte("x"), nil)
		if status != 404 || !strings.Contains(body, "NoSuchUpload") {
			t.Errorf("PUT ?partNumber=1&uploadId=: %d %s, want 404 NoSuchUpload", status, body)
		}
		if got, err := s.get("m/k", ""); err != nil || got != "keep" {
			t.Errorf("the object after: %q, %v; want it kept", got, err)
		}
	})
}

// A body that does not hash to its x-amz-content-sha256 is refused and
// stores nothing.
func TestS3ContractPayloadHash(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		if s.external {
			awstest.Skip(t, "moto 5.2 does not check x-amz-content-sha256 against the body")
		}
		wrong := strings.Repeat("0", 64)
		status, body := s.raw(t, "PUT", s.objectPath("h/k"), []byte("payload"), map[string]string{"X-Amz-Content-Sha256": wrong})
		if status != 400 || !strings.Contains(body, "XAmzContentSHA256Mismatch") {
			t.Errorf("PUT with a wrong payload hash: %d %s, want 400 XAmzContentSHA256Mismatch", status, body)
		}
		if _, err := s.get("h/k", ""); err == nil {
			t.Error("the object was stored")
		}
		status, body = s.raw(t, "PUT", s.objectPath("h/k"), []byte("payload"), map[string]string{"Content-Md5": "AAAAAAAAAAAAAAAAAAAAAA=="})
		if status != 400 || !strings.Contains(body, "BadDigest") {
			t.Errorf("PUT with a wrong Content-MD5: %d %s, want 400 BadDigest", status, body)
		}
	})
}

// Multipart uploads: parts join in order into one object (ETag
// "<md5 of the parts' md5s>-<parts>"); a part under 5 MiB but the last is
// EntityTooSmall; an aborted upload is gone.
func TestS3ContractMultipart(t *testing.T) {
	forEachS3(t, func(t *testing.T, s s3Target) {
		ctx := context.Background()
		up := func(key string) string {
			t.Helper()
			out, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatal(err)
			}
			return aws.ToString(out.UploadId)
		}
		part := func(key, id string, n int32, body string) s3types.CompletedPart {
			t.Helper()
			out, err := s.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: aws.String(id),
				PartNumber: aws.Int32(n), Body: strings.NewReader(body)})
			if err != nil {
				t.Fatal(err)
			}
			return s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag}
		}
		big, small := strings.Repeat("a", 5<<20), "tail"
		id := up("mp/k")
		parts := []s3types.CompletedPart{part("mp/k", id, 1, big), part("mp/k", id, 2, small)}
		out, err := s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String("mp/k"),
			UploadId: aws.String(id), MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(aws.ToString(out.ETag), `-2"`) {
			t.Errorf("ETag %s, want a multipart ETag of 2 parts", aws.ToString(out.ETag))
		}
		if got, err := s.get("mp/k", ""); err != nil || got != big+small {
			t.Errorf("the object: %d bytes, %v; want %d", len(got), err, len(big+small))
		}
		id = up("mp/small")
		parts = []s3types.CompletedPart{part("mp/small", id, 1, small), part("mp/small", id, 2, small)}
		_, err = s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String("mp/small"),
			UploadId: aws.String(id), MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}})
		if code(err) != "EntityTooSmall" {
			t.Errorf("a first part of 4 bytes: %v, want EntityTooSmall", err)
		}
		if _, err := s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String("mp/small"), UploadId: aws.String(id)}); err != nil {
			t.Fatal(err)
		}
		_, err = s.c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(s.bucket), Key: aws.String("mp/small"), UploadId: aws.String(id)})
		if code(err) != "NoSuchUpload" {
			t.Errorf("the parts of an aborted upload: %v, want NoSuchUpload", err)
		}
		if _, err := s.get("mp/small", ""); code(err) != "NoSuchKey" {
			t.Errorf("the aborted upload's key: %v, want NoSuchKey", err)
		}
	})
}
