package e2e

import (
	"strings"
	"testing"
)

// Defect (issue 35): lifecycle queries and the unregister body were read
// leniently: POST …/unregister {"purge":true} unregistered the table,
// soft-deleted-tables?kind= and ?kind=view&kind=table listed everything.
// Every lifecycle body and query is strict: an unknown, empty or repeated
// parameter, an unknown field: a 400 ErrorModel naming it, and nothing
// changes.
func TestLifecycleQueriesAndBodiesAreStrict(t *testing.T) {
	srv := localOnly(t)
	waitIdle(t, srv)
	c := shared.Catalog
	ns := newNamespace(t, "strict")
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/tables", shared.Token, map[string]any{"name": "t", "schema": rawSchema})
	lc := "/lifecycle/v1/catalogs/" + c
	tbl := lc + "/namespaces/" + ns + "/tables/t"
	for _, tc := range []struct {
		name, method, path, body, says string
	}{
		{"unregister with a body", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables/t/unregister", `{"purge":true}`, "purge"},
		{"unregister with a query", "POST", "/v1/" + c + "/namespaces/" + ns + "/tables/t/unregister?purge=true", ``, "purge"},
		{"empty kind", "GET", lc + "/soft-deleted-tables?kind=", ``, "kind"},
		{"repeated kind", "GET", lc + "/soft-deleted-tables?kind=view&kind=table", ``, "kind"},
		{"unknown parameter", "GET", lc + "/soft-deleted-tables?nmespace=" + ns, ``, "nmespace"},
		{"empty page token", "GET", lc + "/purge-jobs?pageToken=", ``, "pageToken"},
		{"repeated page size", "GET", lc + "/purge-jobs?pageSize=1&pageSize=2", ``, "pageSize"},
		{"repeated state", "GET", lc + "/purge-jobs?state=FAILED&state=RUNNING", ``, "state"},
		{"unknown job parameter", "GET", lc + "/purge-jobs?status=FAILED", ``, "status"},
		{"a query where none is taken", "GET", lc + "?verbose=1", ``, "verbose"},
		{"a query on verify", "GET", tbl + "/verify?deep=true", ``, "deep"},
		{"a query on a job", "GET", lc + "/purge-jobs/pj-0?x=1", ``, "x"},
		{"malformed query", "GET", lc + "/purge-jobs?state=%zz", ``, "query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := storeDigest(t, srv)
			var body any
			if tc.body != "" {
				body = tc.body
			}
			st, out := call(t, tc.method, tc.path, shared.Token, body)
			if st != 400 {
				t.Fatalf("%d %s, want 400", st, out)
			}
			if _, _, msg := errorModel(t, out); !strings.Contains(msg, tc.says) {
				t.Errorf("message %q does not name %q", msg, tc.says)
			}
			if after := storeDigest(t, srv); after != before {
				t.Errorf("the store changed")
			}
		})
	}
	mustCall(t, 200, "GET", "/v1/"+c+"/namespaces/"+ns+"/tables/t", shared.Token, nil)
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/tables/t/unregister", shared.Token, map[string]any{})
}

// Defect (issue 35): a rename onto a view's name said "table already
// exists"; an assert-create over a view said "the table changed
// concurrently". A table operation refused because a view holds the name
// says so.
func TestANameHeldByAViewIsNamedAsAView(t *testing.T) {
	ns := uniq("vname")
	base := "/v1/" + shared.Catalog + "/namespaces/" + ns
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	mustCall(t, 200, "POST", base+"/views", shared.Token, viewBody("v", ns))
	mustCall(t, 200, "POST", base+"/tables", shared.Token, map[string]any{"name": "t", "schema": rawSchema})
	mustCall(t, 200, "POST", base+"/tables", shared.Token, map[string]any{"name": "r", "schema": rawSchema})
	free := loadedMetadataLocation(t, base+"/tables/r")
	mustCall(t, 204, "DELETE", base+"/tables/r", shared.Token, nil)
	ident := map[string]any{"namespace": []string{ns}, "name": "v"}
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"rename a table onto it", "POST", "/v1/" + shared.Catalog + "/tables/rename", map[string]any{"source": map[string]any{"namespace": []string{ns}, "name": "t"}, "destination": ident}},
		{"commit assert-create", "POST", base + "/tables/v", map[string]any{"requirements": assertCreate, "updates": createUpdates(fixture{ns: ns}, "v")}},
		{"transaction assert-create", "POST", "/v1/" + shared.Catalog + "/transactions/commit", map[string]any{"table-changes": []any{map[string]any{"identifier": ident, "requirements": assertCreate, "updates": createUpdates(fixture{ns: ns}, "v")}}}},
		{"register a table", "POST", base + "/register", map[string]any{"name": "v", "metadata-location": free}},
		{"create a table", "POST", base + "/tables", map[string]any{"name": "v", "schema": rawSchema}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, out := call(t, c.method, c.path, shared.Token, c.body)
			_, _, msg := errorModel(t, out)
			if st != 409 || !strings.Contains(msg, "view") || strings.Contains(msg, "table already exists") || strings.Contains(msg, "concurrently") {
				t.Errorf("%d %q, want a 409 saying a view holds the name", st, msg)
			}
		})
	}
}
