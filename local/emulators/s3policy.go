package emulators

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/icehold/icehold/shared/iampolicy"
)

// Bucket policies: the purge's handling of DeleteObjects' per-key errors (a
// denied key fails the batch; it is never counted deleted) is tested against
// an S3 that produces them the way S3 and moto do, from a bucket policy that
// denies s3:DeleteObject, and a bucket policy's denies apply to every
// request (s3:DeleteObjectVersion, s3:PutBucketVersioning, ...). Only Deny
// statements are evaluated (the emulator's caller owns the bucket, so
// everything else is allowed), by shared/iampolicy, with the caller's ARN
// and the request's condition keys (requestKeys: the warehouse guard's
// ArnNotLike on aws:PrincipalArn is evaluated as AWS does); a statement
// with NotAction, NotResource or an operator shared/iampolicy does not
// read is kept but never matches.

type bucketPolicies struct {
	mu  sync.Mutex
	dir string                        // "" keeps them in memory
	raw map[string][]byte             // bucket → policy document
	doc map[string]iampolicy.Document // bucket → parsed
}

func newBucketPolicies(dir string) (*bucketPolicies, error) {
	p := &bucketPolicies{raw: map[string][]byte{}, doc: map[string]iampolicy.Document{}}
	if dir == "" {
		return p, nil
	}
	p.dir = filepath.Join(dir, "s3-policies")
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(p.dir, "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := p.set(strings.TrimSuffix(filepath.Base(f), ".json"), raw, false); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return p, nil
}

func (p *bucketPolicies) set(bucket string, raw []byte, persist bool) error {
	doc, err := iampolicy.Parse(string(raw))
	if err != nil {
		return fmt.Errorf("malformed policy: %v", err)
	}
	if persist && p.dir != "" {
		if err := writeFileAtomic(filepath.Join(p.dir, bucket+".json"), raw); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.raw[bucket], p.doc[bucket] = raw, doc
	return nil
}

func (p *bucketPolicies) remove(bucket string) error {
	if p.dir != "" {
		if err := os.Remove(filepath.Join(p.dir, bucket+".json")); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.raw, bucket)
	delete(p.doc, bucket)
	return nil
}

// denies reports whether the bucket's policy denies a caller (its ARN)
// an access. As in AWS, the account's root may always read, replace and
// delete a bucket's policy, whatever it denies.
func (p *bucketPolicies) denies(bucket string, a access, caller string) bool {
	if caller == RootPrincipal && (a.action == "s3:GetBucketPolicy" || a.action == "s3:PutBucketPolicy" || a.action == "s3:DeleteBucketPolicy") {
		return false
	}
	p.mu.Lock()
	doc, ok := p.doc[bucket]
	p.mu.Unlock()
	if !ok {
		return false
	}
	return doc.Denies(a.request(caller))
}

// servePolicy answers GetBucketPolicy, PutBucketPolicy and
// DeleteBucketPolicy.
func (s *S3) servePolicy(w http.ResponseWriter, r *http.Request, c s3Call) {
	if !s.Store.BucketExists(c.bucket) {
		fail(w, r, ErrNoSuchBucket)
		return
	}
	switch c.op {
	case "PutBucketPolicy":
		raw, err := readBody(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		if err := s.policies.set(c.bucket, raw, true); err != nil {
			writeS3Error(w, http.StatusBadRequest, "MalformedPolicy", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "GetBucketPolicy":
		s.policies.mu.Lock()
		raw, ok := s.policies.raw[c.bucket]
		s.policies.mu.Unlock()
		if !ok {
			writeS3Error(w, http.StatusNotFound, "NoSuchBucketPolicy", "The bucket policy does not exist")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(raw)
	case "DeleteBucketPolicy":
		if err := s.policies.remove(c.bucket); err != nil {
			writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

func writeS3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(msg))
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, b.String())
}
