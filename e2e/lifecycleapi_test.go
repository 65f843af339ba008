package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/icehold/icehold/shared/router"
)

// lifecycleSpec is docs/lifecycle-api.yaml, the lifecycle API's reference.
const lifecycleSpec = "../docs/lifecycle-api.yaml"

// specCheck validates lifecycle answers against the spec: the status must
// be one the operation lists and the body must match its schema.
type specCheck struct {
	file string // the OpenAPI document
	doc  *openapi3.T
	// mux matches a request to its route as the router does (a principal
	// may hold slashes, which an OpenAPI path parameter may not).
	mux *http.ServeMux

	mu         sync.Mutex
	checked    map[string]int // operation → answers checked
	others     int            // of them, answers of servers the tests started
	mismatches []string
}

// lifecycleRoutes are router.Routes() of the lifecycle API, one a pattern.
func lifecycleRoutes() []string {
	var out []string
	for _, rt := range router.Routes() {
		if p := rt.Method + " " + rt.Pattern; strings.HasPrefix(rt.Pattern, "/lifecycle/v1/") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// specPath is the spec's path of a router pattern.
func specPath(pattern string) string {
	return strings.NewReplacer("{c}", "{catalog}", "{principal...}", "{principal}").Replace(pattern)
}

func loadSpecCheck() (*specCheck, error) { return newSpecCheck(lifecycleSpec, lifecycleRoutes()) }

// newSpecCheck checks the answers of the router patterns against file.
func newSpecCheck(file string, patterns []string) (*specCheck, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(file)
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("%s is not valid OpenAPI: %w", file, err)
	}
	c := &specCheck{file: file, doc: doc, mux: http.NewServeMux(), checked: map[string]int{}}
	for _, p := range patterns {
		c.mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	return c, nil
}

// operation is the spec's operation of a router pattern ("GET /…"), or nil.
func (c *specCheck) operation(pattern string) (string, string, *openapi3.PathItem, *openapi3.Operation) {
	method, path, _ := strings.Cut(pattern, " ")
	path = specPath(path)
	item := c.doc.Paths.Value(path)
	if item == nil {
		return method, path, nil, nil
	}
	return method, path, item, item.GetOperation(method)
}

// wrap validates every /lifecycle/v1 answer of h as it passes.
func (c *specCheck) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/lifecycle/v1/") {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if err := c.check(r, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			c.mu.Lock()
			c.mismatches = append(c.mismatches, err.Error())
			c.mu.Unlock()
		}
	})
}

// transport checks the /lifecycle/v1 answers a test receives from any
// server but the suite's own (whose wrap checks them as they leave).
func (c *specCheck) transport(next http.RoundTripper, own string) http.RoundTripper {
	ownHost := strings.TrimPrefix(strings.TrimPrefix(own, "http://"), "https://")
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		res, err := next.RoundTrip(r)
		if err != nil || r.URL.Host == ownHost || !strings.HasPrefix(r.URL.Path, "/lifecycle/v1/") {
			return res, err
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			return nil, err
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		err = c.check(r, res.StatusCode, res.Header, body)
		c.mu.Lock()
		if err != nil {
			c.mismatches = append(c.mismatches, "(a server the test started) "+err.Error())
		} else if _, pattern := c.mux.Handler(r); pattern != "" {
			c.others++
		}
		c.mu.Unlock()
		return res, nil
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// check validates one answer; nil for a request that matches no route (the
// router's own 404 and 405).
func (c *specCheck) check(r *http.Request, status int, header http.Header, body []byte) error {
	_, pattern := c.mux.Handler(r)
	if pattern == "" {
		return nil
	}
	method, path, item, op := c.operation(pattern)
	if op == nil {
		return fmt.Errorf("%s %s: %s has no operation %s %s", r.Method, r.URL.Path, c.file, method, path)
	}
	if header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("%s %s: gzip: %v", r.Method, r.URL.Path, err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("%s %s: gzip: %v", r.Method, r.URL.Path, err)
		}
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: r,
			Route:   &routers.Route{Spec: c.doc, Path: path, PathItem: item, Method: method, Operation: op},
		},
		Status:  status,
		Header:  header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s answered %d, not as %s says (%s %s): %v\nbody: %.2000s", r.Method, r.URL.Path, status, c.file, method, path, err, body)
	}
	c.mu.Lock()
	c.checked[method+" "+path]++
	c.mu.Unlock()
	return nil
}

