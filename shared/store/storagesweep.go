package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The storage sweep's records (shared/storagesweep; SPEC §3). A sweep is a
// job of kind sweep: its state rides on the job item (StorageSweep), its
// working records live under the job, and the newest inventory report of
// each bucket is remembered so that a sweep on demand needs no listing.
//
//	SWEEP#<job> / C#<n>    a working file of the sweep (where, and the byte offsets of its sections)
//	SWEEP#<job> / D#<n>    up to 500 tables the sweep reads the reachable files of
//	REPORT#<bucket> / LATEST  the newest inventory report delivered for a bucket

// StorageSweep is a sweep job's report, settings and progress.
type StorageSweep struct {
	// Report is the s3:// URI of the report's manifest.json; Bucket the
	// bucket it lists; ReportTime its creationTimestamp (Unix ms).
	Report     string `dynamodbav:"report"`
	Bucket     string `dynamodbav:"bucket"`
	ReportTime int64  `dynamodbav:"report_time"`
	// Scope is the s3:// prefix the sweep classifies (the catalog's
	// warehouse, or the table's location); Spill where its working files go.
	Scope string `dynamodbav:"scope"`
	Spill string `dynamodbav:"spill"`
	// DryRun: classify and count, delete nothing.
	DryRun bool `dynamodbav:"dry_run"`
	// The windows in force (ISO-8601), as the job started.
	OrphanWindow  string `dynamodbav:"orphan_window"`
	VersionWindow string `dynamodbav:"version_window"`
	// Stage is the step running now; Item the next item of that stage
	// and Offset where inside it; Items how many the stage has.
	Stage  string `dynamodbav:"stage"`
	Item   int    `dynamodbav:"item"`
	Offset int    `dynamodbav:"offset"`
	Items  int    `dynamodbav:"items"`
	// Ranges bound the join's items: item i takes the sections
	// Ranges[i] to Ranges[i+1].
	Ranges []int `dynamodbav:"ranges,omitempty"`
	// Chunks, Dirs and Batches: working files, table records and deletion
	// batches written so far (the next one's number).
	Chunks  int `dynamodbav:"chunks"`
	Dirs    int `dynamodbav:"dirs"`
	Batches int `dynamodbav:"batches"`
	// Counts per class: "<class>" objects and "<class>-bytes".
	Counts map[string]int64 `dynamodbav:"counts,omitempty"`
	// Unowned names a few folders of objects no table owns.
	Unowned []string `dynamodbav:"unowned,omitempty"`
}

// SweepBatch is what a storage sweep's deletion batch needs for the check
// its delete step makes again: each file's owner (an index into Owners),
// and whether it goes as an orphan (only while its owner still does not
// reach it) or as a noncurrent version past the window.
type SweepBatch struct {
	Owners     []SweepOwner `dynamodbav:"owners"`
	Of         []int        `dynamodbav:"of"`
	Noncurrent []bool       `dynamodbav:"noncurrent"`
}

// SweepOwner is an owner as the sweep saw it: its claim and the metadata
// file its reachable files were read from.
type SweepOwner struct {
	Claim    string `dynamodbav:"claim"`
	Metadata string `dynamodbav:"metadata"`
}

// SweepChunk is one working file of a sweep: Key in the spill bucket,
// Hashes (reachable files) or not (inventory rows), and its sections'
// byte offsets (uvarints, one more than the sections).
type SweepChunk struct {
	Number  int    `dynamodbav:"number"`
	Key     string `dynamodbav:"key"`
	Hashes  bool   `dynamodbav:"hashes"`
	Offsets []byte `dynamodbav:"offsets"`
}

// SweepTable is a table whose reachable files the sweep reads: its
// claims, its metadata file as read, and why none of its files may go
// ("" when they may).
type SweepTable struct {
	Catalog   string   `dynamodbav:"catalog"`
	Namespace []string `dynamodbav:"ns"`
	Name      string   `dynamodbav:"name"`
	View      bool     `dynamodbav:"view,omitempty"`
	Holds     []string `dynamodbav:"holds"`
	Metadata  string   `dynamodbav:"metadata"`
	Protected string   `dynamodbav:"protected,omitempty"`
}

