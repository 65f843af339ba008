package router_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/icehold/icehold/shared/router"
)

// concrete fills a route pattern's parameters with names of the fuzz
// server's objects (namespace ns, table t).
func concrete(pattern string) string {
	return strings.NewReplacer("{prefix}", "demo", "{c}", "demo", "{namespace}", "ns", "{table}", "t", "{view}", "v",
		"{principal...}", "user:someone", "{id}", "pj-0", "{uuid}", "00000000-0000-0000-0000-000000000000").Replace(pattern)
}

// dotted spells path with a dot segment or a doubled slash, in the places
// a client may put one: the end, the middle, before the last segment.
func dotted(path string) []string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	first, rest := segs[0], strings.Join(segs[1:], "/")
	last := segs[len(segs)-1]
	dir := "/" + strings.Join(segs[:len(segs)-1], "/")
	return []string{
		path + "/..", path + "/.", path + "//", path + "/x/..",
		"/" + first + "/./" + rest, "/" + first + "//" + rest, "/" + first + "/x/../" + rest,
		dir + "/../" + segs[len(segs)-2] + "/" + last, dir + "//" + last,
	}
}

// Defect: the router cleaned paths with a redirect (http.ServeMux's 307):
// DELETE …/namespaces/emptyns/tables/.. answered 307 to
// …/namespaces/emptyns, and a client following it dropped the namespace;
// the same for GET views/.. and POST tables/../properties. A path with a
// dot segment or a doubled slash is a 400 ErrorModel on every route, and
// nothing changes.
func TestDotSegmentPathsAreRefusedNotRedirected(t *testing.T) {
	s := fuzzServer(t)
	send(s, "POST", "/v1/demo/namespaces", `{"namespace":["emptyns"]}`)
	seen := map[string]bool{}
	for _, rt := range router.Routes() {
		if seen[rt.Method+" "+rt.Pattern] {
			continue
		}
		seen[rt.Method+" "+rt.Pattern] = true
		// No prefix of a route's path redirects either (the mux sends
		// …/grants to …/grants/ for a pattern …/grants/{principal...}).
		full := concrete(rt.Pattern)
		for i := 1; i < len(full); i++ {
			if full[i] != '/' {
				continue
			}
			if rec := send(s, "GET", full[:i], ""); rec.Code/100 == 3 {
				t.Errorf("GET %s: %d to %q", full[:i], rec.Code, rec.Header().Get("Location"))
			}
		}
		for _, path := range dotted(full) {
			req := httptest.NewRequest(rt.Method, "/", strings.NewReader(`{}`))
			req.URL.Path = path // as sent: curl --path-as-is
			req.Header.Set("Authorization", "Bearer "+s.Info.AdminToken)
			rec := httptest.NewRecorder()
			s.Handler.ServeHTTP(rec, req)
			if rec.Code != 400 || rec.Header().Get("Location") != "" {
				t.Errorf("%s %s: %d (Location %q), want 400", rt.Method, path, rec.Code, rec.Header().Get("Location"))
				continue
			}
			if rt.Method != "HEAD" { // a HEAD answer has no body
				checkAnswer(t, rec, path)
			}
		}
	}
	for _, p := range []string{"/v1/demo/namespaces/ns", "/v1/demo/namespaces/emptyns", "/v1/demo/namespaces/ns/tables/t"} {
		if rec := send(s, "GET", p, ""); rec.Code != 200 {
			t.Errorf("GET %s after the refused requests: %d %s", p, rec.Code, rec.Body.String())
		}
	}
}
