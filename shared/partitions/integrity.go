package partitions

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/store"
)

// Files intact, and repair (SPEC §2, the bucket enforces the lifecycle).
// Engines write the bucket directly: with write keys an engine can
// overwrite or delete a committed file (the versioned warehouse keeps the
// prior version). Verify's files-intact check names every file a retained
// snapshot references (metadata files, statistics, manifest lists,
// manifests, data and delete files) whose current object is missing, or
// differs from what the metadata records: its size (a manifest's
// file_size_in_bytes in the manifest list, a data or delete file's
// file_size_in_bytes in its manifest, a statistics file's size), or, where
// no size is recorded (manifest lists, metadata files), it no longer reads
// as one. Repair copies back, as the current object, the newest prior
// version of each that matches; it changes nothing when nothing is wrong,
// and nothing at all when one of them has no such version (409 naming it).
//
// The current objects come from listing the prefixes the table owns (1000
// a request); a file outside them is asked for alone (HeadObject).

// CheckFiles is the check's name.
const CheckFiles = "files-intact"

// EventTableRepaired is the event a repair that restored files records.
const EventTableRepaired = "TableRepaired"

// maxDamaged bounds the files a check names (and a repair restores at once).
const maxDamaged = 1000

// ErrUnrepairable: a damaged file has no prior version that matches.
var ErrUnrepairable = errors.New("files cannot be restored")

// Storage is what the files check and repair ask of S3.
type Storage interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, optFns ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	CopyObject(ctx context.Context, in *s3.CopyObjectInput, optFns ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
}

// What a referenced file is (a size of -1: none recorded).
const (
	fileMetadata     = "metadata file"
	fileStatistics   = "statistics file"
	fileManifestList = "manifest list"
	fileManifest     = "manifest"
	fileData         = "data file"
	fileDeletes      = "delete file"
)

// reference is a file the table's metadata names.
type reference struct {
	path string
	size int64
	what string
	// unreadable: reading it as what it is failed.
	unreadable bool
}

// damage is a referenced file whose current object does not match.
type damage struct {
	reference
	got int64 // -1: missing
}

func (d damage) String() string {
	switch {
	case d.got < 0:
		return fmt.Sprintf("%s (%s): missing", d.path, d.what)
	case d.size >= 0 && d.got != d.size:
		return fmt.Sprintf("%s (%s): %d bytes, the metadata records %d", d.path, d.what, d.got, d.size)
	}
	return fmt.Sprintf("%s (%s): unreadable", d.path, d.what)
}

// references lists every file the metadata names, each once; a manifest
// list or manifest that cannot be read is itself a reference marked
// unreadable (what it would name is then unknown).
func (s *Service) references(ctx context.Context, metadataLocation string, meta table.Metadata, fs icebergio.IO) ([]reference, error) {
	var mu sync.Mutex
	seen := map[string]int{}
	var refs []reference
	add := func(r reference) {
		mu.Lock()
		defer mu.Unlock()
		if i, ok := seen[r.path]; ok {
			refs[i].unreadable = refs[i].unreadable || r.unreadable
			return
		}
		seen[r.path] = len(refs)
		refs = append(refs, r)
	}
	add(reference{path: metadataLocation, size: -1, what: fileMetadata})
	for e := range meta.PreviousFiles() {
		add(reference{path: e.MetadataFile, size: -1, what: fileMetadata})
	}
	for st := range meta.Statistics() {
		add(reference{path: st.StatisticsPath, size: st.FileSizeInBytes, what: fileStatistics})
	}
	for st := range meta.PartitionStatistics() {
		add(reference{path: st.StatisticsPath, size: st.FileSizeInBytes, what: fileStatistics})
	}
	var manifests []iceberg.ManifestFile
	listed := map[string]bool{}
	for _, sn := range meta.Snapshots() {
		if sn.ManifestList == "" {
			continue
		}
		list, err := sn.Manifests(fs)
		add(reference{path: sn.ManifestList, size: -1, what: fileManifestList, unreadable: err != nil})
		for _, m := range list {
			if !listed[m.FilePath()] {
				listed[m.FilePath()] = true
				manifests = append(manifests, m)
			}
		}
	}
	if len(manifests) > MaxVerifyManifests {
		return nil, fmt.Errorf("%d manifests, more than verify reads (%d)", len(manifests), MaxVerifyManifests)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.workers())
	for _, m := range manifests {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			ok := true
			for e, err := range m.Entries(fs, false) {
				if err != nil {
					ok = false
					break
				}
				if e.Status() == iceberg.EntryStatusDELETED {
					continue // gone in this snapshot: an earlier one names it live
				}
				what := fileData
				if e.DataFile().ContentType() != iceberg.EntryContentData {
					what = fileDeletes
				}
				add(reference{path: e.DataFile().FilePath(), size: e.DataFile().FileSizeBytes(), what: what})
			}
			add(reference{path: m.FilePath(), size: m.Length(), what: fileManifest, unreadable: !ok})
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].path < refs[j].path })
	return refs, nil
}

