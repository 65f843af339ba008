package emulators

import (
	"bytes"
	"compress/gzip"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// S3 Inventory, on demand: the report S3 delivers daily, in the layout the
// S3 User Guide documents ("Locating your inventory list"), written by the
// embedded S3 into a destination bucket of its own, so that what reads
// reports in AWS reads them here:
//
//	<prefix>/<source>/<id>/data/<uuid>.csv.gz                       the rows
//	<prefix>/<source>/<id>/<YYYY-MM-DDTHH-MMZ>/manifest.json        the files, their sizes and MD5s
//	<prefix>/<source>/<id>/<YYYY-MM-DDTHH-MMZ>/manifest.checksum    the MD5 (hex) of manifest.json
//	<prefix>/<source>/<id>/hive/dt=<YYYY-MM-DD-HH-MM>/symlink.txt   the data files' s3:// URIs
//
// Data files are gzipped CSV without a header, every field quoted, in
// InventorySchema's order: the key URL-encoded (decode with
// url.QueryUnescape), the null version's VersionId empty, booleans
// true/false, Size empty for a delete marker, LastModifiedDate as
// 2006-01-02T15:04:05.000Z. Every version and delete marker is listed
// (IncludedObjectVersions: All), in key order, newest version first.

// InventorySchema is the fileSchema of the reports written here.
const InventorySchema = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate"

// InventoryConfig is an inventory configuration: which objects, and where
// the report goes.
type InventoryConfig struct {
	// ID is the configuration's name (the report's config-ID).
	ID string
	// DestinationBucket and DestinationPrefix: where the report is written
	// (the bucket must exist; the prefix may be empty).
	DestinationBucket, DestinationPrefix string
	// Prefix limits the report to keys under it (the configuration's
	// filter); empty: the whole bucket.
	Prefix string
	// RowsPerFile: the most rows a data file holds (0: 1,000,000).
	RowsPerFile int
}

// InventoryManifest is manifest.json.
type InventoryManifest struct {
	SourceBucket      string          `json:"sourceBucket"`
	DestinationBucket string          `json:"destinationBucket"` // an ARN
	Version           string          `json:"version"`
	CreationTimestamp string          `json:"creationTimestamp"` // Unix milliseconds
	FileFormat        string          `json:"fileFormat"`
	FileSchema        string          `json:"fileSchema"`
	Files             []InventoryFile `json:"files"`
}

// InventoryFile is a data file of a manifest.
type InventoryFile struct {
	Key         string `json:"key"`
	Size        int64  `json:"size"`
	MD5Checksum string `json:"MD5checksum"`
}

// InventoryReport is what WriteInventory wrote.
type InventoryReport struct {
	Manifest                          InventoryManifest
	ManifestKey, ChecksumKey, Symlink string // keys in the destination bucket
	Rows                              int
}

var errInventoryConfig = errors.New("inventory configuration")

// WriteInventory writes a report of source as S3 Inventory delivers one,
// scanned at now (the report's timestamp; its rows are the bucket as the
// scan found it), and returns where it is. The manifest is written last:
// a report is complete once its manifest.checksum exists.
func (s *S3Store) WriteInventory(source string, c InventoryConfig, now time.Time) (InventoryReport, error) {
	if c.ID == "" || c.DestinationBucket == "" {
		return InventoryReport{}, fmt.Errorf("%w: an id and a destination bucket are required", errInventoryConfig)
	}
	if c.RowsPerFile <= 0 {
		c.RowsPerFile = 1_000_000
	}
	if !s.BucketExists(source) {
		return InventoryReport{}, fmt.Errorf("source %s: %w", source, ErrNoSuchBucket)
	}
	if !s.BucketExists(c.DestinationBucket) {
		return InventoryReport{}, fmt.Errorf("destination %s: %w", c.DestinationBucket, ErrNoSuchBucket)
	}
	now = now.UTC()
	base := strings.TrimSuffix(c.DestinationPrefix, "/")
	if base != "" {
		base += "/"
	}
	base += source + "/" + c.ID + "/"
	m := InventoryManifest{SourceBucket: source, DestinationBucket: "arn:aws:s3:::" + c.DestinationBucket, Version: "2016-11-30",
		CreationTimestamp: strconv.FormatInt(now.UnixMilli(), 10), FileFormat: "CSV", FileSchema: InventorySchema}
	out := InventoryReport{}
	// Pages of the versions listing, one data file each.
	o := ListVersionsOptions{Prefix: c.Prefix, MaxKeys: c.RowsPerFile}
	for {
		page, err := s.ListObjectVersions(source, o)
		if err != nil {
			return InventoryReport{}, err
		}
		if len(page.Versions) > 0 {
			f, err := s.writeInventoryFile(source, c.DestinationBucket, base+"data/"+newBlobName()+".csv.gz", page.Versions)
			if err != nil {
				return InventoryReport{}, err
			}
			m.Files = append(m.Files, f)
			out.Rows += len(page.Versions)
		}
		if !page.IsTruncated {
			break
		}
		o.KeyMarker, o.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
	}
	if m.Files == nil {
		m.Files = []InventoryFile{}
	}
	var symlink strings.Builder
	for _, f := range m.Files {
		fmt.Fprintf(&symlink, "s3://%s/%s\n", c.DestinationBucket, f.Key)
	}
	out.Symlink = base + "hive/dt=" + now.Format("2006-01-02-15-04") + "/symlink.txt"
	if _, err := s.PutObject(c.DestinationBucket, out.Symlink, strings.NewReader(symlink.String()), PutOptions{Metadata: map[string]string{"Content-Type": "text/plain"}}); err != nil {
		return InventoryReport{}, err
	}
	raw, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return InventoryReport{}, err
	}
	stamp := now.Format("2006-01-02T15-04Z")
	out.Manifest, out.ManifestKey, out.ChecksumKey = m, base+stamp+"/manifest.json", base+stamp+"/manifest.checksum"
	if _, err := s.PutObject(c.DestinationBucket, out.ManifestKey, bytes.NewReader(raw), PutOptions{Metadata: map[string]string{"Content-Type": "application/json"}}); err != nil {
		return InventoryReport{}, err
	}
	sum := md5.Sum(raw)
	if _, err := s.PutObject(c.DestinationBucket, out.ChecksumKey, strings.NewReader(hex.EncodeToString(sum[:])), PutOptions{Metadata: map[string]string{"Content-Type": "text/plain"}}); err != nil {
		return InventoryReport{}, err
	}
	return out, nil
}

