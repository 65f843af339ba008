package emulators

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/spf13/afero"

	"github.com/icehold/icehold/shared/sigv4"
)

// S3 is gofakes3 on disk (dir set) or in memory (dir == ""). Serve it over
// plain HTTP: over HTTPS the SDK sends aws-chunked bodies gofakes3 would store
// verbatim.
type S3 struct {
	inner    http.Handler
	Backend  gofakes3.Backend
	policies *bucketPolicies
	fault    atomic.Pointer[Fault]
	observe  atomic.Pointer[func(*http.Request)]
	iam      atomic.Pointer[IAM]
	// Requests counts every request served (benchmarks: requests per file).
	Requests atomic.Int64
}

// Fault makes the emulator answer matching requests with an S3 error
// (tests: a poison batch, throttling).
type Fault struct {
	Match  func(*http.Request) bool
	Status int
	Code   string
}

// SetFault installs a fault; nil clears it.
func (s *S3) SetFault(f *Fault) { s.fault.Store(f) }

// SetObserver installs a function that sees every request before it is
// served (tests: requests counted by object kind); nil clears it.
func (s *S3) SetObserver(fn func(*http.Request)) {
	if fn == nil {
		s.observe.Store(nil)
		return
	}
	s.observe.Store(&fn)
}

func (s *S3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.Requests.Add(1)
	if fn := s.observe.Load(); fn != nil {
		(*fn)(r)
	}
	if f := s.fault.Load(); f != nil && f.Match(r) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected fault</Message></Error>`, f.Code)
		return
	}
	deny := s.policies.denies
	// Unsigned requests stay the emulator's convenience (curl, tests);
	// signed ones are checked as S3 checks them.
	if m := s.iam.Load(); m != nil && sigv4.Signed(r) {
		if sigv4.Service(r) == "sts" {
			m.ServeSTS(w, r)
			return
		}
		caller, ok := s.authenticate(w, r, m)
		if !ok {
			return
		}
		if caller.Role != "" {
			if !IsDeleteObjects(r) && !permits(m, caller, r) {
				writeS3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied")
				return
			}
			// DeleteObjects is authorized key by key.
			deny = func(bucket, key, action string) bool {
				return s.policies.denies(bucket, key, action) ||
					!m.allows(caller, access{action: action, resource: "arn:aws:s3:::" + bucket + "/" + key})
			}
		}
	}
	if s.servePolicy(w, r, deny) {
		return
	}
	s.inner.ServeHTTP(w, r)
}

// IsDeleteObjects matches a DeleteObjects call (POST ?delete).
func IsDeleteObjects(r *http.Request) bool {
	_, ok := r.URL.Query()["delete"]
	return r.Method == http.MethodPost && ok
}

// NewS3 returns the emulator with the named buckets created.
func NewS3(dir string, buckets ...string) (*S3, error) {
	var backend gofakes3.Backend
	if dir == "" {
		backend = s3mem.New()
	} else {
		fs, err := s3afero.NewBasePathFs(afero.NewOsFs(), filepath.Join(dir, "s3"), s3afero.FsPathCreateAll)
		if err != nil {
			return nil, err
		}
		mb, err := s3afero.MultiBucket(fs)
		if err != nil {
			return nil, err
		}
		backend = pagedBackend{mb}
	}
	for _, b := range buckets {
		exists, err := backend.BucketExists(b)
		if err != nil {
			return nil, err
		}
		if !exists {
			if err := backend.CreateBucket(b); err != nil {
				return nil, fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
	}
	policies, err := newBucketPolicies(dir)
	if err != nil {
		return nil, err
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(true))
	return &S3{inner: faker.Server(), Backend: backend, policies: policies}, nil
}

// pagedBackend pages the listings of a backend that answers them only whole
// (gofakes3's s3afero, the state folder's: it ignores max-keys, start-after
// and continuation tokens, and gofakes3 then answers the whole listing as
// one page): in key order, strictly after the marker, at most MaxKeys, as
// S3 does.
type pagedBackend struct{ gofakes3.Backend }

func (b pagedBackend) ListBucket(name string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	out, err := b.Backend.ListBucket(name, prefix, page)
	if err != gofakes3.ErrInternalPageNotImplemented {
		return out, err
	}
	whole, err := b.Backend.ListBucket(name, prefix, gofakes3.ListBucketPage{})
	if err != nil {
		return nil, err
	}
	type entry struct {
		name    string
		content *gofakes3.Content // nil: a common prefix
	}
	all := make([]entry, 0, len(whole.Contents)+len(whole.CommonPrefixes))
	for _, c := range whole.Contents {
		all = append(all, entry{c.Key, c})
	}
	for _, p := range whole.CommonPrefixes {
		all = append(all, entry{p.Prefix, nil})
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	out = gofakes3.NewObjectList()
	var n int64
	for _, e := range all {
		if page.HasMarker && e.name <= page.Marker {
			continue
		}
		if page.MaxKeys > 0 && n == page.MaxKeys {
			out.IsTruncated = true
			break
		}
		if e.content != nil {
			out.Add(e.content)
		} else {
			out.AddPrefix(e.name)
		}
		n++
		out.NextMarker = e.name
	}
	if !out.IsTruncated {
		out.NextMarker = ""
	}
	return out, nil
}