// currentSizes lists the current objects under the prefixes, by URI.
func (s *Service) currentSizes(ctx context.Context, prefixes []objects.Location) (map[string]int64, error) {
	sizes := map[string]int64{}
	for _, p := range prefixes {
		pg := s3.NewListObjectsV2Paginator(s.Storage, &s3.ListObjectsV2Input{Bucket: aws.String(p.Bucket), Prefix: aws.String(p.Key + "/")})
		for pg.HasMorePages() {
			page, err := pg.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("list s3://%s/%s/: %w", p.Bucket, p.Key, err)
			}
			for _, o := range page.Contents {
				sizes[objects.Location{Bucket: p.Bucket, Key: aws.ToString(o.Key)}.URI()] = aws.ToInt64(o.Size)
			}
		}
	}
	return sizes, nil
}

// ownedPrefixes are the prefixes a table owns (its metadata's location
// when it holds no claim).
func ownedPrefixes(entry store.TableEntry, meta table.Metadata) ([]objects.Location, error) {
	owned := []string{meta.Location()}
	if hs := entry.Holds(); len(hs) > 0 {
		owned = owned[:0]
		for _, h := range hs {
			if h.Prefix != "" {
				owned = append(owned, h.URI())
			}
		}
	}
	var out []objects.Location
	for _, o := range owned {
		l, err := objects.Prefix(o)
		if err != nil {
			return nil, fmt.Errorf("location %s: %w", o, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// damaged compares the references with the current objects.
func (s *Service) damaged(ctx context.Context, entry store.TableEntry, meta table.Metadata, fs icebergio.IO) ([]damage, error) {
	refs, err := s.references(ctx, entry.MetadataLocation, meta, fs)
	if err != nil {
		return nil, err
	}
	prefixes, err := ownedPrefixes(entry, meta)
	if err != nil {
		return nil, err
	}
	sizes, err := s.currentSizes(ctx, prefixes)
	if err != nil {
		return nil, err
	}
	var out []damage
	for _, r := range refs {
		// The listing names s3://; the metadata may say s3a:// or s3n://.
		uri := r.path
		if l, err := objects.Parse(r.path); err == nil {
			uri = l.URI()
		}
		got, ok := sizes[uri]
		if !ok {
			if got, err = s.headSize(ctx, r.path, prefixes); err != nil {
				return nil, err
			}
		}
		if got < 0 || r.size >= 0 && got != r.size || r.unreadable {
			out = append(out, damage{reference: r, got: got})
		}
	}
	return out, nil
}

// headSize is the size of an object outside the listed prefixes (-1:
// missing); one inside them that the listing did not see is missing.
func (s *Service) headSize(ctx context.Context, path string, listed []objects.Location) (int64, error) {
	l, err := objects.Parse(path)
	if err != nil {
		return -1, nil
	}
	for _, p := range listed {
		if p.Contains(l) {
			return -1, nil
		}
	}
	out, err := s.Storage.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(l.Key)})
	if isMissing(err) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("head %s: %w", path, err)
	}
	return aws.ToInt64(out.ContentLength), nil
}

func isMissing(err error) bool {
	switch code(err) {
	case "NotFound", "NoSuchKey", "NoSuchVersion":
		return true
	}
	return false
}

// code is an S3 error's code ("" for none).
func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// checkFiles is verify's files-intact check.
func (s *Service) checkFiles(ctx context.Context, entry store.TableEntry, meta table.Metadata, fs icebergio.IO) Check {
	c := Check{Name: CheckFiles}
	if s.Storage == nil {
		c.OK, c.Detail = true, "not checked: this deployment gives verify no S3 listing"
		return c
	}
	bad, err := s.damaged(ctx, entry, meta, fs)
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	c.Violations = int64(len(bad))
	for _, d := range bad[:min(len(bad), maxDamaged)] {
		c.Examples = append(c.Examples, d.String())
	}
	c.Incomplete = len(bad) > maxDamaged
	c.OK = len(bad) == 0
	c.Detail = "every file the retained snapshots reference is there, as the metadata records it"
	if !c.OK {
		c.Detail = fmt.Sprintf("%d referenced files are missing or changed: repair restores their prior versions", len(bad))
	}
	return c
}

// Restored is one file a repair copied back.
type Restored struct {
	Path      string `json:"path"`
	What      string `json:"kind"`
	VersionID string `json:"version-id"`
	Size      int64  `json:"size"`
}

// RepairReport is the answer of repair.
type RepairReport struct {
	TableUUID string     `json:"table-uuid"`
	Restored  []Restored `json:"restored"`
}

// Repair restores every damaged file of a table from its newest prior
// version that matches. Nothing damaged: nothing changes. A damaged file
// without such a version: ErrUnrepairable naming it, and nothing of its
// round changes (files restored by an earlier round, a manifest list or
// manifest whose names the next round needed, stay restored: they are
// what the metadata records).
func (s *Service) Repair(ctx context.Context, cat string, id catalog.Ident) (RepairReport, error) {
	if s.Storage == nil {
		return RepairReport{}, fmt.Errorf("%w: this deployment gives repair no S3 access", ErrUnrepairable)
	}
	entry, err := s.Catalog.Entry(ctx, cat, id)
	if err != nil {
		return RepairReport{}, err
	}
	rep := RepairReport{TableUUID: entry.TableUUID, Restored: []Restored{}}
	meta, err := s.Catalog.ReadMetadata(ctx, entry.MetadataLocation)
	if err != nil {
		// The current metadata file itself: restore it first.
		r, rerr := s.restore(ctx, damage{reference: reference{path: entry.MetadataLocation, size: -1, what: fileMetadata, unreadable: true}, got: 0})
		if rerr != nil {
			return rep, rerr
		}
		if err := s.copyBack(ctx, r); err != nil {
			return rep, err
		}
		rep.Restored = append(rep.Restored, r)
		if meta, err = s.Catalog.ReadMetadata(ctx, entry.MetadataLocation); err != nil {
			return rep, err
		}
	}
	fs, err := icebergio.LoadFS(ctx, s.IOProps, meta.Location())
	if err != nil {
		return rep, fmt.Errorf("file io: %w", err)
	}
	// Rounds: what a damaged manifest list or manifest names is known once
	// it is restored, so a round restores what it sees and the next looks
	// again (metadata, lists, manifests, data: four at most).
	for round := 0; round < maxRepairRounds; round++ {
		bad, err := s.damaged(ctx, entry, meta, fs)
		if err != nil {
			return rep, err
		}
		if len(bad) == 0 {
			break
		}
		// Plan the round's restores first: all of them or none.
		var plan []Restored
		var refused []string
		for _, d := range bad[:min(len(bad), maxDamaged)] {
			r, err := s.restore(ctx, d)
			switch {
			case errors.Is(err, ErrUnrepairable):
				refused = append(refused, d.String())
			case err != nil:
				return rep, err
			default:
				plan = append(plan, r)
			}
		}
		if len(refused) > 0 {
			err := fmt.Errorf("%w: no prior version matches what the metadata records: %s", ErrUnrepairable, strings.Join(refused, "; "))
			return rep, errors.Join(err, s.repaired(ctx, cat, id, entry, rep))
		}
		for _, r := range plan {
			if err := s.copyBack(ctx, r); err != nil {
				return rep, errors.Join(err, s.repaired(ctx, cat, id, entry, rep))
			}
			rep.Restored = append(rep.Restored, r)
		}
	}
	return rep, s.repaired(ctx, cat, id, entry, rep)
}

// maxRepairRounds: a metadata file, then manifest lists, manifests, and
// the data and delete files they name.
const maxRepairRounds = 4

// repaired records the TableRepaired event of what a repair restored
// (nothing restored: no event).
func (s *Service) repaired(ctx context.Context, cat string, id catalog.Ident, entry store.TableEntry, rep RepairReport) error {
	if len(rep.Restored) > 0 {
		ev := eventbus.Event{Type: EventTableRepaired, Actor: authz.Principal(ctx), Catalog: cat, Namespace: id.Namespace, Table: id.Name,
			TableUUID: entry.TableUUID, Detail: map[string]any{"restored": rep.Restored}}
		if err := s.Catalog.Store().RecordEvents(ctx, outbox.Record(ev)); err != nil {
			return fmt.Errorf("record the %s event: %w", EventTableRepaired, err)
		}
	}
	return nil
}

// restore finds the newest version of a damaged file, other than its
// current one, that matches: its recorded size, or (none recorded) that it
// reads as what it is.
func (s *Service) restore(ctx context.Context, d damage) (Restored, error) {
	l, err := objects.Parse(d.path)
	if err != nil {
		return Restored{}, fmt.Errorf("%w: %s: %v", ErrUnrepairable, d.path, err)
	}
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(l.Bucket), Prefix: aws.String(l.Key)}
	for {
		out, err := s.Storage.ListObjectVersions(ctx, in)
		if code(err) == "NotImplemented" {
			// An S3 that keeps no versions: nothing to restore from.
			return Restored{}, fmt.Errorf("%w: %s (the bucket keeps no versions)", ErrUnrepairable, d)
		}
		if err != nil {
			return Restored{}, fmt.Errorf("list the versions of %s: %w", d.path, err)
		}
		// S3 lists a key's versions newest first.
		for _, v := range out.Versions {
			if aws.ToString(v.Key) != l.Key || aws.ToBool(v.IsLatest) && d.got >= 0 {
				continue
			}
			r := Restored{Path: d.path, What: d.what, VersionID: aws.ToString(v.VersionId), Size: aws.ToInt64(v.Size)}
			if d.size >= 0 {
				if r.Size == d.size {
					return r, nil
				}
				continue
			}
			if s.reads(ctx, l, r.VersionID, d.what) {
				return r, nil
			}
		}
		if !aws.ToBool(out.IsTruncated) || aws.ToString(out.NextKeyMarker) > l.Key {
			return Restored{}, fmt.Errorf("%w: %s", ErrUnrepairable, d)
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}

// maxRepairRead bounds a version read to check it (manifest lists,
// manifests and metadata files are small beside data).
const maxRepairRead = 64 << 20

// reads reports whether a version of a file reads as what it is: a
// manifest list as one, a metadata file (plain or gzip) as table metadata.
func (s *Service) reads(ctx context.Context, l objects.Location, version, what string) bool {
	out, err := s.Storage.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(l.Key), VersionId: aws.String(version)})
	if err != nil {
		return false
	}
	defer out.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(out.Body, maxRepairRead))
	if err != nil {
		return false
	}
	switch what {
	case fileManifestList:
		_, err = iceberg.ReadManifestList(bytes.NewReader(raw))
	case fileMetadata:
		if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
			zr, zerr := gzip.NewReader(bytes.NewReader(raw))
			if zerr != nil {
				return false
			}
			if raw, err = io.ReadAll(io.LimitReader(zr, maxRepairRead)); err != nil {
				return false
			}
		}
		_, err = table.ParseMetadataBytes(raw)
	}
	return err == nil
}

// copyBack makes a version the current object again (a new version with
// its bytes: the damaged one stays as a noncurrent version).
func (s *Service) copyBack(ctx context.Context, r Restored) error {
	l, err := objects.Parse(r.Path)
	if err != nil {
		return err
	}
	src := url.PathEscape(l.Bucket+"/"+l.Key) + "?versionId=" + url.QueryEscape(r.VersionID)
	if _, err := s.Storage.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(l.Bucket), Key: aws.String(l.Key), CopySource: aws.String(src)}); err != nil {
		return fmt.Errorf("restore %s from version %s: %w", r.Path, r.VersionID, err)
	}
	return nil
}
