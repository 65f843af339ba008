package storagesweep

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/purge"
)

// S3 is the S3 calls the sweep makes: it reads the report and writes and
// reads its own working files (never a LIST, never a delete: deletions go
// through the delete pipeline). *s3.Client satisfies it.
type S3 interface {
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// The reasons a report is refused (SPEC §3: a stale, partial, malformed or
// foreign report deletes nothing).
var (
	ErrReportRefused = errors.New("inventory report refused")
	ErrStale         = errors.New("stale")
	ErrPartial       = errors.New("partial")
	ErrMalformed     = errors.New("malformed")
	ErrForeign       = errors.New("of another bucket")
)

// RefusedError names a refused report, the reason and what was seen.
type RefusedError struct {
	Report string
	Reason error
	Detail string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("inventory report %s refused as %v: %s", e.Report, e.Reason, e.Detail)
}

// Is lets errors.Is find the reason, ErrReportRefused, and purge.ErrRefused
// (the job fails with this message, deleting nothing).
func (e *RefusedError) Is(target error) bool {
	return target == e.Reason || target == ErrReportRefused || target == purge.ErrRefused
}

func refuse(report string, reason error, format string, args ...any) error {
	return &RefusedError{Report: report, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// MaxReportAge bounds how old a report may be when the sweep uses it: S3
// delivers a daily report within a day or so of its creation time; an
// older one describes a bucket that has moved on (a sweep on demand
// answers then which report is newest, and waits for the next).
const MaxReportAge = 48 * time.Hour

// maxManifestBytes bounds manifest.json (a few hundred bytes per data file).
const maxManifestBytes = 64 << 20

// Manifest is an S3 Inventory report's manifest.json, as the S3 User Guide
// documents it ("Inventory manifest").
type Manifest struct {
	SourceBucket      string     `json:"sourceBucket"`
	DestinationBucket string     `json:"destinationBucket"` // an ARN: arn:aws:s3:::bucket
	Version           string     `json:"version"`
	CreationTimestamp string     `json:"creationTimestamp"` // Unix milliseconds, as a string
	FileFormat        string     `json:"fileFormat"`
	FileSchema        string     `json:"fileSchema"`
	Files             []DataFile `json:"files"`
}

// DataFile is one data file a manifest names.
type DataFile struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	MD5  string `json:"MD5checksum"`
}

// Report is a manifest read and checked: where its data files are, when it
// was made, and where each field the sweep needs sits in a row.
type Report struct {
	URI      string // s3:// URI of manifest.json
	Bucket   string // the destination bucket (the data files' bucket)
	Manifest Manifest
	Created  time.Time
	cols     columns
}

// columns are the indexes of the fields a row is read by.
type columns struct {
	bucket, key, version, latest, marker, size, modified, n int
}

// The fields the sweep needs: every version (VersionId, IsLatest,
// IsDeleteMarker come with IncludedObjectVersions All), Size and
// LastModifiedDate (optional fields the configuration must name).
var neededFields = []string{"Bucket", "Key", "VersionId", "IsLatest", "IsDeleteMarker", "Size", "LastModifiedDate"}

// ReadReport reads a report's manifest.json and manifest.checksum and
// checks them: the checksum matches, the report lists source (the sweep's
// bucket), is CSV with the fields the sweep needs, names its data files,
// and is neither from the future nor older than MaxReportAge at now. Its
// data files are checked as they are read (Rows).
func ReadReport(ctx context.Context, c S3, uri, source string, now time.Time) (Report, error) {
	r := Report{URI: uri}
	bucket, key, err := objects.Split(uri)
	if err != nil || path.Base(key) != "manifest.json" {
		return r, refuse(uri, ErrMalformed, "not the s3:// URI of a report's manifest.json")
	}
	r.Bucket = bucket
	raw, err := get(ctx, c, bucket, key, maxManifestBytes)
	if err != nil {
		return r, refuseMissing(uri, "manifest.json", err)
	}
	sum, err := get(ctx, c, bucket, strings.TrimSuffix(key, "manifest.json")+"manifest.checksum", 1<<10)
	if err != nil {
		return r, refuseMissing(uri, "manifest.checksum", err)
	}
	if got := md5.Sum(raw); !strings.EqualFold(strings.TrimSpace(string(sum)), hex.EncodeToString(got[:])) {
		return r, refuse(uri, ErrPartial, "manifest.checksum says %s, manifest.json's MD5 is %x", strings.TrimSpace(string(sum)), got)
	}
	m := &r.Manifest
	if err := json.Unmarshal(raw, m); err != nil {
		return r, refuse(uri, ErrMalformed, "manifest.json: %v", err)
	}
	if m.SourceBucket != source {
		return r, refuse(uri, ErrForeign, "it lists bucket %q, the sweep is of bucket %q", m.SourceBucket, source)
	}
	if !strings.EqualFold(m.FileFormat, "CSV") {
		return r, refuse(uri, ErrMalformed, "fileFormat %q: the sweep reads CSV reports (configure the inventory's format as CSV)", m.FileFormat)
	}
	ms, err := strconv.ParseInt(m.CreationTimestamp, 10, 64)
	if err != nil || ms <= 0 {
		return r, refuse(uri, ErrMalformed, "creationTimestamp %q is not Unix milliseconds", m.CreationTimestamp)
	}
	r.Created = time.UnixMilli(ms).UTC()
	if r.Created.After(now.Add(5 * time.Minute)) {
		return r, refuse(uri, ErrMalformed, "created %s, after now (%s)", r.Created.Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if age := now.Sub(r.Created); age > MaxReportAge {
		return r, refuse(uri, ErrStale, "created %s, %s before the sweep; a report older than %s is not used",
			r.Created.Format(time.RFC3339), age.Round(time.Minute), MaxReportAge)
	}
	if r.cols, err = columnsOf(m.FileSchema); err != nil {
		return r, refuse(uri, ErrMalformed, "%v", err)
	}
	for i, f := range m.Files {
		if f.Key == "" || f.Size < 0 || len(f.MD5) != 32 {
			return r, refuse(uri, ErrMalformed, "files[%d] lacks a key, a size or an MD5 checksum", i)
		}
	}
	return r, nil
}

// refuseMissing names a report file that could not be read.
func refuseMissing(uri, what string, err error) error {
	if errors.Is(err, objects.ErrNotFound) {
		return refuse(uri, ErrPartial, "%s is missing", what)
	}
	if errors.Is(err, objects.ErrTooLarge) {
		return refuse(uri, ErrMalformed, "%s: %v", what, err)
	}
	return fmt.Errorf("read %s of report %s: %w", what, uri, err)
}

// columnsOf finds the needed fields in a fileSchema ("Bucket, Key, ...").
func columnsOf(schema string) (columns, error) {
	at := map[string]int{}
	fields := strings.Split(schema, ",")
	for i, f := range fields {
		at[strings.TrimSpace(f)] = i
	}
	var missing []string
	idx := make([]int, len(neededFields))
	for i, f := range neededFields {
		n, ok := at[f]
		if !ok {
			missing = append(missing, f)
		}
		idx[i] = n
	}
	if len(missing) > 0 {
		return columns{}, fmt.Errorf("fileSchema %q lacks %s (the inventory must list all versions, with Size and LastModifiedDate)", schema, strings.Join(missing, ", "))
	}
	return columns{idx[0], idx[1], idx[2], idx[3], idx[4], idx[5], idx[6], len(fields)}, nil
}

// Row is one version of one object as a report lists it.
type Row struct {
	Key      string // decoded: the exact object key
	Version  string // "null" for the null version
	Latest   bool
	Marker   bool  // a delete marker
	Size     int64 // 0 for a delete marker
	Modified int64 // Unix milliseconds
}

// Rows streams the rows of data file i, checking its size and MD5 against
// the manifest as it goes: a file missing or different is a partial
// report, a row that does not parse a malformed one. fn sees each row
// before the file is known whole: the caller keeps nothing it acts on
// until Rows returns nil.
func (r Report) Rows(ctx context.Context, c S3, i int, fn func(Row) error) error {
	f := r.Manifest.Files[i]
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(r.Bucket), Key: aws.String(f.Key)})
	if err != nil {
		if objects.IsNotFound(err) {
			return refuse(r.URI, ErrPartial, "data file %s is missing", f.Key)
		}
		return fmt.Errorf("read data file %s: %w", f.Key, err)
	}
	defer out.Body.Close()
	sum := md5.New()
	counted := &countingReader{r: io.TeeReader(out.Body, sum)}
	zr, err := gzip.NewReader(bufio.NewReaderSize(counted, 1<<20))
	if err != nil {
		return r.checkWhole(f, counted, sum, refuse(r.URI, ErrMalformed, "data file %s: %v", f.Key, err))
	}
	cr := csv.NewReader(zr)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = r.cols.n
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return r.checkWhole(f, counted, sum, refuse(r.URI, ErrMalformed, "data file %s: %v", f.Key, err))
		}
		row, err := r.row(rec)
		if err != nil {
			return r.checkWhole(f, counted, sum, refuse(r.URI, ErrMalformed, "data file %s, row %d: %v", f.Key, line, err))
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return r.checkWhole(f, counted, sum, nil)
}

// checkWhole reads what is left of a data file and checks its size and
// MD5: a file that differs from the manifest is partial whatever else was
// wrong with it.
func (r Report) checkWhole(f DataFile, rd *countingReader, sum hash.Hash, err error) error {
	if _, cerr := io.Copy(io.Discard, rd); cerr != nil && err == nil {
		return fmt.Errorf("read data file %s: %w", f.Key, cerr)
	}
	if rd.n != f.Size {
		return refuse(r.URI, ErrPartial, "data file %s has %d bytes, the manifest says %d", f.Key, rd.n, f.Size)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); !strings.EqualFold(got, f.MD5) {
		return refuse(r.URI, ErrPartial, "data file %s has MD5 %s, the manifest says %s", f.Key, got, f.MD5)
	}
	return err
}

// row reads the fields the sweep needs from a record.
func (r Report) row(rec []string) (Row, error) {
	c := r.cols
	if rec[c.bucket] != r.Manifest.SourceBucket {
		return Row{}, fmt.Errorf("bucket %q, the report is of %q", rec[c.bucket], r.Manifest.SourceBucket)
	}
	key, err := url.QueryUnescape(rec[c.key])
	if err != nil || key == "" {
		return Row{}, fmt.Errorf("key %q is not URL-encoded", rec[c.key])
	}
	row := Row{Key: key, Version: rec[c.version]}
	if row.Version == "" {
		row.Version = "null"
	}
	if row.Latest, err = strconv.ParseBool(rec[c.latest]); err != nil {
		return Row{}, fmt.Errorf("IsLatest %q", rec[c.latest])
	}
	if row.Marker, err = strconv.ParseBool(rec[c.marker]); err != nil {
		return Row{}, fmt.Errorf("IsDeleteMarker %q", rec[c.marker])
	}
	if s := rec[c.size]; s != "" || !row.Marker {
		if row.Size, err = strconv.ParseInt(s, 10, 64); err != nil || row.Size < 0 {
			return Row{}, fmt.Errorf("size %q", s)
		}
	}
	t, err := time.Parse(time.RFC3339, rec[c.modified])
	if err != nil {
		return Row{}, fmt.Errorf("LastModifiedDate %q", rec[c.modified])
	}
	row.Modified = t.UnixMilli()
	return row, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// get reads a whole object of at most limit bytes.
func get(ctx context.Context, c S3, bucket, key string, limit int64) ([]byte, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		if objects.IsNotFound(err) {
			return nil, fmt.Errorf("%w: s3://%s/%s", objects.ErrNotFound, bucket, key)
		}
		return nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%w: s3://%s/%s is more than %d bytes", objects.ErrTooLarge, bucket, key, limit)
	}
	return b, err
}

// put writes an object.
func put(ctx context.Context, c S3, bucket, key string, body []byte) error {
	_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	return err
}
