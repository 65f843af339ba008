// Package router serves icehold's HTTP API: the Iceberg REST catalog and the
// lifecycle API. The api Lambda, the lifecycle Lambdas and the local server
// all mount this one handler.
package router

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/partitions"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/storagesweep"
	"github.com/icehold/icehold/shared/store"
)

// Payload limits of the path a request takes in AWS: API Gateway (REST,
// Lambda proxy, binaryMediaTypes */*) hands the Lambda an event of at most
// 6 MiB (Lambda's synchronous invoke limit, 6,291,456 bytes) with the body
// base64-encoded (4/3) inside a JSON envelope of headers and request
// context; the answer goes back the same way. A body past these limits never
// reaches a handler in AWS (API Gateway answers, with the gateway responses
// the stack shapes as ErrorModel); locally and in Lambda the router refuses
// it with a 413 ErrorModel, so both places draw the line in one spot.
const (
	lambdaPayloadBytes = 6 << 20
	envelopeBytes      = 64 << 10 // headers, request context, JSON framing
	// MaxBodyBytes is the largest request body that reaches the handler.
	MaxBodyBytes = (lambdaPayloadBytes - envelopeBytes) / 4 * 3
	// MaxAnswerBytes bounds an answer as sent: base64 for a compressed
	// (binary) one, as is for text.
	maxBinaryAnswerBytes = (lambdaPayloadBytes - envelopeBytes) / 4 * 3
	maxTextAnswerBytes   = lambdaPayloadBytes - envelopeBytes
)

// errAnswerTooLarge: the answer would not pass Lambda and API Gateway.
var errAnswerTooLarge = errors.New("answer too large")

// Config holds what the router is built from.
type Config struct {
	Catalog *catalog.Service
	// Purge runs drops with purgeRequested=true; nil answers them 501.
	Purge *purge.Service
	// SoftDelete runs drops on catalogs with soft delete, undrop, purge-now,
	// legal hold and the soft-deleted listing; nil: drops are hard drops.
	SoftDelete *softdelete.Service
	// Partitions drops partitions (SPEC §5); nil answers its routes 501.
	Partitions *partitions.Service
	// StorageSweep starts storage sweeps (SPEC §3); nil answers 501.
	StorageSweep *storagesweep.Service
	Authz        *authz.Authorizer
	// Authenticate returns the caller's principal, "" for none.
	Authenticate func(*http.Request) string
	// AuthError, when set, says why Authenticate found no principal (a
	// refused SigV4 signature, locally); nil falls back to the default.
	AuthError func(*http.Request) error
	// Vendor vends table-scoped credentials (nil: this deployment has no
	// vending role, and vends none).
	Vendor *credentials.Vendor
	// ClientDefaults are handed to clients in /v1/config (locally: the S3
	// endpoint of the embedded S3).
	ClientDefaults map[string]string
	// ClientKeys, when set, are S3 keys handed with them to clients that
	// are not vended credentials (locally: a session of the engine role;
	// nil in AWS, where engines bring their own).
	ClientKeys func(context.Context) map[string]string
	// DefaultCatalog answers /v1/config without a warehouse.
	DefaultCatalog string
	// Now is the clock a revalidation reads a vended tag's expiry by: the
	// one the credentials were issued by (nil: real time; locally the
	// server's, which its STS emulation issues sessions by).
	Now func() time.Time
}

type server struct {
	Config
	store *store.Store
	mux   *http.ServeMux
}

// now is the time by Config.Now.
func (s *server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
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
	if err := buf.flushTo(w, r); err != nil {
		over := &bufferedWriter{header: http.Header{}}
		writeError(over, err)
		_ = over.flushTo(w, r)
	}
}

// serve authenticates, bounds the body and applies idempotency before routing.
func (s *server) serve(w *bufferedWriter, r *http.Request) {
	if err := checkPath(r); err != nil {
		writeError(w, err)
		return
	}
	if r.URL.Path == oauthTokensPath {
		refuseOAuth(w, r)
		return
	}
	principal := s.Authenticate(r)
	if principal == "" {
		err := unauthenticated(r)
		if s.AuthError != nil {
			if e := s.AuthError(r); e != nil {
				err = e
			}
		}
		writeError(w, err)
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
	s.route(w, r)
}

// checkPath refuses a path with an empty segment (a doubled or trailing
// '/') or a "." or ".." segment, as sent: http.ServeMux would answer it
// with a redirect to the cleaned path, and a client that followed one
// acted on another resource (DELETE …/tables/.. dropped the namespace).
// The router never redirects.
func checkPath(r *http.Request) error {
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, "/") || objects.CleanKey(p[1:]) != nil {
		return fmt.Errorf("%w: the path %q has an empty, '.' or '..' segment: send it without (icehold does not clean paths)", catalog.ErrBadRequest, p)
	}
	return nil
}

