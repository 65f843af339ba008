package emulators

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/johannesboyne/gofakes3"

	"github.com/icehold/icehold/shared/iampolicy"
)

// Bucket policies, as far as deletes go: gofakes3 has none, and the purge's
// handling of DeleteObjects' per-key errors (a denied key fails the batch; it
// is never counted deleted) is tested against an S3 that produces them the
// way S3 and moto do, from a bucket policy that denies s3:DeleteObject.
// Only Deny statements are evaluated (the emulator's caller owns the bucket,
// so everything else is allowed), by shared/iampolicy; a statement with a
// Condition (a delete carries no condition keys), NotAction or NotResource
// is kept but never matches (the emulator cannot evaluate it).

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

// denies reports whether the bucket's policy denies action on the object.
func (p *bucketPolicies) denies(bucket, key, action string) bool {
	p.mu.Lock()
	doc, ok := p.doc[bucket]
	p.mu.Unlock()
	if !ok {
		return false
	}
	return doc.Denies(iampolicy.Request{Action: action, Resource: "arn:aws:s3:::" + bucket + "/" + key})
}

// splitPath is the bucket and key of a path-style request.
func splitPath(r *http.Request) (bucket, key string) {
	p := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ = strings.Cut(p, "/")
	return bucket, key
}

// servePolicy answers the ?policy subresource and applies deny (the
// bucket policy's Deny statements, and what the caller may not do) to
// deletes; false when the request is the backend's to serve.
func (s *S3) servePolicy(w http.ResponseWriter, r *http.Request, deny func(bucket, key, action string) bool) bool {
	bucket, key := splitPath(r)
	if _, ok := r.URL.Query()["policy"]; ok && key == "" {
		switch r.Method {
		case http.MethodPut:
			raw, _ := io.ReadAll(r.Body)
			if err := s.policies.set(bucket, raw, true); err != nil {
				writeS3Error(w, http.StatusBadRequest, "MalformedPolicy", err.Error())
				return true
			}
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet:
			s.policies.mu.Lock()
			raw, ok := s.policies.raw[bucket]
			s.policies.mu.Unlock()
			if !ok {
				writeS3Error(w, http.StatusNotFound, "NoSuchBucketPolicy", "The bucket policy does not exist")
				return true
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(raw)
		case http.MethodDelete:
			if err := s.policies.remove(bucket); err != nil {
				writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error())
				return true
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			return false
		}
		return true
	}
	switch {
	case r.Method == http.MethodDelete && key != "" && len(r.URL.Query()) == 0:
		if deny(bucket, key, "s3:DeleteObject") {
			writeS3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied")
			return true
		}
	case IsDeleteObjects(r):
		return s.deleteObjectsWithPolicy(w, r, bucket, deny)
	}
	return false
}

// deleteObjectsWithPolicy answers DeleteObjects: denied keys become per-key
// AccessDenied errors (as S3 reports them) and the rest reach the backend.
// It also refuses more than 1000 keys (S3's MalformedXML), which gofakes3
// accepts.
func (s *S3) deleteObjectsWithPolicy(w http.ResponseWriter, r *http.Request, bucket string, deny func(bucket, key, action string) bool) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeS3Error(w, http.StatusBadRequest, "IncompleteBody", err.Error())
		return true
	}
	var in gofakes3.DeleteRequest
	if err := xml.Unmarshal(body, &in); err != nil {
		writeS3Error(w, http.StatusBadRequest, "MalformedXML", err.Error())
		return true
	}
	if len(in.Objects) > 1000 {
		writeS3Error(w, http.StatusBadRequest, "MalformedXML",
			"The XML you provided was not well-formed or did not validate against our published schema")
		return true
	}
	var denied []gofakes3.ErrorResult
	allowed := in
	allowed.Objects = nil
	for _, o := range in.Objects {
		if deny(bucket, o.Key, "s3:DeleteObject") {
			denied = append(denied, gofakes3.ErrorResult{Key: o.Key, Code: "AccessDenied", Message: "Access Denied"})
		} else {
			allowed.Objects = append(allowed.Objects, o)
		}
	}
	if len(denied) == 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return false
	}
	out := gofakes3.MultiDeleteResult{Error: denied}
	if len(allowed.Objects) > 0 {
		sub, _ := xml.Marshal(allowed)
		req := r.Clone(r.Context())
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(sub)), int64(len(sub))
		req.Header.Set("Content-Length", strconv.Itoa(len(sub)))
		req.Header.Del("Content-MD5") // the body changed; gofakes3 checks none here
		rec := httptest.NewRecorder()
		s.inner.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			copyRecorded(w, rec)
			return true
		}
		var res gofakes3.MultiDeleteResult
		if err := xml.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error())
			return true
		}
		out.Deleted, out.Error = res.Deleted, append(res.Error, denied...)
	}
	w.Header().Set("Content-Type", "application/xml")
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(out)
	return true
}

func copyRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func writeS3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(msg))
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, b.String())
}