// SweepReport is the newest inventory report of a bucket.
type SweepReport struct {
	Bucket   string `dynamodbav:"bucket"`
	Manifest string `dynamodbav:"manifest"` // s3:// URI of manifest.json
	At       string `dynamodbav:"at"`       // when it was recorded
}

func sweepChunkKey(job string, n int) (string, string) {
	return "SWEEP#" + job, fmt.Sprintf("C#%06d", n)
}
func sweepDirKey(job string, n int) (string, string) { return "SWEEP#" + job, fmt.Sprintf("D#%06d", n) }
func reportKey(bucket string) (string, string)       { return "REPORT#" + bucket, "LATEST" }

// PutSweepChunk records a working file (idempotent: a retried step writes
// the same number again).
func (s *Store) PutSweepChunk(ctx context.Context, job string, c SweepChunk) error {
	pk, sk := sweepChunkKey(job, c.Number)
	return s.put(ctx, c, pk, sk)
}

// SweepChunks returns a sweep's working files below number n, in order.
func (s *Store) SweepChunks(ctx context.Context, job string, n int) ([]SweepChunk, error) {
	pk, _ := sweepChunkKey(job, 0)
	var out []SweepChunk
	token := ""
	for {
		items, next, err := s.query(ctx, pk, "C#", token, 0)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var c SweepChunk
			if err := unmarshal(it, &c); err != nil {
				return nil, err
			}
			if c.Number < n {
				out = append(out, c)
			}
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// PutSweepTables records the n-th page of a sweep's tables.
func (s *Store) PutSweepTables(ctx context.Context, job string, n int, tables []SweepTable) error {
	pk, sk := sweepDirKey(job, n)
	return s.put(ctx, struct {
		Tables []SweepTable `dynamodbav:"tables"`
	}{tables}, pk, sk)
}

// SweepTables reads the n-th page of a sweep's tables.
func (s *Store) SweepTables(ctx context.Context, job string, n int) ([]SweepTable, error) {
	pk, sk := sweepDirKey(job, n)
	var page struct {
		Tables []SweepTable `dynamodbav:"tables"`
	}
	err := s.get(ctx, pk, sk, &page)
	return page.Tables, err
}

// PutReport remembers the newest inventory report of a bucket.
func (s *Store) PutReport(ctx context.Context, r SweepReport) error {
	r.At = now()
	pk, sk := reportKey(r.Bucket)
	return s.put(ctx, r, pk, sk)
}

// LatestReport is the newest inventory report recorded for a bucket;
// ErrNotFound when none was.
func (s *Store) LatestReport(ctx context.Context, bucket string) (SweepReport, error) {
	var r SweepReport
	pk, sk := reportKey(bucket)
	err := s.get(ctx, pk, sk, &r)
	return r, err
}

// Claimed is a claimed prefix of a bucket and its owner.
type Claimed struct {
	Prefix string
	Owner  Owner
}

// ClaimsIn returns every claim in a bucket (one query of the ownership
// index's partition for the bucket), in prefix order.
func (s *Store) ClaimsIn(ctx context.Context, bucket string) ([]Claimed, error) {
	pk, _ := locKey(bucket, "")
	var out []Claimed
	token := ""
	for {
		items, next, err := s.query(ctx, pk, "P#", token, 0)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var c struct {
				locItem
				SK string `dynamodbav:"sk"`
			}
			if err := unmarshal(it, &c); err != nil {
				return nil, err
			}
			if c.ID != "" {
				out = append(out, Claimed{Prefix: strings.TrimPrefix(c.SK, "P#"), Owner: c.Owner})
			}
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

func (s *Store) put(ctx context.Context, v any, pk, sk string) error {
	item, err := withKey(v, pk, sk)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	return err
}
