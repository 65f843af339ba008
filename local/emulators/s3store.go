package emulators

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// S3Store keeps the embedded S3's buckets, object versions and multipart
// uploads: in memory, or on disk (a journal of every change, fsynced before
// the change is answered, and one file per object version named by a
// random id, never by its key: a key is literal, `a/../b` included). The
// HTTP handler (S3) and Go callers (benchmarks, the inventory writer) use
// the same methods.
type S3Store struct {
	mu      sync.RWMutex
	buckets map[string]*s3Bucket
	uploads map[string]*s3Upload
	blobs   s3Blobs
	journal *s3Journal // nil in memory
	now     func() time.Time
}

type s3Bucket struct {
	name       string
	created    time.Time
	versioning string // "", VersioningEnabled, VersioningSuspended
	keys       keyIndex
	versions   int // versions and delete markers
}

type s3Object struct {
	key      string
	versions []*s3Version // newest first
}

type s3Version struct {
	id       string
	marker   bool
	etag     string
	size     int64
	modified time.Time
	meta     map[string]string
	blob     string
}

// Bucket versioning states (GetBucketVersioning's Status; "" for a bucket
// that never had versioning).
const (
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// NullVersion is the version id of an object written while a bucket was
// unversioned or suspended.
const NullVersion = "null"

// S3Error is an error S3 answers: its HTTP status, code and message.
// errors.Is matches by code.
type S3Error struct {
	Status        int
	Code, Message string
}

func (e *S3Error) Error() string { return e.Code + ": " + e.Message }

func (e *S3Error) Is(target error) bool {
	t, ok := target.(*S3Error)
	return ok && t.Code == e.Code
}

func s3Err(status int, code, msg string) *S3Error { return &S3Error{status, code, msg} }

// The S3 errors the store answers.
var (
	ErrNoSuchBucket       = s3Err(http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist")
	ErrNoSuchKey          = s3Err(http.StatusNotFound, "NoSuchKey", "The specified key does not exist.")
	ErrNoSuchVersion      = s3Err(http.StatusNotFound, "NoSuchVersion", "The specified version does not exist.")
	ErrNoSuchUpload       = s3Err(http.StatusNotFound, "NoSuchUpload", "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.")
	ErrPreconditionFailed = s3Err(http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	ErrBucketNotEmpty     = s3Err(http.StatusConflict, "BucketNotEmpty", "The bucket you tried to delete is not empty")
	ErrBucketOwned        = s3Err(http.StatusConflict, "BucketAlreadyOwnedByYou", "Your previous request to create the named bucket succeeded and you already own it.")
	ErrDeleteMarker       = s3Err(http.StatusMethodNotAllowed, "MethodNotAllowed", "The specified method is not allowed against this resource.")
	ErrInvalidBucketName  = s3Err(http.StatusBadRequest, "InvalidBucketName", "The specified bucket is not valid.")
	ErrKeyTooLong         = s3Err(http.StatusBadRequest, "KeyTooLongError", "Your key is too long")
	ErrInvalidKey         = s3Err(http.StatusBadRequest, "InvalidArgument", "Object keys must be UTF-8 encoded and not empty.")
	ErrInvalidVersioning  = s3Err(http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema")
)

// ObjectVersion is one version of an object, or a delete marker.
type ObjectVersion struct {
	Key          string
	VersionID    string // NullVersion for the null version
	IsLatest     bool
	DeleteMarker bool
	ETag         string // quoted, as S3 answers it
	Size         int64
	LastModified time.Time
	// Metadata: the headers stored with the object (Content-Type,
	// x-amz-meta-*, ...), canonical names.
	Metadata map[string]string
}

func (v *s3Version) view(key string, latest bool) ObjectVersion {
	return ObjectVersion{Key: key, VersionID: v.id, IsLatest: latest, DeleteMarker: v.marker, ETag: v.etag,
		Size: v.size, LastModified: v.modified, Metadata: v.meta}
}

// OpenS3Store opens the store kept in dir ("" keeps it in memory).
func OpenS3Store(dir string) (*S3Store, error) {
	s := &S3Store{buckets: map[string]*s3Bucket{}, uploads: map[string]*s3Upload{}, now: time.Now}
	if dir == "" {
		s.blobs = newMemBlobs()
		return s, nil
	}
	return openDiskStore(s, dir)
}

// Close releases the journal (a disk store).
func (s *S3Store) Close() error {
	if s.journal == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.journal.close()
}

// SetClock sets the clock that stamps what the store writes (objects'
// LastModified, versions' order in time): tests age objects with it.
func (s *S3Store) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// mutate runs decide under the write lock and applies the records it
// returns: journaled first (a disk store), answered once fsynced; the
// blobs they free are removed after that.
func (s *S3Store) mutate(decide func() ([]s3Record, error)) error {
	s.mu.Lock()
	recs, err := decide()
	if err != nil || len(recs) == 0 {
		s.mu.Unlock()
		return err
	}
	var end int64
	if s.journal != nil {
		if end, err = s.journal.append(recs); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	var freed []string
	for _, r := range recs {
		freed = append(freed, s.apply(r)...)
	}
	compact := s.journal != nil && s.compactDue()
	s.mu.Unlock()
	if s.journal != nil {
		if err := s.journal.syncTo(end); err != nil {
			return err
		}
	}
	if compact {
		s.maybeCompact()
	}
	for _, b := range freed {
		s.blobs.remove(b)
	}
	return nil
}

// s3Record is one change, as journaled and as applied.
type s3Record struct {
	Op      string            `json:"op"` // bucket, rmbucket, versioning, put, marker, rm, upload, part, rmupload
	Bucket  string            `json:"b,omitempty"`
	Key     string            `json:"k,omitempty"`
	Version string            `json:"v,omitempty"` // version id; upload id for upload records
	Status  string            `json:"s,omitempty"`
	Blob    string            `json:"blob,omitempty"`
	ETag    string            `json:"e,omitempty"`
	Size    int64             `json:"n,omitempty"`
	Part    int               `json:"p,omitempty"`
	Time    int64             `json:"t,omitempty"` // Unix nanoseconds
	Meta    map[string]string `json:"m,omitempty"`
}

// apply changes the state by one record and returns the blobs it no
// longer references.
func (s *S3Store) apply(r s3Record) []string {
	switch r.Op {
	case "bucket":
		s.buckets[r.Bucket] = &s3Bucket{name: r.Bucket, created: time.Unix(0, r.Time).UTC()}
	case "rmbucket":
		delete(s.buckets, r.Bucket)
	case "versioning":
		if b := s.buckets[r.Bucket]; b != nil {
			b.versioning = r.Status
		}
	case "put", "marker":
		b := s.buckets[r.Bucket]
		if b == nil {
			return nil
		}
		o := b.keys.get(r.Key)
		if o == nil {
			o = &s3Object{key: r.Key}
			b.keys.put(o)
		}
		var freed []string
		if r.Version == NullVersion {
			freed = b.removeVersion(o, NullVersion)
			if len(o.versions) == 0 && b.keys.get(r.Key) == nil {
				b.keys.put(o)
			}
		}
		v := &s3Version{id: r.Version, marker: r.Op == "marker", etag: r.ETag, size: r.Size,
			modified: time.Unix(0, r.Time).UTC(), meta: r.Meta, blob: r.Blob}
		o.versions = slices.Insert(o.versions, 0, v)
		b.versions++
		return freed
	case "rm":
		b := s.buckets[r.Bucket]
		if b == nil {
			return nil
		}
		if o := b.keys.get(r.Key); o != nil {
			return b.removeVersion(o, r.Version)
		}
	default:
		return s.applyUpload(r)
	}
	return nil
}

// removeVersion drops a version of o (and o, once it has none).
func (b *s3Bucket) removeVersion(o *s3Object, id string) []string {
	i := slices.IndexFunc(o.versions, func(v *s3Version) bool { return v.id == id })
	if i < 0 {
		return nil
	}
	v := o.versions[i]
	o.versions = slices.Delete(o.versions, i, i+1)
	b.versions--
	if len(o.versions) == 0 {
		b.keys.remove(o.key)
	}
	if v.blob == "" {
		return nil
	}
	return []string{v.blob}
}

func (s *S3Store) bucket(name string) (*s3Bucket, error) {
	b := s.buckets[name]
	if b == nil {
		return nil, ErrNoSuchBucket
	}
	return b, nil
}

var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// CreateBucket creates a bucket (ErrBucketOwned if it exists).
func (s *S3Store) CreateBucket(name string) error {
	if !bucketName.MatchString(name) || strings.Contains(name, "..") {
		return ErrInvalidBucketName
	}
	return s.mutate(func() ([]s3Record, error) {
		if s.buckets[name] != nil {
			return nil, ErrBucketOwned
		}
		return []s3Record{{Op: "bucket", Bucket: name, Time: s.now().UnixNano()}}, nil
	})
}

// DeleteBucket deletes an empty bucket (no version, no delete marker, no
// upload in progress).
func (s *S3Store) DeleteBucket(name string) error {
	return s.mutate(func() ([]s3Record, error) {
		b, err := s.bucket(name)
		if err != nil {
			return nil, err
		}
		if b.versions > 0 || s.bucketHasUploads(name) {
			return nil, ErrBucketNotEmpty
		}
		return []s3Record{{Op: "rmbucket", Bucket: name}}, nil
	})
}

// BucketInfo names a bucket and when it was created.
type BucketInfo struct {
	Name    string
	Created time.Time
}

// Buckets lists the buckets by name.
func (s *S3Store) Buckets() []BucketInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]BucketInfo, 0, len(s.buckets))
	for _, b := range s.buckets {
		out = append(out, BucketInfo{b.name, b.created})
	}
	slices.SortFunc(out, func(a, b BucketInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// BucketExists reports whether a bucket exists.
func (s *S3Store) BucketExists(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.buckets[name] != nil
}

// SetVersioning sets a bucket's versioning: VersioningEnabled or
// VersioningSuspended (a bucket never goes back to unversioned).
func (s *S3Store) SetVersioning(bucket, status string) error {
	if status != VersioningEnabled && status != VersioningSuspended {
		return ErrInvalidVersioning
	}
	return s.mutate(func() ([]s3Record, error) {
		b, err := s.bucket(bucket)
		if err != nil || b.versioning == status {
			return nil, err
		}
		return []s3Record{{Op: "versioning", Bucket: bucket, Status: status}}, nil
	})
}

// Versioning is a bucket's versioning status ("" if never set).
func (s *S3Store) Versioning(bucket string) (string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, err := s.bucket(bucket)
	if err != nil {
		return "", err
	}
	return b.versioning, nil
}

// checkKey refuses keys S3 refuses: empty, longer than 1,024 bytes, or not
// UTF-8. Every other byte sequence is a key, kept literally.
func checkKey(key string) error {
	switch {
	case len(key) > 1024:
		return ErrKeyTooLong
	case key == "" || !utf8.ValidString(key):
		return ErrInvalidKey
	}
	return nil
}

// PutOptions are a PutObject's metadata and conditions.
type PutOptions struct {
	// Metadata is stored and answered with the object (canonical header
	// names: Content-Type, X-Amz-Meta-*, ...).
	Metadata map[string]string
	// IfNoneMatch "*": only if the key has no current object
	// (ErrPreconditionFailed otherwise).
	IfNoneMatch string
	// IfMatch: only if the current object's ETag is this one
	// (ErrPreconditionFailed; ErrNoSuchKey when there is none).
	IfMatch string
}

// PutObject stores body as the key's new current version (a new version
// in a versioning-enabled bucket, the null version otherwise). A read
// error of body stores nothing.
func (s *S3Store) PutObject(bucket, key string, body io.Reader, o PutOptions) (ObjectVersion, error) {
	if err := checkKey(key); err != nil {
		return ObjectVersion{}, err
	}
	if !s.BucketExists(bucket) {
		return ObjectVersion{}, ErrNoSuchBucket
	}
	blob, size, sum, err := s.blobs.write(body)
	if err != nil {
		return ObjectVersion{}, err
	}
	etag := `"` + fmt.Sprintf("%x", sum) + `"`
	out, err := s.commitObject(bucket, key, blob, etag, size, o)
	if err != nil {
		s.blobs.remove(blob)
	}
	return out, err
}

// commitObject makes a stored blob the key's current version, if o's
// conditions hold.
func (s *S3Store) commitObject(bucket, key, blob, etag string, size int64, o PutOptions) (ObjectVersion, error) {
	var out ObjectVersion
	err := s.mutate(func() ([]s3Record, error) {
		b, err := s.bucket(bucket)
		if err != nil {
			return nil, err
		}
		if err := checkConditions(b.keys.get(key), o); err != nil {
			return nil, err
		}
		r := s3Record{Op: "put", Bucket: bucket, Key: key, Version: b.newVersionID(), Blob: blob, ETag: etag,
			Size: size, Time: s.now().UnixNano(), Meta: o.Metadata}
		out = ObjectVersion{Key: key, VersionID: r.Version, IsLatest: true, ETag: etag, Size: size,
			LastModified: time.Unix(0, r.Time).UTC(), Metadata: o.Metadata}
		return []s3Record{r}, nil
	})
	return out, err
}

func checkConditions(o *s3Object, p PutOptions) error {
	exists := o != nil && !o.versions[0].marker
	if p.IfNoneMatch != "" && exists {
		return ErrPreconditionFailed
	}
	if p.IfMatch != "" {
		if !exists {
			return ErrNoSuchKey
		}
		if p.IfMatch != "*" && strings.Trim(p.IfMatch, `"`) != strings.Trim(o.versions[0].etag, `"`) {
			return ErrPreconditionFailed
		}
	}
	return nil
}

// newVersionID is the id of a version written now: a new one while
// versioning is enabled, else the null version.
func (b *s3Bucket) newVersionID() string {
	if b.versioning != VersioningEnabled {
		return NullVersion
	}
	return newVersionID()
}

func newVersionID() string {
	var r [24]byte
	_, _ = rand.Read(r[:])
	return base64.RawURLEncoding.EncodeToString(r[:])
}

// find is a key's version (the current one for ""), or the error S3
// answers: ErrNoSuchKey (with the delete marker's view when the current
// version is one), ErrNoSuchVersion, ErrDeleteMarker (a version id that
// names a delete marker).
func (s *S3Store) find(bucket, key, versionID string) (*s3Version, ObjectVersion, error) {
	b, err := s.bucket(bucket)
	if err != nil {
		return nil, ObjectVersion{}, err
	}
	o := b.keys.get(key)
	if versionID == "" {
		if o == nil {
			return nil, ObjectVersion{}, ErrNoSuchKey
		}
		v := o.versions[0]
		if v.marker {
			return nil, v.view(key, true), ErrNoSuchKey
		}
		return v, v.view(key, true), nil
	}
	if o != nil {
		for i, v := range o.versions {
			if v.id != versionID {
				continue
			}
			if v.marker {
				return nil, v.view(key, i == 0), ErrDeleteMarker
			}
			return v, v.view(key, i == 0), nil
		}
	}
	return nil, ObjectVersion{}, ErrNoSuchVersion
}

// HeadObject is a version of a key (its current one for versionID "").
// On ErrNoSuchKey and ErrDeleteMarker the version is the delete marker's
// when one is the reason.
func (s *S3Store) HeadObject(bucket, key, versionID string) (ObjectVersion, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, out, err := s.find(bucket, key, versionID)
	return out, err
}

// GetObject is HeadObject with the version's content (close it).
func (s *S3Store) GetObject(bucket, key, versionID string) (ObjectVersion, io.ReadSeekCloser, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, out, err := s.find(bucket, key, versionID)
	if err != nil {
		return out, nil, err
	}
	// Opened under the lock: a delete that frees the blob waits for it,
	// and an open file outlives its removal.
	rc, err := s.blobs.open(v.blob)
	return out, rc, err
}

// DeleteResult is what a delete did: the version it removed or the delete
// marker it added (DeleteMarker with its VersionID).
type DeleteResult struct {
	Key       string
	VersionID string // the version deleted, or the new delete marker's
	// DeleteMarker: a delete marker was added, or the version deleted
	// was one.
	DeleteMarker bool
	// MarkerAdded: the delete added a delete marker.
	MarkerAdded bool
}

// ObjectID names a key, or one version of it.
type ObjectID struct{ Key, VersionID string }

// DeleteObject deletes a key as S3 does: without a version id it removes
// the null version (unversioned) or adds a delete marker (versioning
// enabled; suspended: replacing the null version); with one, it removes
// that version for good. Deleting what does not exist succeeds.
func (s *S3Store) DeleteObject(bucket, key, versionID string) (DeleteResult, error) {
	out, err := s.DeleteObjects(bucket, []ObjectID{{key, versionID}})
	if err != nil {
		return DeleteResult{}, err
	}
	return out[0], nil
}

// DeleteObjects deletes each id as DeleteObject does, under one journal
// write.
func (s *S3Store) DeleteObjects(bucket string, ids []ObjectID) ([]DeleteResult, error) {
	out := make([]DeleteResult, len(ids))
	err := s.mutate(func() ([]s3Record, error) {
		b, err := s.bucket(bucket)
		if err != nil {
			return nil, err
		}
		var recs []s3Record
		now := s.now().UnixNano()
		// removed: versions an earlier id of this call removes (the same
		// key twice in one call).
		removed := map[ObjectID]bool{}
		for i, id := range ids {
			out[i] = DeleteResult{Key: id.Key, VersionID: id.VersionID}
			o := b.keys.get(id.Key)
			if id.VersionID != "" {
				if o == nil || removed[id] {
					continue
				}
				if j := slices.IndexFunc(o.versions, func(v *s3Version) bool { return v.id == id.VersionID }); j >= 0 {
					out[i].DeleteMarker = o.versions[j].marker
					recs = append(recs, s3Record{Op: "rm", Bucket: bucket, Key: id.Key, Version: id.VersionID})
					removed[id] = true
				}
				continue
			}
			switch b.versioning {
			case "":
				if o != nil && !removed[ObjectID{id.Key, NullVersion}] && slices.ContainsFunc(o.versions, func(v *s3Version) bool { return v.id == NullVersion }) {
					recs = append(recs, s3Record{Op: "rm", Bucket: bucket, Key: id.Key, Version: NullVersion})
					removed[ObjectID{id.Key, NullVersion}] = true
				}
			default:
				v := b.newVersionID()
				recs = append(recs, s3Record{Op: "marker", Bucket: bucket, Key: id.Key, Version: v, Time: now})
				out[i] = DeleteResult{Key: id.Key, VersionID: v, DeleteMarker: true, MarkerAdded: true}
			}
		}
		return recs, nil
	})
	return out, err
}

// ListOptions select a page of ListObjects.
type ListOptions struct {
	Prefix, Delimiter string
	// After: only keys (and common prefixes) after this one (StartAfter,
	// a continuation token, a V1 marker).
	After   string
	MaxKeys int // at most this many keys and common prefixes (0: none)
}

// ListResult is a page of current objects.
type ListResult struct {
	Objects        []ObjectVersion
	CommonPrefixes []string
	IsTruncated    bool
	// Last is the last key or common prefix of the page: where the next
	// page starts after.
	Last string
}

// ListObjects lists current objects (not delete markers) in key order.
func (s *S3Store) ListObjects(bucket string, o ListOptions) (ListResult, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, err := s.bucket(bucket)
	if err != nil {
		return ListResult{}, err
	}
	var out ListResult
	n := 0
	b.walk(o.Prefix, o.Delimiter, o.After, current, func(obj *s3Object, prefix string) bool {
		if n == o.MaxKeys {
			out.IsTruncated = true
			return false
		}
		n++
		if obj == nil {
			out.CommonPrefixes = append(out.CommonPrefixes, prefix)
			out.Last = prefix
			return true
		}
		out.Objects = append(out.Objects, obj.versions[0].view(obj.key, true))
		out.Last = obj.key
		return true
	})
	return out, nil
}

// walk calls fn with each key under prefix after after that include
// accepts, in key order, or (obj nil) with the common prefix that rolls up
// such keys at the delimiter (once, skipping the keys it rolls up, and
// never one <= after). fn returning false stops.
func (b *s3Bucket) walk(prefix, delim, after string, include func(*s3Object) bool, fn func(obj *s3Object, commonPrefix string) bool) {
	start := prefix
	if after >= start {
		start = after + "\x00"
	}
	cur := b.keys.seek(start)
	for {
		obj := cur.object()
		if obj == nil || !strings.HasPrefix(obj.key, prefix) {
			return
		}
		if delim != "" {
			if i := strings.Index(obj.key[len(prefix):], delim); i >= 0 {
				cp := obj.key[:len(prefix)+i+len(delim)]
				if cp > after && b.anyUnder(cur, cp, include) && !fn(nil, cp) {
					return
				}
				end := prefixEnd(cp)
				if end == "" {
					return
				}
				cur = b.keys.seek(end)
				continue
			}
		}
		if include(obj) && !fn(obj, "") {
			return
		}
		cur.next()
	}
}

// anyUnder reports whether a key under prefix p, from cur on, is included.
func (b *s3Bucket) anyUnder(cur cursor, p string, include func(*s3Object) bool) bool {
	for o := cur.object(); o != nil && strings.HasPrefix(o.key, p); o = cur.object() {
		if include(o) {
			return true
		}
		cur.next()
	}
	return false
}

func current(o *s3Object) bool { return !o.versions[0].marker }

func anyVersion(*s3Object) bool { return true }

// ListVersionsOptions select a page of ListObjectVersions.
type ListVersionsOptions struct {
	Prefix, Delimiter string
	// KeyMarker: start after this key; with VersionIDMarker, after that
	// version of it (the versions of the key older than it come first).
	KeyMarker, VersionIDMarker string
	MaxKeys                    int // versions, delete markers and common prefixes
}

// ListVersionsResult is a page of versions and delete markers: by key,
// newest first within a key.
type ListVersionsResult struct {
	Versions       []ObjectVersion // delete markers have DeleteMarker set
	CommonPrefixes []string
	IsTruncated    bool
	// NextKeyMarker and NextVersionIDMarker continue a truncated page.
	NextKeyMarker, NextVersionIDMarker string
}

// ListObjectVersions lists every version and delete marker.
func (s *S3Store) ListObjectVersions(bucket string, o ListVersionsOptions) (ListVersionsResult, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, err := s.bucket(bucket)
	if err != nil {
		return ListVersionsResult{}, err
	}
	var out ListVersionsResult
	n := 0
	full := func() bool {
		if n == o.MaxKeys {
			out.IsTruncated = true
			return true
		}
		n++
		return false
	}
	emit := func(obj *s3Object, from int) bool {
		for i := from; i < len(obj.versions); i++ {
			if full() {
				return false
			}
			out.Versions = append(out.Versions, obj.versions[i].view(obj.key, i == 0))
			out.NextKeyMarker, out.NextVersionIDMarker = obj.key, obj.versions[i].id
		}
		return true
	}
	after := o.KeyMarker
	if o.KeyMarker != "" && o.VersionIDMarker != "" && strings.HasPrefix(o.KeyMarker, o.Prefix) {
		// The rest of the marker key's versions first.
		if obj := b.keys.get(o.KeyMarker); obj != nil {
			if i := slices.IndexFunc(obj.versions, func(v *s3Version) bool { return v.id == o.VersionIDMarker }); i >= 0 && !emit(obj, i+1) {
				return finishVersions(out), nil
			}
		}
	}
	b.walk(o.Prefix, o.Delimiter, after, anyVersion, func(obj *s3Object, prefix string) bool {
		if obj == nil {
			if full() {
				return false
			}
			out.CommonPrefixes = append(out.CommonPrefixes, prefix)
			out.NextKeyMarker, out.NextVersionIDMarker = prefix, ""
			return true
		}
		return emit(obj, 0)
	})
	return finishVersions(out), nil
}

func finishVersions(out ListVersionsResult) ListVersionsResult {
	if !out.IsTruncated {
		out.NextKeyMarker, out.NextVersionIDMarker = "", ""
	}
	return out
}

// metaHeaders are the request headers S3 stores with an object and
// answers with it.
var metaHeaders = []string{"Content-Type", "Content-Encoding", "Content-Disposition", "Content-Language",
	"Cache-Control", "Expires", "X-Amz-Storage-Class", "X-Amz-Website-Redirect-Location"}

// metadataOf is the metadata a PUT stores: the headers above and
// x-amz-meta-* (aws-chunked, a transfer framing, is not a content encoding).
func metadataOf(h http.Header) map[string]string {
	var m map[string]string
	set := func(k, v string) {
		if m == nil {
			m = map[string]string{}
		}
		m[k] = v
	}
	for _, k := range metaHeaders {
		v := h.Get(k)
		if k == "Content-Encoding" {
			var keep []string
			for _, e := range strings.Split(v, ",") {
				if e = strings.TrimSpace(e); e != "" && e != "aws-chunked" {
					keep = append(keep, e)
				}
			}
			v = strings.Join(keep, ",")
		}
		if v != "" {
			set(k, v)
		}
	}
	for k, vs := range h {
		if strings.HasPrefix(k, "X-Amz-Meta-") && len(vs) > 0 {
			set(k, strings.Join(vs, ","))
		}
	}
	if m["Content-Type"] == "" {
		set("Content-Type", "binary/octet-stream")
	}
	return m
}

// snapshot is the state as records (compaction): buckets, then every
// version oldest first, then uploads.
func (s *S3Store) snapshot(emit func(s3Record) error) error {
	names := slices.Sorted(maps.Keys(s.buckets))
	for _, name := range names {
		b := s.buckets[name]
		if err := emit(s3Record{Op: "bucket", Bucket: name, Time: b.created.UnixNano()}); err != nil {
			return err
		}
		if b.versioning != "" {
			if err := emit(s3Record{Op: "versioning", Bucket: name, Status: b.versioning}); err != nil {
				return err
			}
		}
		var err error
		b.keys.all(func(o *s3Object) bool {
			for i := len(o.versions) - 1; i >= 0 && err == nil; i-- {
				v := o.versions[i]
				r := s3Record{Op: "put", Bucket: name, Key: o.key, Version: v.id, Blob: v.blob, ETag: v.etag,
					Size: v.size, Time: v.modified.UnixNano(), Meta: v.meta}
				if v.marker {
					r = s3Record{Op: "marker", Bucket: name, Key: o.key, Version: v.id, Time: v.modified.UnixNano()}
				}
				err = emit(r)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	ids := slices.Sorted(maps.Keys(s.uploads))
	for _, id := range ids {
		u := s.uploads[id]
		if err := emit(s3Record{Op: "upload", Bucket: u.bucket, Key: u.key, Version: id, Time: u.initiated.UnixNano(), Meta: u.meta}); err != nil {
			return err
		}
		parts := slices.Sorted(maps.Keys(u.parts))
		for _, n := range parts {
			p := u.parts[n]
			if err := emit(s3Record{Op: "part", Version: id, Part: n, Blob: p.blob, ETag: p.etag, Size: p.size, Time: p.modified.UnixNano()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// referenced is every blob the state refers to.
func (s *S3Store) referenced() map[string]bool {
	refs := map[string]bool{}
	for _, b := range s.buckets {
		b.keys.all(func(o *s3Object) bool {
			for _, v := range o.versions {
				if v.blob != "" {
					refs[v.blob] = true
				}
			}
			return true
		})
	}
	for _, u := range s.uploads {
		for _, p := range u.parts {
			refs[p.blob] = true
		}
	}
	return refs
}

// live counts the records a compacted journal would hold.
func (s *S3Store) live() int {
	n := 0
	for _, b := range s.buckets {
		n += 2 + b.versions
	}
	for _, u := range s.uploads {
		n += 1 + len(u.parts)
	}
	return n
}

// sortedUploads is the uploads of a bucket under prefix, by key then
// initiation.
func (s *S3Store) sortedUploads(bucket, prefix string) []*s3Upload {
	var out []*s3Upload
	for _, u := range s.uploads {
		if u.bucket == bucket && strings.HasPrefix(u.key, prefix) {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].key != out[j].key {
			return out[i].key < out[j].key
		}
		return out[i].initiated.Before(out[j].initiated) || (out[i].initiated.Equal(out[j].initiated) && out[i].id < out[j].id)
	})
	return out
}

var errStoreClosed = errors.New("s3 store closed")
