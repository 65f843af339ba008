package infra_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/icehold/icehold/shared/router"
)

// The REST API resolves a request against the deployed resource tree
// (docs/design/infra.md, "The API's edge"): segment by segment the most specific
// child matches, a literal path part before a {param} before a greedy
// {proxy+} (which takes the rest of the path); then the resource's method
// for the verb, or its ANY: the strictest reading of what AWS documents
// (docs/design/infra.md, The API's edge). AWS does not document whether a request
// whose resource has no method for its verb goes back up the tree to a
// {proxy+}; the tree is laid out so that no request depends on it, and
// apiTree.resolve never goes back.

// apiNode is one resource of the template's API.
type apiNode struct {
	part     string
	children []*apiNode
	// methods: HTTP method (or ANY) → the function it invokes ("mock" for
	// a mock integration).
	methods map[string]string
}

var fnArn = regexp.MustCompile(`\$\{(\w+)\.Arn\}`)

// apiTree reads the REST API's resource tree and its methods from a
// template.
func apiTree(t *testing.T, of func(string) map[string]map[string]any) *apiNode {
	t.Helper()
	root := &apiNode{part: "", methods: map[string]string{}}
	nodes := map[string]*apiNode{}
	res := of("AWS::ApiGateway::Resource")
	var attach func(id string) *apiNode
	attach = func(id string) *apiNode {
		if n := nodes[id]; n != nil {
			return n
		}
		props := res[id]["Properties"].(map[string]any)
		n := &apiNode{part: props["PathPart"].(string), methods: map[string]string{}}
		parent := root
		if ref, ok := props["ParentId"].(map[string]any)["Ref"].(string); ok {
			parent = attach(ref)
		}
		parent.children = append(parent.children, n)
		nodes[id] = n
		return n
	}
	for id := range res {
		attach(id)
	}
	for id, m := range of("AWS::ApiGateway::Method") {
		props := m["Properties"].(map[string]any)
		n := root
		if ref, ok := props["ResourceId"].(map[string]any)["Ref"].(string); ok {
			n = nodes[ref]
		}
		integ, _ := props["Integration"].(map[string]any)
		fn := "mock"
		if integ["Type"] != "MOCK" {
			mm := fnArn.FindStringSubmatch(render(integ["Uri"]))
			if mm == nil {
				t.Fatalf("method %s: no function in %s", id, render(integ["Uri"]))
			}
			fn = mm[1]
		}
		n.methods[props["HttpMethod"].(string)] = fn
	}
	return root
}

// resolve is the function a request reaches, and the resource it went to;
// fn is "" when API Gateway answers itself (no resource or no method: 403
// Missing Authentication Token).
func (root *apiNode) resolve(method, path string) (fn, resource string) {
	n, trail := root, ""
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if path == "/" {
		segs = nil
	}
	for i := 0; i < len(segs); i++ {
		next := n.child(segs[i])
		if next == nil {
			return "", trail + "/" + segs[i] + " (no resource)"
		}
		n, trail = next, trail+"/"+next.part
		if strings.HasSuffix(next.part, "+}") {
			break
		}
	}
	if fn := n.methods[method]; fn != "" {
		return fn, trail
	}
	return n.methods["ANY"], trail
}

// child is the child that matches a path segment most specifically.
func (n *apiNode) child(seg string) *apiNode {
	rank := func(c *apiNode) int {
		switch {
		case c.part == seg:
			return 0
		case strings.HasSuffix(c.part, "+}"):
			return 2
		case strings.HasPrefix(c.part, "{"):
			return 1
		}
		return -1
	}
	var best *apiNode
	for _, c := range n.children {
		if r := rank(c); r >= 0 && (best == nil || r < rank(best)) {
			best = c
		}
	}
	return best
}

// walk calls fn with every resource's path (parameters as written).
func (n *apiNode) walk(prefix string, fn func(path string, n *apiNode)) {
	for _, c := range n.children {
		p := prefix + "/" + c.part
		fn(p, c)
		c.walk(p, fn)
	}
}

