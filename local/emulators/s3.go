package emulators

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/icehold/icehold/shared/sigv4"
)

// S3 is the embedded S3: an S3Store (on disk with a state folder, else in
// memory) behind S3's REST API (path-style), with versioning, bucket
// policies and, with SetIAM, SigV4 and IAM checks. Serve it over plain
// HTTP or HTTPS: aws-chunked bodies are decoded and every digest a request
// states is checked.
type S3 struct {
	// Store keeps the buckets and object versions (Go callers: benchmarks
	// seed it directly; the inventory writer reads it).
	Store    *S3Store
	policies *bucketPolicies
	fault    atomic.Pointer[Fault]
	keyFault atomic.Pointer[KeyFault]
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

// KeyFault makes DeleteObjects answer the keys it matches with a per-key
// error and leave them, while the call succeeds (tests: S3 answers 200
// with an <Error> per key it could not delete, e.g. InternalError).
type KeyFault struct {
	Match func(key string) bool
	Code  string
}

// SetKeyFault installs a per-key delete fault; nil clears it.
func (s *S3) SetKeyFault(f *KeyFault) { s.keyFault.Store(f) }

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
	w.Header().Set("X-Amz-Request-Id", newBlobName()[:16])
	w.Header().Set("Server", "AmazonS3")
	// allowed is what IAM lets the caller do; nil: anything (unsigned
	// requests stay the emulator's convenience, for curl and tests, and
	// act as the account's root; users' and the root's keys are the
	// account's). Signed requests are checked as S3 checks them.
	var allowed func(access) bool
	caller := sigv4.Key{Principal: RootPrincipal}
	if m := s.iam.Load(); m != nil && sigv4.Signed(r) {
		if sigv4.Service(r) == "sts" {
			m.ServeSTS(w, r)
			return
		}
		var ok bool
		if caller, ok = s.authenticate(w, r, m); !ok {
			return
		}
		if caller.Role != "" {
			allowed = func(a access) bool { return m.allows(caller, a) }
		}
	}
	c := routeS3(r)
	// One decision authorizes and runs the request: the bucket policy's
	// denies and the caller's permissions apply to every request shape,
	// with the request's condition keys (aws:PrincipalArn, ...).
	keys := requestKeys(r, caller)
	denied := func(a access) bool {
		a = a.withKeys(keys)
		return s.policies.denies(c.bucket, a, caller.Principal) || (allowed != nil && !allowed(a))
	}
	for _, a := range c.accesses(r) {
		if denied(a) {
			writeS3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied")
			return
		}
	}
	switch {
	case c.op == "MethodNotAllowed":
		fail(w, r, ErrDeleteMarker) // S3's MethodNotAllowed
	case !served[c.op]:
		fail(w, r, errNotImplemented)
	default:
		s.serveCall(w, r, c, denied)
	}
}

// IsDeleteObjects matches a DeleteObjects call (POST ?delete).
func IsDeleteObjects(r *http.Request) bool {
	_, ok := r.URL.Query()["delete"]
	return r.Method == http.MethodPost && ok
}

// NewS3 returns the emulator kept in dir ("" in memory) with the named
// buckets created.
func NewS3(dir string, buckets ...string) (*S3, error) {
	store, err := OpenS3Store(dir)
	if err != nil {
		return nil, err
	}
	for _, b := range buckets {
		if err := store.CreateBucket(b); err != nil && err != ErrBucketOwned {
			return nil, fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	policies, err := newBucketPolicies(dir)
	if err != nil {
		return nil, err
	}
	return &S3{Store: store, policies: policies}, nil
}

// Close releases the store.
func (s *S3) Close() error { return s.Store.Close() }
