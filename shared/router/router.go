// Package router serves icehold's HTTP API: the Iceberg REST catalog and the
// lifecycle API. The api Lambda, the lifecycle Lambdas and the local server
// all mount this one handler.
package router

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// MaxBodyBytes is API Gateway's payload limit; larger bodies are refused.
const MaxBodyBytes = 10 << 20

// Config holds what the router is built from.
type Config struct {
	Catalog *catalog.Service
	// Purge runs drops with purgeRequested=true; nil answers them 501.
	Purge *purge.Service
	Authz *authz.Authorizer
	// Authenticate returns the caller's principal, "" for none.
	Authenticate func(*http.Request) string
	// ClientDefaults are handed to clients in /v1/config (locally: the S3
	// endpoint and keys of the embedded S3).
	ClientDefaults map[string]string
	// DefaultCatalog answers /v1/config without a warehouse.
	DefaultCatalog string
}

type server struct {
	Config
	store *store.Store
	mux   *http.ServeMux
}

// New returns the HTTP handler of the whole API.
func New(cfg Config) http.Handler {
	s := &server{Config: cfg, store: cfg.Catalog.Store(), mux: http.NewServeMux()}
	s.routes()
	return s
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := &bufferedWriter{header: http.Header{}}
	s.serve(buf, r)
	buf.flushTo(w, r)
}

// serve authenticates, bounds the body and applies idempotency before routing.
func (s *server) serve(w *bufferedWriter, r *http.Request) {
	principal := s.Authenticate(r)
	if principal == "" {
		writeError(w, fmt.Errorf("%w: send credentials (SigV4 in AWS, a bearer token locally)", authz.ErrUnauthenticated))
		return
	}
	r = r.WithContext(authz.WithPrincipal(r.Context(), principal))
	if r.Body != nil {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
		if err != nil {
			writeError(w, fmt.Errorf("%w: read body: %v", catalog.ErrBadRequest, err))
			return
		}
		if len(body) > MaxBodyBytes {
			writeError(w, fmt.Errorf("%w: more than %d bytes", errBodyTooLarge, MaxBodyBytes))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
		s.idempotent(w, r, key)
		return
	}
	s.route(w, r)
}

func (s *server) route(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		// The mux's own 404/405 pages are not ErrorModel: answer ours.
		rec := &bufferedWriter{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			writeError(w, fmt.Errorf("%w: %s %s", errMethodNotAllowed, r.Method, r.URL.Path))
			return
		}
		writeError(w, fmt.Errorf("%w: %s %s", errNoRoute, r.Method, r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// bufferedWriter holds a whole response so that it can be stored as an
// idempotency receipt and compressed before it is sent.
type bufferedWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.header }
func (b *bufferedWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferedWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// gzipMin is the size above which answers are compressed for clients that
// accept it: a large table's metadata shrinks well below Lambda's 6 MB.
const gzipMin = 1024

func (b *bufferedWriter) flushTo(w http.ResponseWriter, r *http.Request) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	body := b.body.Bytes()
	if len(body) >= gzipMin && acceptsGzip(r) {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = z.Bytes()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
	}
	if r.Method != http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc := strings.TrimSpace(strings.SplitN(part, ";", 2)[0])
		if enc == "gzip" && !strings.Contains(part, "q=0") {
			return true
		}
	}
	return false
}

// decode reads a JSON body into v; any malformed body is a 400.
func decode(r *http.Request, v any) error {
	if r.Body == nil {
		return fmt.Errorf("%w: a JSON body is required", catalog.ErrBadRequest)
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: a JSON body is required", catalog.ErrBadRequest)
		}
		return fmt.Errorf("%w: malformed JSON body: %v", catalog.ErrBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data after the JSON body", catalog.ErrBadRequest)
	}
	return nil
}

// namespaceParam splits a namespace path parameter (levels joined by 0x1F).
func namespaceParam(raw string) ([]string, error) {
	levels := strings.Split(raw, "\x1f")
	if err := catalog.ValidateNamespace(levels); err != nil {
		return nil, err
	}
	return levels, nil
}

// MaxPageSize bounds one page of a listing.
const MaxPageSize = 1000

func paging(r *http.Request) (string, int, error) {
	token := r.URL.Query().Get("pageToken")
	size := MaxPageSize
	if v := r.URL.Query().Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return "", 0, fmt.Errorf("%w: pageSize must be 1 to %d", catalog.ErrBadRequest, MaxPageSize)
		}
		size = n
	}
	return token, size, nil
}

func nullable(token string) *string {
	if token == "" {
		return nil
	}
	return &token
}