// routeFunctions are the functions SPEC §1 sends lifecycle operations to;
// every other route is the catalog function's (ApiFn).
var routeFunctions = map[string]string{
	"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}":                                   "DropFn",
	"GET /lifecycle/v1/catalogs/{c}/soft-deleted-tables":                                          "UndropFn",
	"POST /lifecycle/v1/catalogs/{c}/soft-deleted-tables/{uuid}/legal-hold":                       "UndropFn",
	"POST /lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/undrop":                "UndropFn",
	"POST /lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/purge-now":             "UndropFn",
	"POST /lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partitions/drop":       "PartitionDropFn",
	"PUT /lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partition-retention":    "PartitionDropFn",
	"GET /lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partition-retention":    "PartitionDropFn",
	"DELETE /lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partition-retention": "PartitionDropFn",
	"GET /lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/verify":                 "PartitionDropFn",
	"POST /lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/repair":                "PartitionDropFn",
}

var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// concrete fills a route pattern or resource path with sample values: a
// principal of several segments (an IAM role with a path), a namespace
// of two levels as the Iceberg REST spec encodes it.
func concrete(pattern string) string {
	return pathParam.ReplaceAllStringFunc(pattern, func(p string) string {
		switch p {
		case "{principal...}", "{proxy+}":
			return "arn:aws:iam::123456789012:role/team/etl"
		case "{namespace}":
			return "a%1Fb"
		}
		return "x" + strings.Trim(p, "{}.+")
	})
}

// frontDoor is how an API sends a request to a function: resolve names
// the function ("" when API Gateway answers itself) and where it matched;
// walk lists every resource or route path of the API.
type frontDoor struct {
	resolve func(method, path string) (fn, at string)
	paths   []string
}

func restDoor(t *testing.T, of func(string) map[string]map[string]any) frontDoor {
	tree := apiTree(t, of)
	var paths []string
	tree.walk("", func(path string, n *apiNode) {
		if !strings.HasSuffix(n.part, "+}") {
			paths = append(paths, path)
		}
	})
	return frontDoor{resolve: tree.resolve, paths: paths}
}

func httpDoor(t *testing.T, of func(string) map[string]map[string]any) frontDoor {
	rs := httpRoutesOf(t, of)
	var paths []string
	for _, r := range rs {
		if _, p, ok := strings.Cut(r.key, " "); ok && !strings.HasSuffix(p, "+}") {
			paths = append(paths, p)
		}
	}
	return frontDoor{resolve: func(method, path string) (string, string) {
		r, err := resolveHTTP(rs, method, path)
		if err != nil {
			return "", err.Error()
		}
		return r.fn, r.key
	}, paths: paths}
}

// Every route of the router reaches the function that serves it, through
// each front door (the HTTP API of the default synth and of the switch, the
// REST API of icehold:api=rest and of the switch), and a request no route
// names (another method, a path under any resource or route) reaches the
// catalog function, which answers it 404/405 in the ErrorModel (API
// Gateway's own 403 or 404 would tell the client to sign its requests or
// that nothing is there).
func TestAPIGatewayRoutesReachTheirFunctions(t *testing.T) {
	routes := map[string]bool{}
	for _, r := range router.Routes() {
		routes[r.Method+" "+r.Pattern] = true
	}
	for k := range routeFunctions {
		if !routes[k] {
			t.Errorf("routeFunctions names %q, which is no route of router.Routes()", k)
		}
	}
	for name, door := range map[string]frontDoor{
		"HTTP API":                    httpDoor(t, resources),
		"HTTP API (icehold:api=both)": httpDoor(t, byoResources),
		"REST API (icehold:api=rest)": restDoor(t, restResources),
		"REST API (icehold:api=both)": restDoor(t, byoResources),
	} {
		t.Run(name, func(t *testing.T) { walkRoutes(t, routes, door) })
	}
}

func walkRoutes(t *testing.T, routes map[string]bool, door frontDoor) {
	type want struct{ method, path, fn, why string }
	var cases []want
	patterns := map[string]bool{}
	for k := range routes {
		method, pattern, _ := strings.Cut(k, " ")
		fn := routeFunctions[k]
		if fn == "" {
			fn = "ApiFn"
		}
		cases = append(cases, want{method, concrete(pattern), fn, k})
		patterns[pattern] = true
	}
	for pattern := range patterns {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"} {
			if !routes[m+" "+pattern] {
				cases = append(cases, want{m, concrete(pattern), "ApiFn", "unrouted method of " + pattern})
			}
		}
	}
	cases = append(cases, want{"GET", "/", "ApiFn", "the root"})
	for _, path := range door.paths {
		cases = append(cases, want{"GET", concrete(path) + "/no-such-route", "ApiFn", "a path under " + path})
	}
	slices.SortFunc(cases, func(a, b want) int { return strings.Compare(a.method+a.path, b.method+b.path) })
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			got, at := door.resolve(c.method, c.path)
			if got == "" {
				got = "API Gateway's own answer"
			}
			if !strings.HasPrefix(got, c.fn) {
				t.Errorf("%s (%s) reaches %s at %s, want %s", c.path, c.why, got, at, c.fn)
			}
		})
	}
}