// writeInventoryFile writes rows as a gzipped CSV data file.
func (s *S3Store) writeInventoryFile(source, dest, key string, rows []ObjectVersion) (InventoryFile, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	var line strings.Builder
	for _, v := range rows {
		version, size := v.VersionID, strconv.FormatInt(v.Size, 10)
		if version == NullVersion {
			version = ""
		}
		if v.DeleteMarker {
			size = ""
		}
		rec := []string{source, strings.ReplaceAll(url.QueryEscape(v.Key), "%2F", "/"), version,
			strconv.FormatBool(v.IsLatest), strconv.FormatBool(v.DeleteMarker), size, s3Time(v.LastModified)}
		// Every field quoted, as S3's inventory files have them.
		line.Reset()
		for i, f := range rec {
			if i > 0 {
				line.WriteByte(',')
			}
			line.WriteString(`"` + strings.ReplaceAll(f, `"`, `""`) + `"`)
		}
		line.WriteByte('\n')
		if _, err := io.WriteString(zw, line.String()); err != nil {
			return InventoryFile{}, err
		}
	}
	if err := zw.Close(); err != nil {
		return InventoryFile{}, err
	}
	sum := md5.Sum(buf.Bytes())
	size := int64(buf.Len())
	if _, err := s.PutObject(dest, key, &buf, PutOptions{Metadata: map[string]string{"Content-Type": "application/octet-stream"}}); err != nil {
		return InventoryFile{}, err
	}
	return InventoryFile{Key: key, Size: size, MD5Checksum: hex.EncodeToString(sum[:])}, nil
}