// unauthenticated says why a request has no principal: a caller who sent
// no credentials needs to be told how to send them, one whose token is
// unknown (revoked, mistyped, from another state folder) that the token is
// the problem, not its absence.
func unauthenticated(r *http.Request) error {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	scheme, _, _ := strings.Cut(h, " ")
	switch {
	case h == "":
		return fmt.Errorf("%w: no credentials: send SigV4 (AWS) or a bearer token (locally: Authorization: Bearer <token>, from .icehold/local.json or icehold local token add)", authz.ErrUnauthenticated)
	case strings.EqualFold(scheme, "Bearer"):
		return fmt.Errorf("%w: unknown token: no principal holds this bearer token (revoked, mistyped, or of another server; icehold local token list shows the known ones)", authz.ErrUnauthenticated)
	default:
		return fmt.Errorf("%w: credentials not accepted: an Authorization of scheme %q names no principal here (send SigV4 in AWS, a bearer token locally)", authz.ErrUnauthenticated, scheme)
	}
}

// oauthTokensPath is the Iceberg REST spec's (deprecated) OAuth2 token
// endpoint, where clients configured with a credential (iceberg-go's
// rest.WithCredential, PyIceberg's credential=) exchange it for a token.
const oauthTokensPath = "/v1/oauth/tokens"

// refuseOAuth answers the token endpoint in RFC 6749 §5.2's error shape, the
// one OAuth2 clients parse (an ErrorModel there reaches the user as an empty
// reason): icehold issues no tokens, the caller should send one it has.
func refuseOAuth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="icehold"`)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_client", "error_description": OAuthRefusal})
}

// OAuthRefusal is the token endpoint's error_description, here and in the
// API Gateway stage's answer (infra), which no function serves.
const OAuthRefusal = "icehold does not offer the OAuth2 token endpoint (no client credentials are exchanged here): " +
	"send a bearer token directly (iceberg-go rest.WithOAuthToken, PyIceberg token=, Spark ...token) locally, or SigV4 in AWS"

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
	// The mux still redirects a path that lacks the trailing '/' of a
	// pattern (…/grants to …/grants/{principal...}): no route here.
	rec := &bufferedWriter{header: http.Header{}}
	s.mux.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		writeError(w, fmt.Errorf("%w: %s %s", errNoRoute, r.Method, r.URL.Path))
		return
	}
	maps.Copy(w.Header(), rec.header)
	if rec.status != 0 {
		w.WriteHeader(rec.status)
	}
	_, _ = w.Write(rec.body.Bytes())
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

// flushTo sends the answer, compressed when the client accepts it. An answer
// that would not fit through Lambda and API Gateway (a 502 there) is not
// sent: the error says how to get one that fits.
func (b *bufferedWriter) flushTo(w http.ResponseWriter, r *http.Request) error {
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	body := b.body.Bytes()
	gz := len(body) >= gzipMin && acceptsGzip(r.Header.Get("Accept-Encoding"))
	if gz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = z.Bytes()
	}
	switch {
	case gz && len(body) > maxBinaryAnswerBytes:
		return fmt.Errorf("%w: the answer is %d bytes compressed, more than the %d an AWS Lambda answer through API Gateway holds; load the table with snapshots=refs", errAnswerTooLarge, len(body), maxBinaryAnswerBytes)
	case !gz && len(body) > maxTextAnswerBytes:
		return fmt.Errorf("%w: the answer is %d bytes, more than the %d an AWS Lambda answer through API Gateway holds; send Accept-Encoding: gzip, or load the table with snapshots=refs", errAnswerTooLarge, len(body), maxTextAnswerBytes)
	}
	for k, v := range b.header {
		w.Header()[k] = v
	}
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Add("Vary", "Accept-Encoding")
	}
	// HEAD and 304 answers carry no body (nor its length).
	bodyless := r.Method == http.MethodHead || status == http.StatusNotModified
	if !bodyless {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	if !bodyless {
		_, _ = w.Write(body)
	}
	return nil
}

// acceptsGzip reads an Accept-Encoding header (RFC 9110 §12.5.3): gzip (or
// x-gzip) with a q-value above 0, or "*" above 0 when gzip is not named.
func acceptsGzip(header string) bool {
	named, star := -1.0, -1.0
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0 // a malformed weight counts as a refusal
				}
				q = f
			}
		}
		switch coding {
		case "gzip", "x-gzip":
			named = max(named, q)
		case "*":
			star = max(star, q)
		}
	}
	if named >= 0 {
		return named > 0
	}
	return star > 0
}

// decode reads an Iceberg REST body into v with encoding/json's reading
// (the spec's schemas allow extensions); any malformed body, and a key
// twice in an object, is a 400.
func decode(r *http.Request, v any) error {
	if r.Body == nil {
		return fmt.Errorf("%w: a JSON body is required", catalog.ErrBadRequest)
	}
	body := peekBody(r)
	if len(bytes.TrimSpace(body)) > 0 {
		if err := catalog.CheckUniqueKeys(body); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
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

// decodeStrict reads a lifecycle API body (SPEC §2, strict bodies): every
// lifecycle route decodes with it, through catalog.DecodeStrict. emptyOK:
// the route's fields are all optional, and no body at all means none set.
func decodeStrict(r *http.Request, v any, emptyOK bool) error {
	body := peekBody(r)
	if emptyOK && len(body) == 0 {
		return nil
	}
	return catalog.DecodeStrict(body, v)
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
		n, err := catalog.ParseRange("pageSize", v, 1, MaxPageSize)
		if err != nil {
			return "", 0, err
		}
		size = int(n)
	}
	return token, size, nil
}

func nullable(token string) *string {
	if token == "" {
		return nil
	}
	return &token
}