// Every method of the REST API a function serves is called with SigV4;
// the OAuth2 token endpoint's refusal (a mock integration) is the one
// without.
func TestAPIGatewayMethodsAreIAMAuthenticated(t *testing.T) {
	for id, m := range restResources("AWS::ApiGateway::Method") {
		props := m["Properties"].(map[string]any)
		mock := props["Integration"].(map[string]any)["Type"] == "MOCK"
		if auth := props["AuthorizationType"]; (auth == "AWS_IAM") == mock {
			t.Errorf("method %s (mock %v): authorization %v", id, mock, auth)
		}
	}
}

// The REST API walker itself: the precedence it models and its refusals.
func TestAPIGatewayResolution(t *testing.T) {
	tree := &apiNode{methods: map[string]string{}, children: []*apiNode{
		{part: "{proxy+}", methods: map[string]string{"ANY": "Proxy"}},
		{part: "users", methods: map[string]string{}, children: []*apiNode{
			{part: "me", methods: map[string]string{"PATCH": "Me"}},
			{part: "{id}", methods: map[string]string{"GET": "User"}},
		}},
	}}
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/users/42", "User"},
		{"PATCH", "/users/me", "Me"},
		{"GET", "/users/me", ""},        // the literal wins; it has no GET: no going back
		{"GET", "/users", ""},           // a resource without methods
		{"GET", "/users/42/x", ""},      // below a resource with no such child
		{"POST", "/other/a/b", "Proxy"}, // the greedy resource takes the rest
		{"DELETE", "/", ""},             // the root has no method here
	} {
		if got, _ := tree.resolve(c.method, c.path); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// httpRoute is one route of the template's HTTP API.
type httpRoute struct {
	key, auth string
	fn        string // the function its integration invokes
}

// httpRoutesOf reads the HTTP API's routes and the functions their
// integrations invoke from a template.
func httpRoutesOf(t *testing.T, of func(string) map[string]map[string]any) []httpRoute {
	t.Helper()
	fnOf := map[string]string{}
	for id, in := range of("AWS::ApiGatewayV2::Integration") {
		props := in["Properties"].(map[string]any)
		m := fnArn.FindStringSubmatch(render(props["IntegrationUri"]))
		if m == nil || props["PayloadFormatVersion"] != "2.0" || props["IntegrationType"] != "AWS_PROXY" {
			t.Fatalf("integration %s: %v", id, props)
		}
		fnOf["integrations/${"+unhash(id)+"}"] = m[1]
	}
	var out []httpRoute
	for id, r := range of("AWS::ApiGatewayV2::Route") {
		props := r["Properties"].(map[string]any)
		fn, ok := fnOf[render(props["Target"])]
		if !ok {
			t.Fatalf("route %s: target %s is no integration", id, render(props["Target"]))
		}
		out = append(out, httpRoute{key: props["RouteKey"].(string), auth: props["AuthorizationType"].(string), fn: fn})
	}
	return out
}

// resolveHTTP is the route an HTTP API picks for a request, as AWS
// documents it ("Create routes for HTTP APIs", Routing API requests): a
// route matching the whole path, then one with a greedy {name+}, then
// $default. Among several matches of one kind it picks only where AWS's
// examples say which wins: a route without path variables over one with
// them, else a route for the request's method over ANY; any other tie is
// an error (the routes would depend on an order AWS does not
// document). nil, nil: no route (API Gateway's 404).
func resolveHTTP(routes []httpRoute, method, path string) (*httpRoute, error) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if path == "/" {
		segs = nil
	}
	matches := func(pattern []string, segs []string) bool {
		if len(pattern) != len(segs) {
			return false
		}
		for i, p := range pattern {
			if !strings.HasPrefix(p, "{") && p != segs[i] {
				return false
			}
		}
		return true
	}
	var full, greedy []*httpRoute
	var def *httpRoute
	for i := range routes {
		r := &routes[i]
		if r.key == "$default" {
			def = r
			continue
		}
		m, p, _ := strings.Cut(r.key, " ")
		if m != method && m != "ANY" {
			continue
		}
		pattern := strings.Split(strings.Trim(p, "/"), "/")
		if last := pattern[len(pattern)-1]; strings.HasSuffix(last, "+}") {
			if len(segs) >= len(pattern) && matches(pattern[:len(pattern)-1], segs[:len(pattern)-1]) {
				greedy = append(greedy, r)
			}
		} else if matches(pattern, segs) {
			full = append(full, r)
		}
	}
	for _, set := range [][]*httpRoute{full, greedy} {
		switch len(set) {
		case 0:
			continue
		case 1:
			return set[0], nil
		}
		pathOf := func(r *httpRoute) string { _, p, _ := strings.Cut(r.key, " "); return p }
		var static []*httpRoute
		for _, r := range set {
			if !strings.Contains(pathOf(r), "{") {
				static = append(static, r)
			}
		}
		if len(static) == 1 {
			return static[0], nil
		}
		var forMethod []*httpRoute
		for _, r := range set {
			if !strings.HasPrefix(r.key, "ANY ") {
				forMethod = append(forMethod, r)
			}
		}
		if len(forMethod) == 1 {
			return forMethod[0], nil
		}
		keys := make([]string, len(set))
		for i, r := range set {
			keys[i] = r.key
		}
		return nil, fmt.Errorf("%s %s matches %v: AWS documents no order among them", method, path, keys)
	}
	return def, nil
}

