package router

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

var (
	errKeyInFlight = errors.New("a request with this Idempotency-Key is in flight")
	errKeyReused   = errors.New("this Idempotency-Key was used for another request")
)

// ReceiptLifetime is how long answers are replayed for a key; /v1/config
// advertises it as idempotency-key-lifetime.
const ReceiptLifetime = 24 * time.Hour

// ReceiptLifetimeISO is ReceiptLifetime in ISO-8601.
const ReceiptLifetimeISO = "PT24H"

// receiptScope keeps each principal's keys apart: one caller's key never
// answers, blocks or replays another's request.
func receiptScope(principal string) string {
	sum := sha256.Sum256([]byte(principal))
	return "api#" + hex.EncodeToString(sum[:16])
}

// claimLease bounds how long an in-flight claim blocks its key: a request
// whose Lambda died mid-way frees the key after it (longer than API Gateway's
// 29 s integration timeout), instead of after the receipt's 24 hours.
const claimLease = 2 * time.Minute

// replayable: answers that are deterministic for the request: its success
// (what happened), or a refusal of the request itself (malformed, too large,
// unprocessable). 404 and 409 depend on the state of the catalog at the
// time (a table that appears, a commit that loses a race), and 401/403,
// throttling and 5xx on things outside the request: none is stored, so a
// retry with the key runs for real.
func replayable(status int) bool {
	switch {
	case status >= 200 && status < 300:
		return true
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity,
		status == http.StatusRequestEntityTooLarge, status == http.StatusMethodNotAllowed:
		return true
	}
	return false
}

func validKey(k string) bool {
	if len(k) > 128 {
		return false
	}
	for _, c := range k {
		if c <= ' ' || c > '~' {
			return false
		}
	}
	return true
}

// idempotent runs a mutating request once per Idempotency-Key of its
// principal: the same key with the same request replays the stored answer,
// with another request is a 422, and while the first is still running a 409.
// The guard has authorized the request before it gets here.
// canonical, when the route has one, replaces the body and the raw URI in
// the fingerprint by the body's canonical form and the decoded path.
func (s *server) idempotent(w http.ResponseWriter, r *http.Request, key string, canonical func([]byte) []byte, h http.HandlerFunc) {
	if !validKey(key) {
		writeError(w, fmt.Errorf("%w: Idempotency-Key must be 1 to 128 visible ASCII characters", catalog.ErrBadRequest))
		return
	}
	body := peekBody(r)
	sum := sha256.New()
	principal := authz.Principal(r.Context())
	uri, fpBody := r.URL.RequestURI(), body
	if canonical != nil {
		uri, fpBody = r.URL.Path, canonical(body)
	}
	for _, part := range []string{principal, r.Method, uri, string(fpBody)} {
		sum.Write([]byte(part))
		sum.Write([]byte{0})
	}
	fp := hex.EncodeToString(sum.Sum(nil))
	scope := receiptScope(principal)
	now := time.Now()
	claim := store.Receipt{Key: key, Fingerprint: fp, ExpiresAt: now.Add(claimLease).Unix()}
	prev, err := s.store.ClaimReceipt(r.Context(), scope, claim, now)
	if err != nil {
		writeError(w, fmt.Errorf("claim idempotency key: %w", err))
		return
	}
	if prev != nil {
		switch {
		case prev.Fingerprint != fp:
			writeError(w, errKeyReused)
		case !prev.Done:
			writeError(w, errKeyInFlight)
		default:
			body, err := unzip(prev.Body)
			if err != nil {
				writeError(w, fmt.Errorf("read idempotency receipt: %w", err))
				return
			}
			w.Header().Set("Content-Type", prev.ContentType)
			for k, v := range prev.Headers {
				w.Header().Set(k, v)
			}
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(prev.Status)
			_, _ = w.Write(body)
		}
		return
	}
	rec := &bufferedWriter{header: http.Header{}}
	h(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if replayable(rec.status) {
		// Stored compressed: a commit answer carries the whole metadata, and a
		// DynamoDB item holds 400 KB.
		claim.Status, claim.Body, claim.ContentType = rec.status, zip(rec.body.Bytes()), rec.header.Get("Content-Type")
		claim.Headers = replayedHeaders(rec.header)
		claim.ExpiresAt = time.Now().Add(ReceiptLifetime).Unix()
		err = s.store.CompleteReceipt(r.Context(), scope, claim)
	} else {
		err = s.store.ReleaseReceipt(r.Context(), scope, key)
	}
	if err != nil {
		// The request itself is done; a lost receipt only weakens a retry.
		slog.Error("store idempotency receipt", "key", key, "error", err)
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.status)
	_, _ = w.Write(rec.body.Bytes())
}

// replayedHeaders are the answer's headers a replay repeats: those that
// name what the request made (the body alone does not, for a 204), the
// ETag of the body it repeats, and Cache-Control (a body that carries
// credentials stays no-store when replayed).
func replayedHeaders(h http.Header) map[string]string {
	var out map[string]string
	for _, k := range []string{"Location", PurgeJobHeader, FilesKeptHeader, "ETag", "Cache-Control"} {
		if v := h.Get(k); v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func zip(b []byte) []byte {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return z.Bytes()
}

func unzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}