// report is what TestMain prints after the suite; false: a mismatch.
func (c *specCheck) report(w io.Writer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ops := 0, make([]string, 0, len(c.checked))
	for op, k := range c.checked {
		n += k
		ops = append(ops, op)
	}
	sort.Strings(ops)
	fmt.Fprintf(w, "%s: %d lifecycle answers checked (%d from servers the tests started), of %d operations\n", lifecycleSpec, n, c.others, len(ops))
	for _, m := range c.mismatches {
		fmt.Fprintf(w, "MISMATCH %s\n", m)
	}
	return len(c.mismatches) == 0
}

// Every lifecycle route has its operation in the spec, and the spec
// describes no route the router does not serve.
func TestLifecycleSpecCoversEveryRoute(t *testing.T) {
	c, err := loadSpecCheck()
	if err != nil {
		t.Fatal(err)
	}
	routes := lifecycleRoutes()
	if len(routes) == 0 {
		t.Fatal("router.Routes() lists no lifecycle route")
	}
	served := map[string]bool{}
	for _, p := range routes {
		method, path, _, op := c.operation(p)
		served[method+" "+path] = true
		if op == nil {
			t.Errorf("%s has no operation for the route %s (%s %s)", lifecycleSpec, p, method, path)
		}
	}
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] {
				t.Errorf("%s describes %s %s, which the router does not serve", lifecycleSpec, method, path)
			}
		}
	}
}

// The check catches what it is there to catch: an undocumented field, a
// missing one, an unlisted status, an error that is not an ErrorModel.
func TestLifecycleSpecCheckFindsMismatches(t *testing.T) {
	c, err := loadSpecCheck()
	if err != nil {
		t.Fatal(err)
	}
	grant := "/lifecycle/v1/catalogs/demo/grants/arn:aws:iam::123456789012:role/admin"
	cases := []struct {
		name, method, path string
		status             int
		body               string
		ok                 bool
	}{
		{"grant as documented", "GET", grant, 200, `{"principal":"arn:aws:iam::123456789012:role/admin","privileges":["TABLE_READ"],"pattern":false}`, true},
		{"grant with an undocumented field", "GET", grant, 200, `{"principal":"p","privileges":[],"pattern":false,"expires":"never"}`, false},
		{"grant without privileges", "GET", grant, 200, `{"principal":"p","pattern":false}`, false},
		{"unknown privilege", "GET", grant, 200, `{"principal":"p","privileges":["TABLE_EAT"],"pattern":false}`, false},
		{"status the operation does not list", "GET", grant, 418, `{"error":{"message":"m","type":"T","code":418}}`, false},
		{"error as ErrorModel", "GET", grant, 404, `{"error":{"message":"m","type":"NotFoundException","code":404}}`, true},
		{"error not as ErrorModel", "GET", grant, 404, `{"message":"not found"}`, false},
		{"job list", "GET", "/lifecycle/v1/catalogs/demo/purge-jobs", 200, `{"jobs":[],"next-page-token":null}`, true},
		{"job list without a page token", "GET", "/lifecycle/v1/catalogs/demo/purge-jobs", 200, `{"jobs":[]}`, false},
		{"no route: not checked", "GET", "/lifecycle/v1/nothing", 404, `not json`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			h := http.Header{"Content-Type": {"application/json"}}
			err := c.check(r, tc.status, h, []byte(tc.body))
			if (err == nil) != tc.ok {
				t.Errorf("check: %v, want ok %v", err, tc.ok)
			}
		})
	}
}
