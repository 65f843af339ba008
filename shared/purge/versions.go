package purge

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/shared/store"
)

// Versioned warehouses (SPEC §2, the bucket enforces the lifecycle). On a
// bucket that keeps versions, a DeleteObjects of keys only adds delete
// markers: the bytes stay as noncurrent versions. Every icehold delete
// leaves nothing, versions included, and stays bulk:
//
//   - A table's (or view's) purge deletes its files by key as on an
//     unversioned bucket (batches from the manifests, the final listing,
//     the metadata layer), then prunes the prefixes it owned: it lists
//     their versions and delete markers page by page (ListObjectVersions,
//     1000 a page) and deletes each page by version id in one DeleteObjects
//     call, keeping the current metadata file for last. Requests per file:
//     the unversioned purge's, plus two listings and two deletes per 1000
//     (each file left a version and a delete marker).
//   - Files deleted one by one inside a prefix that stays (snapshot
//     expiry's, the orphan sweep's), and a purge's files outside what it
//     owned, go with deleteObjects: the versions of each key are listed
//     (one ListObjectVersions per key) and deleted by id, 1000 a call.
//
// The bucket policy lets only the delete function's role delete versions
// (infra), so these run there.

// versioningTTL is how long a bucket's versioning is cached: a bucket
// turned versioned is seen within it (its versions are then pruned by the
// next purge of their prefix at the latest).
const versioningTTL = time.Minute

type versioningState struct {
	on bool
	at time.Time
}

// versioned reports whether a bucket keeps versions: versioning Enabled,
// or Suspended (the versions made while enabled stay).
func (s *Service) versioned(ctx context.Context, bucket string) (bool, error) {
	if v, ok := s.versioning.Load(bucket); ok && time.Since(v.(versioningState).at) < versioningTTL {
		return v.(versioningState).on, nil
	}
	out, err := s.S3.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
	if err != nil {
		return false, fmt.Errorf("get the versioning of bucket %s: %w", bucket, err)
	}
	on := out.Status != ""
	s.versioning.Store(bucket, versioningState{on, time.Now()})
	return on, nil
}

// versionsPage is one page of ListObjectVersions: every version and
// delete marker, in one list.
type versionsPage struct {
	objs            []object
	latest          map[string]object // key → its current version (not a marker)
	nextKey, nextID string
	truncated       bool
}

func (s *Service) listVersions(ctx context.Context, bucket, prefix, keyMarker, idMarker string) (versionsPage, error) {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix), MaxKeys: aws.Int32(MaxKeysPerCall)}
	if keyMarker != "" {
		in.KeyMarker = aws.String(keyMarker)
		if idMarker != "" {
			in.VersionIdMarker = aws.String(idMarker)
		}
	}
	out, err := s.S3.ListObjectVersions(ctx, in)
	if err != nil {
		return versionsPage{}, fmt.Errorf("list versions %s/%s: %w", bucket, prefix, err)
	}
	p := versionsPage{latest: map[string]object{}, nextKey: aws.ToString(out.NextKeyMarker), nextID: aws.ToString(out.NextVersionIdMarker), truncated: aws.ToBool(out.IsTruncated)}
	for _, v := range out.Versions {
		o := object{key: aws.ToString(v.Key), version: aws.ToString(v.VersionId), size: aws.ToInt64(v.Size)}
		p.objs = append(p.objs, o)
		if aws.ToBool(v.IsLatest) {
			p.latest[o.key] = o
		}
	}
	for _, m := range out.DeleteMarkers {
		p.objs = append(p.objs, object{key: aws.ToString(m.Key), version: aws.ToString(m.VersionId)})
	}
	return p, nil
}

