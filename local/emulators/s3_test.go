package emulators_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/awsconfig"
)

// Listings page as S3's do, whichever backend keeps the objects: the state
// folder's (make run's) answered every listing whole, ignoring max-keys,
// start-after and continuation tokens, so a purge's final listing of a
// moved table restarted from the first key forever.
func TestListingsPage(t *testing.T) {
	backends := map[string]string{"memory": "", "state folder": t.TempDir()}
	for name, dir := range backends {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			emu, err := emulators.NewS3(dir, "bkt")
			if err != nil {
				t.Fatal(err)
			}
			c := awsconfig.S3(served(t, emu, func(e *awsconfig.Endpoints) *string { return &e.S3 }))
			var want []string
			for i := range 7 {
				want = append(want, fmt.Sprintf("p/d%d/k%d", i%2, i))
			}
			slices.Sort(want)
			for _, k := range append(slices.Clone(want), "p0/outside", "o/x") {
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k), Body: strings.NewReader("x")}); err != nil {
					t.Fatal(err)
				}
			}
			list := func(in s3.ListObjectsV2Input) ([]string, bool) {
				t.Helper()
				in.Bucket = aws.String("bkt")
				out, err := c.ListObjectsV2(ctx, &in)
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, o := range out.Contents {
					keys = append(keys, aws.ToString(o.Key))
				}
				return keys, aws.ToBool(out.IsTruncated)
			}
			if got, more := list(s3.ListObjectsV2Input{Prefix: aws.String("p/"), MaxKeys: aws.Int32(3)}); !slices.Equal(got, want[:3]) || !more {
				t.Errorf("first page of 3: %v (truncated %v), want %v (truncated)", got, more, want[:3])
			}
			if got, more := list(s3.ListObjectsV2Input{Prefix: aws.String("p/"), StartAfter: aws.String(want[2])}); !slices.Equal(got, want[3:]) || more {
				t.Errorf("after %s: %v (truncated %v), want %v", want[2], got, more, want[3:])
			}
			if got, _ := list(s3.ListObjectsV2Input{Prefix: aws.String("p/"), StartAfter: aws.String(want[len(want)-1])}); len(got) != 0 {
				t.Errorf("after the last key: %v, want nothing", got)
			}
			if got, _ := list(s3.ListObjectsV2Input{Prefix: aws.String("p/"), StartAfter: aws.String("p")}); !slices.Equal(got, want) {
				t.Errorf("after the prefix without its slash: %v, want %v", got, want)
			}
			var all []string
			p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: aws.String("p/"), MaxKeys: aws.Int32(2)})
			pages := 0
			for p.HasMorePages() {
				page, err := p.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, o := range page.Contents {
					all = append(all, aws.ToString(o.Key))
				}
			}
			if !slices.Equal(all, want) || pages != 4 {
				t.Errorf("paged by 2: %v in %d pages, want %v in 4", all, pages, want)
			}
		})
	}
}

// A state folder written by the gofakes3 backend keeps its objects.
func TestS3ImportsGofakes3State(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "s3", "buckets", "bkt", "cat", "ns", "t", "metadata")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "00000-a.metadata.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second start finds the journal, not the old folder
		emu, err := emulators.NewS3(dir, "bkt")
		if err != nil {
			t.Fatal(err)
		}
		res, err := emu.Store.ListObjects("bkt", emulators.ListOptions{MaxKeys: 10})
		if err != nil || len(res.Objects) != 1 || res.Objects[0].Key != "cat/ns/t/metadata/00000-a.metadata.json" || res.Objects[0].Size != 2 {
			t.Errorf("objects after the import: %+v, %v", res.Objects, err)
		}
		_ = emu.Close()
	}
	if _, err := os.Stat(filepath.Join(dir, "s3.gofakes3")); err != nil {
		t.Errorf("the old folder is not set aside: %v", err)
	}
}

// The SDK's default integrity settings (checksums on every upload, over
// HTTPS an aws-chunked body with a trailing checksum) store the content,
// not its framing, and pass the checks of the stated digests.
func TestS3TakesTheSDKDefaults(t *testing.T) {
	emu, err := emulators.NewS3("", "bkt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tls := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls %v", tls), func(t *testing.T) {
			ctx := context.Background()
			srv := httptest.NewUnstartedServer(emu)
			if tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, HTTPClient: srv.Client(),
				Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
					return aws.Credentials{AccessKeyID: "k", SecretAccessKey: "s"}, nil
				})})
			body := strings.Repeat("icehold ", 10_000)
			// Over HTTP the SDK hashes a seekable body and sends its
			// x-amz-checksum-crc32; over HTTPS it streams one that cannot
			// seek as aws-chunked with a trailing checksum.
			var r io.Reader = strings.NewReader(body)
			if tls {
				r = io.MultiReader(r)
			}
			if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"),
				Body: r, ContentLength: aws.Int64(int64(len(body)))}); err != nil {
				t.Fatal(err)
			}
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(out.Body)
			out.Body.Close()
			if string(got) != body || aws.ToString(out.ContentEncoding) != "" {
				t.Errorf("stored %d bytes (%.40q), content encoding %q; want the %d bytes put", len(got), got, aws.ToString(out.ContentEncoding), len(body))
			}
			if _, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{{Key: aws.String("k")}}}}); err != nil {
				t.Errorf("DeleteObjects with the SDK's default checksum: %v", err)
			}
		})
	}
}
