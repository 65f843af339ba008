package storagesweep

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/local/emulators"
)

// reportFixture is a versioned bucket with a few objects and versions and
// an inventory report of it written by the embedded S3, read back through
// the S3 API as the sweep reads one in AWS.
type reportFixture struct {
	c        *s3.Client
	emu      *emulators.S3
	src, dst string
	rep      emulators.InventoryReport
	at       time.Time
}

func newReportFixture(t *testing.T) reportFixture {
	t.Helper()
	b := awstest.NewS3(t)
	if b.Emulator == nil {
		t.Skip("the inventory writer is the embedded S3's")
	}
	ctx := context.Background()
	f := reportFixture{c: b.Client, emu: b.Emulator, src: b.Bucket, dst: b.Bucket + "-inv"}
	if _, err := f.c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(f.dst)}); err != nil {
		t.Fatal(err)
	}
	f.put(t, "wh/a b/x.parquet", "null version")
	if _, err := f.c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(f.src),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	f.put(t, "wh/t/data/f+1.parquet", "12345")
	f.put(t, "wh/t/data/f+1.parquet", "123")
	if _, err := f.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(f.src), Key: aws.String("wh/t/data/gone")}); err != nil {
		t.Fatal(err)
	}
	f.put(t, "wh/t/metadata/00001-x.metadata.json", "{}")
	f.at = time.Now().UTC()
	var err error
	f.rep, err = f.emu.Store.WriteInventory(f.src, emulators.InventoryConfig{ID: "icehold", DestinationBucket: f.dst, DestinationPrefix: "inventory", RowsPerFile: 2}, f.at)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f reportFixture) put(t *testing.T, key, body string) {
	t.Helper()
	if _, err := f.c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(f.src), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

func (f reportFixture) uri() string { return "s3://" + f.dst + "/" + f.rep.ManifestKey }

// The rows a report yields are every version and delete marker the bucket
// holds, keys exact (decoded), as ListObjectVersions answers them.
func TestReportRowsAreTheBucketsVersions(t *testing.T) {
	f := newReportFixture(t)
	ctx := context.Background()
	rep, err := ReadReport(ctx, f.c, f.uri(), f.src, f.at.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Manifest.Files) != 3 {
		t.Fatalf("%d data files, want 3 (5 rows, 2 a file)", len(rep.Manifest.Files))
	}
	var got []Row
	for i := range rep.Manifest.Files {
		if err := rep.Rows(ctx, f.c, i, func(r Row) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	out, err := f.c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(f.src)})
	if err != nil {
		t.Fatal(err)
	}
	var want []Row
	for _, v := range out.Versions {
		want = append(want, Row{Key: aws.ToString(v.Key), Version: aws.ToString(v.VersionId), Latest: aws.ToBool(v.IsLatest), Size: aws.ToInt64(v.Size), Modified: v.LastModified.UnixMilli()})
	}
	for _, m := range out.DeleteMarkers {
		want = append(want, Row{Key: aws.ToString(m.Key), Version: aws.ToString(m.VersionId), Latest: aws.ToBool(m.IsLatest), Marker: true, Modified: m.LastModified.UnixMilli()})
	}
	sortRows(got)
	sortRows(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n got %+v\nwant %+v", got, want)
	}
}

// A report that is stale, partial, malformed or of another bucket is
// refused by name (SPEC §3), reading its manifest or any data file.
func TestRefusedReports(t *testing.T) {
	ctx := context.Background()
	rewrite := func(t *testing.T, f reportFixture, change func(*Manifest)) {
		t.Helper()
		var m Manifest
		if err := json.Unmarshal(f.get(t, f.rep.ManifestKey), &m); err != nil {
			t.Fatal(err)
		}
		change(&m)
		raw, _ := json.Marshal(m)
		sum := md5.Sum(raw)
		f.write(t, f.rep.ManifestKey, raw)
		f.write(t, f.rep.ChecksumKey, []byte(hex.EncodeToString(sum[:])))
	}
	for _, c := range []struct {
		name   string
		reason error
		now    time.Duration // after the report
		change func(*testing.T, reportFixture)
	}{
		{"stale", ErrStale, MaxReportAge + time.Minute, nil},
		{"from the future", ErrMalformed, -time.Hour, nil},
		{"no checksum", ErrPartial, 0, func(t *testing.T, f reportFixture) { f.remove(t, f.rep.ChecksumKey) }},
		{"checksum differs", ErrPartial, 0, func(t *testing.T, f reportFixture) { f.write(t, f.rep.ChecksumKey, []byte(strings.Repeat("0", 32))) }},
		{"no manifest", ErrPartial, 0, func(t *testing.T, f reportFixture) { f.remove(t, f.rep.ManifestKey) }},
		{"a data file missing", ErrPartial, 0, func(t *testing.T, f reportFixture) { f.remove(t, f.rep.Manifest.Files[1].Key) }},
		{"a data file differs", ErrPartial, 0, func(t *testing.T, f reportFixture) {
			rewrite(t, f, func(m *Manifest) { m.Files[2].MD5 = strings.Repeat("a", 32) })
		}},
		{"a data file shorter", ErrPartial, 0, func(t *testing.T, f reportFixture) {
			rewrite(t, f, func(m *Manifest) { m.Files[0].Size++ })
		}},
		{"not gzip", ErrMalformed, 0, func(t *testing.T, f reportFixture) {
			f.write(t, f.rep.Manifest.Files[0].Key, []byte("Bucket,Key\n"))
			sum := md5.Sum([]byte("Bucket,Key\n"))
			rewrite(t, f, func(m *Manifest) { m.Files[0].Size, m.Files[0].MD5 = 11, hex.EncodeToString(sum[:]) })
		}},
		{"Parquet", ErrMalformed, 0, func(t *testing.T, f reportFixture) { rewrite(t, f, func(m *Manifest) { m.FileFormat = "Parquet" }) }},
		{"no Size field", ErrMalformed, 0, func(t *testing.T, f reportFixture) {
			rewrite(t, f, func(m *Manifest) { m.FileSchema = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, LastModifiedDate" })
		}},
		{"current versions only", ErrMalformed, 0, func(t *testing.T, f reportFixture) {
			rewrite(t, f, func(m *Manifest) { m.FileSchema = "Bucket, Key, Size, LastModifiedDate" })
		}},
		{"of another bucket", ErrForeign, 0, func(t *testing.T, f reportFixture) {
			rewrite(t, f, func(m *Manifest) { m.SourceBucket = "someone-else" })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newReportFixture(t)
			if c.change != nil {
				c.change(t, f)
			}
			err := readAll(ctx, f, f.at.Add(c.now))
			var re *RefusedError
			if !errors.Is(err, c.reason) || !errors.Is(err, ErrReportRefused) || !errors.As(err, &re) || !strings.Contains(err.Error(), f.uri()) {
				t.Fatalf("err = %v; want the report refused as %v, naming it", err, c.reason)
			}
		})
	}
}

// readAll reads a report and every row of it.
func readAll(ctx context.Context, f reportFixture, now time.Time) error {
	rep, err := ReadReport(ctx, f.c, f.uri(), f.src, now)
	if err != nil {
		return err
	}
	for i := range rep.Manifest.Files {
		if err := rep.Rows(ctx, f.c, i, func(Row) error { return nil }); err != nil {
			return err
		}
	}
	return nil
}

func (f reportFixture) get(t *testing.T, key string) []byte {
	t.Helper()
	b, err := get(context.Background(), f.c, f.dst, key, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f reportFixture) write(t *testing.T, key string, body []byte) {
	t.Helper()
	if err := put(context.Background(), f.c, f.dst, key, body); err != nil {
		t.Fatal(err)
	}
}

func (f reportFixture) remove(t *testing.T, key string) {
	t.Helper()
	if _, err := f.c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(f.dst), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
}