// deleteObjects deletes objects and leaves nothing of them: on an
// unversioned bucket by key (deleteKeys); on a versioned one every version
// and delete marker of each key, found by listing the key's versions, but
// for an object that names its version: that version alone goes. A
// key counts deleted when it had a current version (its size and kind as
// given), missing when it had none.
func (s *Service) deleteObjects(ctx context.Context, bucket, scope string, objs []object) (tally, error) {
	if len(objs) == 0 {
		return tally{byKind: map[string]int64{}}, nil
	}
	on, err := s.versioned(ctx, bucket)
	if err != nil || !on {
		if err != nil {
			return tally{}, err
		}
		return s.deleteKeys(ctx, bucket, scope, objs)
	}
	t := tally{byKind: map[string]int64{}}
	var versions, named []object
	seen := map[string]bool{}
	for _, o := range objs {
		if o.version != "" {
			// One version named (the storage sweep's): it alone goes.
			named = append(named, o)
			continue
		}
		if seen[o.key] {
			continue
		}
		seen[o.key] = true
		vs, live, err := s.keyVersions(ctx, bucket, o.key)
		if err != nil {
			return t, err
		}
		versions = append(versions, vs...)
		if live {
			t.deleted++
			t.bytes += o.size
			t.byKind[kindOf(o)]++
		} else {
			t.missing++
		}
	}
	if err := s.deleteVersions(ctx, bucket, scope, versions); err != nil {
		return t, err
	}
	for len(named) > 0 {
		n := min(len(named), MaxKeysPerCall)
		nt, err := s.deleteKeys(ctx, bucket, scope, named[:n])
		t.add(nt)
		if err != nil {
			return t, err
		}
		named = named[n:]
	}
	return t, nil
}

func kindOf(o object) string {
	if o.kind == "" {
		return kindMetadata
	}
	return o.kind
}

// keyVersions lists every version and delete marker of exactly one key
// (the listing's prefix also matches longer keys, which stay), and
// whether its current version is an object.
func (s *Service) keyVersions(ctx context.Context, bucket, key string) ([]object, bool, error) {
	var out []object
	live := false
	km, im := "", ""
	for {
		p, err := s.listVersions(ctx, bucket, key, km, im)
		if err != nil {
			return nil, false, err
		}
		for _, o := range p.objs {
			if o.key == key {
				out = append(out, o)
			}
		}
		if _, ok := p.latest[key]; ok {
			live = true
		}
		if !p.truncated || p.nextKey > key {
			return out, live, nil
		}
		km, im = p.nextKey, p.nextID
	}
}

// deleteVersions deletes versions by id, 1000 a call.
func (s *Service) deleteVersions(ctx context.Context, bucket, scope string, versions []object) error {
	for len(versions) > 0 {
		n := min(len(versions), MaxKeysPerCall)
		if _, err := s.deleteKeys(ctx, bucket, scope, versions[:n]); err != nil {
			return err
		}
		versions = versions[n:]
	}
	return nil
}

// pruneVersions deletes every version and delete marker under the
// prefixes a job's final listing covered (swept), but those of keep (the
// current metadata file, which goes last), at most
// finalizeChunksPerCall pages a call; it reports whether nothing else is
// left. It keeps no cursor: what it lists it deletes, so listing again from
// the start resumes it (and continues it, page after page).
func (s *Service) pruneVersions(ctx context.Context, j store.Job, keepBucket, keepKey string) (bool, error) {
	pages := 0
	for _, h := range swept(j) {
		on, err := s.versioned(ctx, h.Bucket)
		if err != nil {
			return false, err
		}
		if !on {
			continue
		}
		km, im := "", ""
		for {
			if pages == finalizeChunksPerCall || s.nearDeadline(ctx) {
				return false, nil
			}
			pages++
			p, err := s.listVersions(ctx, h.Bucket, h.Prefix+"/", km, im)
			if err != nil {
				return false, err
			}
			var del []object
			for _, o := range p.objs {
				if h.Bucket != keepBucket || o.key != keepKey {
					del = append(del, o)
				}
			}
			if err := s.deleteVersions(ctx, h.Bucket, j.Scope, del); err != nil {
				return false, err
			}
			if !p.truncated {
				break
			}
			// What was listed is gone: the next page starts over (a
			// marker naming a deleted version is not every S3's to
			// follow), past the kept key's versions when nothing else
			// was on the page.
			km, im = "", ""
			if len(del) == 0 {
				km, im = p.nextKey, p.nextID
			}
		}
	}
	return true, nil
}
