package infra_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/icehold/icehold/shared/router"
)

// API Gateway (REST) resolves a request against the deployed resource tree
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

// apiTree reads the resource tree and its methods from the template.
func apiTree(t *testing.T) *apiNode {
	t.Helper()
	root := &apiNode{part: "", methods: map[string]string{}}
	nodes := map[string]*apiNode{}
	res := resources("AWS::ApiGateway::Resource")
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
	for id, m := range resources("AWS::ApiGateway::Method") {
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

// Every route of the router reaches the function that serves it, and a
// request no route names (another method, a path under any resource)
// reaches the catalog function, which answers it 404/405 in the ErrorModel
// (API Gateway's own 403 would tell the client to sign its requests).
func TestAPIGatewayRoutesReachTheirFunctions(t *testing.T) {
	tree := apiTree(t)
	routes := map[string]bool{}
	for _, r := range router.Routes() {
		routes[r.Method+" "+r.Pattern] = true
	}
	for k := range routeFunctions {
		if !routes[k] {
			t.Errorf("routeFunctions names %q, which is no route of router.Routes()", k)
		}
	}
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
	tree.walk("", func(path string, n *apiNode) {
		if !strings.HasSuffix(n.part, "+}") {
			cases = append(cases, want{"GET", concrete(path) + "/no-such-route", "ApiFn", "a path under resource " + path})
		}
	})
	slices.SortFunc(cases, func(a, b want) int { return strings.Compare(a.method+a.path, b.method+b.path) })
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			got, at := tree.resolve(c.method, c.path)
			if got == "" {
				got = "API Gateway's 403"
			}
			if !strings.HasPrefix(got, c.fn) {
				t.Errorf("%s (%s) reaches %s at resource %s, want %s", c.path, c.why, got, at, c.fn)
			}
		})
	}
}

// Every method a function serves is called with SigV4; the OAuth2 token
// endpoint's refusal (a mock integration) is the one without.
func TestAPIGatewayMethodsAreIAMAuthenticated(t *testing.T) {
	for id, m := range resources("AWS::ApiGateway::Method") {
		props := m["Properties"].(map[string]any)
		mock := props["Integration"].(map[string]any)["Type"] == "MOCK"
		if auth := props["AuthorizationType"]; (auth == "AWS_IAM") == mock {
			t.Errorf("method %s (mock %v): authorization %v", id, mock, auth)
		}
	}
}

// The walker itself: the precedence it models and its refusals.
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
