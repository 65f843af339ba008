package emulators

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Multipart uploads: parts are blobs of their own until the upload
// completes into one object (journaled like objects: an upload survives a
// restart).

type s3Upload struct {
	id, bucket, key string
	initiated       time.Time
	meta            map[string]string
	parts           map[int]*s3Part
}

type s3Part struct {
	blob, etag string
	size       int64
	modified   time.Time
}

// The multipart errors S3 answers.
var (
	ErrInvalidPart      = s3Err(http.StatusBadRequest, "InvalidPart", "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have matched the part's entity tag.")
	ErrInvalidPartOrder = s3Err(http.StatusBadRequest, "InvalidPartOrder", "The list of parts was not in ascending order. The parts list must be specified in order by part number.")
	ErrEntityTooSmall   = s3Err(http.StatusBadRequest, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed object size.")
	ErrMalformedXML     = s3Err(http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema")
)

// MinPartSize is the least size of every part but the last.
const MinPartSize = 5 << 20

func (s *S3Store) applyUpload(r s3Record) []string {
	switch r.Op {
	case "upload":
		s.uploads[r.Version] = &s3Upload{id: r.Version, bucket: r.Bucket, key: r.Key,
			initiated: time.Unix(0, r.Time).UTC(), meta: r.Meta, parts: map[int]*s3Part{}}
	case "part":
		u := s.uploads[r.Version]
		if u == nil {
			return []string{r.Blob}
		}
		old := u.parts[r.Part]
		u.parts[r.Part] = &s3Part{blob: r.Blob, etag: r.ETag, size: r.Size, modified: time.Unix(0, r.Time).UTC()}
		if old != nil {
			return []string{old.blob}
		}
	case "rmupload":
		u := s.uploads[r.Version]
		if u == nil {
			return nil
		}
		delete(s.uploads, r.Version)
		var freed []string
		for _, p := range u.parts {
			freed = append(freed, p.blob)
		}
		return freed
	}
	return nil
}

func (s *S3Store) bucketHasUploads(bucket string) bool {
	for _, u := range s.uploads {
		if u.bucket == bucket {
			return true
		}
	}
	return false
}

// upload is an upload in progress of bucket/key.
func (s *S3Store) upload(bucket, key, id string) (*s3Upload, error) {
	if _, err := s.bucket(bucket); err != nil {
		return nil, err
	}
	u := s.uploads[id]
	if u == nil || u.bucket != bucket || u.key != key {
		return nil, ErrNoSuchUpload
	}
	return u, nil
}

// CreateMultipartUpload starts an upload and returns its id.
func (s *S3Store) CreateMultipartUpload(bucket, key string, meta map[string]string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	id := newVersionID()
	err := s.mutate(func() ([]s3Record, error) {
		if _, err := s.bucket(bucket); err != nil {
			return nil, err
		}
		return []s3Record{{Op: "upload", Bucket: bucket, Key: key, Version: id, Time: s.now().UnixNano(), Meta: meta}}, nil
	})
	return id, err
}

// UploadPart stores part n (1-10,000) of an upload and returns its ETag.
func (s *S3Store) UploadPart(bucket, key, id string, n int, body io.Reader) (string, error) {
	s.mu.RLock()
	_, err := s.upload(bucket, key, id)
	s.mu.RUnlock()
	if err != nil {
		return "", err
	}
	blob, size, sum, err := s.blobs.write(body)
	if err != nil {
		return "", err
	}
	etag := `"` + hex.EncodeToString(sum) + `"`
	err = s.mutate(func() ([]s3Record, error) {
		if _, err := s.upload(bucket, key, id); err != nil {
			return nil, err
		}
		return []s3Record{{Op: "part", Version: id, Part: n, Blob: blob, ETag: etag, Size: size, Time: s.now().UnixNano()}}, nil
	})
	if err != nil {
		s.blobs.remove(blob)
	}
	return etag, err
}

// CompletedPart names a part of a completion request.
type CompletedPart struct {
	PartNumber int
	ETag       string
}

// CompleteMultipartUpload joins the named parts into the key's new current
// version (if o's conditions hold) and ends the upload.
func (s *S3Store) CompleteMultipartUpload(bucket, key, id string, parts []CompletedPart, o PutOptions) (ObjectVersion, error) {
	s.mu.RLock()
	u, err := s.upload(bucket, key, id)
	if err == nil && len(parts) == 0 {
		err = ErrMalformedXML
	}
	var readers []io.Reader
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	sums := md5.New()
	if err == nil {
		for i, p := range parts {
			if i > 0 && p.PartNumber <= parts[i-1].PartNumber {
				err = ErrInvalidPartOrder
				break
			}
			have := u.parts[p.PartNumber]
			if have == nil || strings.Trim(p.ETag, `"`) != strings.Trim(have.etag, `"`) {
				err = ErrInvalidPart
				break
			}
			if i < len(parts)-1 && have.size < MinPartSize {
				err = ErrEntityTooSmall
				break
			}
			raw, _ := hex.DecodeString(strings.Trim(have.etag, `"`))
			sums.Write(raw)
			rc, oerr := s.blobs.open(have.blob)
			if oerr != nil {
				err = oerr
				break
			}
			closers = append(closers, rc)
			readers = append(readers, rc)
		}
	}
	meta := map[string]string(nil)
	if u != nil {
		meta = u.meta
	}
	s.mu.RUnlock()
	if err != nil {
		return ObjectVersion{}, err
	}
	blob, size, _, err := s.blobs.write(io.MultiReader(readers...))
	if err != nil {
		return ObjectVersion{}, err
	}
	etag := fmt.Sprintf(`"%x-%d"`, sums.Sum(nil), len(parts))
	var out ObjectVersion
	err = s.mutate(func() ([]s3Record, error) {
		b, err := s.bucket(bucket)
		if err != nil {
			return nil, err
		}
		if _, err := s.upload(bucket, key, id); err != nil {
			return nil, err
		}
		if err := checkConditions(b.keys.get(key), o); err != nil {
			return nil, err
		}
		r := s3Record{Op: "put", Bucket: bucket, Key: key, Version: b.newVersionID(), Blob: blob, ETag: etag,
			Size: size, Time: s.now().UnixNano(), Meta: meta}
		out = ObjectVersion{Key: key, VersionID: r.Version, IsLatest: true, ETag: etag, Size: size,
			LastModified: time.Unix(0, r.Time).UTC(), Metadata: meta}
		return []s3Record{r, {Op: "rmupload", Version: id}}, nil
	})
	if err != nil {
		s.blobs.remove(blob)
	}
	return out, err
}

// AbortMultipartUpload ends an upload and frees its parts.
func (s *S3Store) AbortMultipartUpload(bucket, key, id string) error {
	return s.mutate(func() ([]s3Record, error) {
		if _, err := s.upload(bucket, key, id); err != nil {
			return nil, err
		}
		return []s3Record{{Op: "rmupload", Version: id}}, nil
	})
}

// PartInfo is an uploaded part.
type PartInfo struct {
	PartNumber   int
	ETag         string
	Size         int64
	LastModified time.Time
}

// ListParts lists an upload's parts after marker, at most max.
func (s *S3Store) ListParts(bucket, key, id string, marker, max int) (parts []PartInfo, truncated bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	u, err := s.upload(bucket, key, id)
	if err != nil {
		return nil, false, err
	}
	for _, n := range slices.Sorted(maps.Keys(u.parts)) {
		if n <= marker {
			continue
		}
		if len(parts) == max {
			return parts, true, nil
		}
		p := u.parts[n]
		parts = append(parts, PartInfo{n, p.etag, p.size, p.modified})
	}
	return parts, false, nil
}

// UploadInfo is an upload in progress.
type UploadInfo struct {
	Key, UploadID string
	Initiated     time.Time
}

// ListMultipartUploads lists a bucket's uploads under prefix, by key then
// initiation, after (keyMarker, uploadIDMarker), at most max.
func (s *S3Store) ListMultipartUploads(bucket, prefix, keyMarker, uploadIDMarker string, max int) (ups []UploadInfo, truncated bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, err := s.bucket(bucket); err != nil {
		return nil, false, err
	}
	all := s.sortedUploads(bucket, prefix)
	skipping := uploadIDMarker != ""
	for _, u := range all {
		if u.key < keyMarker || (u.key == keyMarker && uploadIDMarker == "") {
			continue
		}
		if skipping && u.key == keyMarker {
			if u.id == uploadIDMarker {
				skipping = false
			}
			continue
		}
		if len(ups) == max {
			return ups, true, nil
		}
		ups = append(ups, UploadInfo{u.key, u.id, u.initiated})
	}
	return ups, false, nil
}