// Every route of the HTTP API is called with SigV4 but the OAuth2 token
// endpoint's, whose refusal the catalog function answers (RFC 6749's shape,
// router.OAuthRefusal); $default takes what no route names, with SigV4.
func TestHTTPAPIRoutesAreIAMAuthenticated(t *testing.T) {
	for name, of := range map[string]func(string) map[string]map[string]any{"default": resources, "icehold:api=both": byoResources} {
		open := 0
		for _, r := range httpRoutesOf(t, of) {
			if r.auth == "AWS_IAM" {
				continue
			}
			open++
			if r.key != "POST /v1/oauth/tokens" || r.auth != "NONE" || r.fn != "ApiFn" {
				t.Errorf("%s: route %s (%s, to %s) is not called with SigV4", name, r.key, r.auth, r.fn)
			}
		}
		if open != 1 {
			t.Errorf("%s: %d routes without IAM authorization, want the OAuth2 token endpoint's", name, open)
		}
	}
}

// The HTTP API walker itself: the precedence AWS documents and its
// refusal of ties it does not.
func TestHTTPAPIResolution(t *testing.T) {
	routes := []httpRoute{
		{key: "GET /pets/dog/1", fn: "Static"}, {key: "GET /pets/dog/{id}", fn: "Dog"}, {key: "ANY /pets/dog/{id}", fn: "AnyDog"},
		{key: "GET /pets/{proxy+}", fn: "Pets"}, {key: "ANY /{proxy+}", fn: "Proxy"}, {key: "$default", fn: "Default"},
		{key: "GET /a/{x}/c", fn: "X"}, {key: "GET /a/b/{y}", fn: "Y"},
	}
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/pets/dog/1", "Static"},
		{"GET", "/pets/dog/2", "Dog"},
		{"POST", "/pets/dog/2", "AnyDog"},
		{"GET", "/pets/cat/1", "Pets"},
		{"POST", "/test/5", "Proxy"},
		{"GET", "/", "Default"},
		{"GET", "/a/b/c", "error"},
	} {
		r, err := resolveHTTP(routes, c.method, c.path)
		got := "error"
		if err == nil {
			got = r.fn
		}
		if got != c.want {
			t.Errorf("%s %s: %s (%v), want %s", c.method, c.path, got, err, c.want)
		}
	}
	if r, err := resolveHTTP(routes[:1], "GET", "/other"); r != nil || err != nil {
		t.Errorf("no route: %v %v, want API Gateway's 404", r, err)
	}
}
