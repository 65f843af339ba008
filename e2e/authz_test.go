package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/router"
)

// fixture is what one matrix row works on: its own namespace and table.
type fixture struct {
	ns, meta string
	// viewMeta: the metadata of a dropped view (register-view rows).
	viewMeta string
}

func newFixture(t *testing.T, admin string) fixture {
	t.Helper()
	ns := uniq("authz")
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", admin, map[string]any{"namespace": []string{ns}})
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables", admin, map[string]any{
		"name":   "t",
		"schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{map[string]any{"id": 1, "name": "x", "type": "long", "required": false}}},
	})
	// A dropped table's metadata: nobody owns its location, so it can be
	// registered (a live table's metadata is refused: its location is owned).
	out := mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables", admin, map[string]any{
		"name":   "r",
		"schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{map[string]any{"id": 1, "name": "x", "type": "long", "required": false}}},
	})
	var res struct {
		Loc string `json:"metadata-location"`
	}
	mustDecode(t, out, &res)
	mustCall(t, 204, "DELETE", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/r", admin, nil)
	return fixture{ns: ns, meta: res.Loc}
}

// row is one case of the authorization matrix: a route of the router's
// table (router.Routes), the request that exercises it, and the privileges
// the SPEC says it needs. Every route and variant of the table needs at
// least one row, and a row's privileges must be the table's.
type row struct {
	route string // "METHOD pattern" or "METHOD pattern [variant]"
	name  string
	path  string // {c} catalog, {ns} namespace, {job} a purge job of the fixture
	body  func(f fixture) any
	privs []authz.Privilege // all needed; nil: any one privilege of the catalog
	scope string            // "" the catalog; "*" the system scope
	want  int
}

func setProps() []any {
	return []any{map[string]any{"action": "set-properties", "updates": map[string]string{"k": "v"}}}
}

var legalHold = map[string]string{"icehold.legal-hold": "true"}

func setLegalHold() []any {
	return []any{map[string]any{"action": "set-properties", "updates": legalHold}}
}

// createUpdates is what a client sends to finish a staged create.
func createUpdates(f fixture, name string) []any {
	return []any{
		map[string]any{"action": "assign-uuid", "uuid": uuid.NewString()},
		map[string]any{"action": "upgrade-format-version", "format-version": 2},
		map[string]any{"action": "add-schema", "schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{map[string]any{"id": 1, "name": "x", "type": "long", "required": false}}}, "last-column-id": 1},
		map[string]any{"action": "set-current-schema", "schema-id": -1},
		map[string]any{"action": "add-spec", "spec": map[string]any{"spec-id": 0, "fields": []any{}}},
		map[string]any{"action": "set-default-spec", "spec-id": -1},
		map[string]any{"action": "add-sort-order", "sort-order": map[string]any{"order-id": 0, "fields": []any{}}},
		map[string]any{"action": "set-default-sort-order", "sort-order-id": -1},
		map[string]any{"action": "set-location", "location": "s3://icehold-warehouse/" + shared.Catalog + "/" + f.ns + "/" + name + "-staged"},
	}
}

var assertCreate = []any{map[string]any{"type": "assert-create"}}

func p(ps ...authz.Privilege) []authz.Privilege { return ps }

const (
	nsPath   = "/v1/{prefix}/namespaces/{namespace}"
	tblPath  = nsPath + "/tables/{table}"
	viewPath = nsPath + "/views/{view}"
	lcPath   = "/lifecycle/v1/catalogs/{c}"
)

var matrix = []row{
	{route: "GET /v1/config", name: "config", path: "/v1/config?warehouse={c}", want: 200},
	{route: "GET /v1/{prefix}/namespaces", name: "list namespaces", path: "/v1/{c}/namespaces", want: 200},
	{route: "POST /v1/{prefix}/namespaces", name: "create namespace", path: "/v1/{c}/namespaces", privs: p(authz.NamespaceCreate), want: 200,
		body: func(f fixture) any { return map[string]any{"namespace": []string{f.ns, "child"}} }},
	{route: "POST /v1/{prefix}/namespaces [legal-hold]", name: "create namespace with a legal hold", path: "/v1/{c}/namespaces", privs: p(authz.NamespaceCreate, authz.TableLegalHold), want: 200,
		body: func(f fixture) any {
			return map[string]any{"namespace": []string{f.ns, "held"}, "properties": legalHold}
		}},
	{route: "GET " + nsPath, name: "load namespace", path: "/v1/{c}/namespaces/{ns}", want: 200},
	{route: "HEAD " + nsPath, name: "namespace exists", path: "/v1/{c}/namespaces/{ns}", want: 204},
	{route: "POST " + nsPath + "/properties", name: "update namespace", path: "/v1/{c}/namespaces/{ns}/properties", privs: p(authz.NamespaceCreate), want: 200,
		body: func(fixture) any { return map[string]any{"updates": map[string]string{"a": "b"}} }},
	{route: "POST " + nsPath + "/properties [legal-hold]", name: "update namespace's legal hold", path: "/v1/{c}/namespaces/{ns}/properties", privs: p(authz.NamespaceCreate, authz.TableLegalHold), want: 200,
		body: func(fixture) any { return map[string]any{"updates": map[string]string{"icehold.legal-hold": "false"}} }},
	{route: "DELETE " + nsPath, name: "drop namespace", path: "/v1/{c}/namespaces/{ns}%1Fempty", privs: p(authz.NamespaceDrop), want: 204},
	{route: "GET " + nsPath + "/tables", name: "list tables", path: "/v1/{c}/namespaces/{ns}/tables", privs: p(authz.TableRead), want: 200},
	{route: "POST " + nsPath + "/tables", name: "create table", path: "/v1/{c}/namespaces/{ns}/tables", privs: p(authz.TableCreate), want: 200,
		body: func(fixture) any {
			return map[string]any{"name": "t_new", "schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{}}}
		}},
	{route: "POST " + nsPath + "/tables [legal-hold]", name: "create table with a legal hold", path: "/v1/{c}/namespaces/{ns}/tables", privs: p(authz.TableCreate, authz.TableLegalHold), want: 200,
		body: func(fixture) any {
			return map[string]any{"name": "t_held", "schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{}}, "properties": legalHold}
		}},
	{route: "GET " + tblPath, name: "load table", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: p(authz.TableRead), want: 200},
	{route: "HEAD " + tblPath, name: "table exists", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: p(authz.TableRead), want: 204},
	{route: "POST " + tblPath, name: "commit", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: p(authz.TableWrite), want: 200,
		body: func(fixture) any { return map[string]any{"requirements": []any{}, "updates": setProps()} }},
	{route: "POST " + tblPath + " [assert-create]", name: "commit with assert-create", path: "/v1/{c}/namespaces/{ns}/tables/t_staged",
		privs: p(authz.TableWrite, authz.TableCreate), want: 200,
		body: func(f fixture) any {
			return map[string]any{"requirements": assertCreate, "updates": createUpdates(f, "t_staged")}
		}},
	{route: "POST " + tblPath + " [legal-hold]", name: "commit setting a legal hold", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: p(authz.TableWrite, authz.TableLegalHold), want: 200,
		body: func(fixture) any { return map[string]any{"requirements": []any{}, "updates": setLegalHold()} }},
	{route: "DELETE " + tblPath, name: "drop table", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: p(authz.TableDrop), want: 204},
	{route: "DELETE " + tblPath + " [purgeRequested=true]", name: "drop table with purge", path: "/v1/{c}/namespaces/{ns}/tables/t?purgeRequested=true", privs: p(authz.TableDropWithPurge), want: 204},
	{route: "POST " + tblPath + "/unregister", name: "unregister", path: "/v1/{c}/namespaces/{ns}/tables/t/unregister", privs: p(authz.TableDrop), want: 200},
	{route: "POST " + nsPath + "/register", name: "register", path: "/v1/{c}/namespaces/{ns}/register", privs: p(authz.TableCreate), want: 200,
		body: func(f fixture) any { return map[string]any{"name": "t_reg", "metadata-location": f.meta} }},
	{route: "POST " + nsPath + "/register [overwrite]", name: "register with overwrite", path: "/v1/{c}/namespaces/{ns}/register",
		privs: p(authz.TableCreate, authz.TableWrite), want: 200,
		body: func(f fixture) any {
			return map[string]any{"name": "t", "metadata-location": f.meta, "overwrite": true}
		}},
	// The matrix's catalog vends no credentials: an allowed caller gets the
	// 400 that says so, a refused one the 403 (TestVendedCredentials covers
	// the vending).
	{route: "GET " + tblPath + "/credentials", name: "load credentials", path: "/v1/{c}/namespaces/{ns}/tables/t/credentials", privs: p(authz.TableRead), want: 400},
	{route: "POST " + tblPath + "/metrics", name: "metrics", path: "/v1/{c}/namespaces/{ns}/tables/t/metrics", privs: p(authz.TableRead), want: 204,
		body: func(fixture) any { return map[string]any{"report-type": "scan-report"} }},
	{route: "POST /v1/{prefix}/tables/rename", name: "rename", path: "/v1/{c}/tables/rename", privs: p(authz.TableWrite, authz.TableCreate), want: 204,
		body: func(f fixture) any {
			return map[string]any{"source": map[string]any{"namespace": []string{f.ns}, "name": "t"}, "destination": map[string]any{"namespace": []string{f.ns}, "name": "t_moved"}}
		}},
	{route: "POST /v1/{prefix}/transactions/commit", name: "multi-table commit", path: "/v1/{c}/transactions/commit", privs: p(authz.TableWrite), want: 204,
		body: func(f fixture) any {
			return map[string]any{"table-changes": []any{map[string]any{"identifier": map[string]any{"namespace": []string{f.ns}, "name": "t"}, "requirements": []any{}, "updates": setProps()}}}
		}},
	{route: "POST /v1/{prefix}/transactions/commit [assert-create]", name: "transaction with assert-create", path: "/v1/{c}/transactions/commit",
		privs: p(authz.TableWrite, authz.TableCreate), want: 204,
		body: func(f fixture) any {
			return map[string]any{"table-changes": []any{
				map[string]any{"identifier": map[string]any{"namespace": []string{f.ns}, "name": "t"}, "requirements": []any{}, "updates": setProps()},
				map[string]any{"identifier": map[string]any{"namespace": []string{f.ns}, "name": "t_tx"}, "requirements": assertCreate, "updates": createUpdates(f, "t_tx")},
			}}
		}},
	{route: "POST /v1/{prefix}/transactions/commit [legal-hold]", name: "transaction setting a legal hold", path: "/v1/{c}/transactions/commit",
		privs: p(authz.TableWrite, authz.TableLegalHold), want: 204,
		body: func(f fixture) any {
			return map[string]any{"table-changes": []any{map[string]any{"identifier": map[string]any{"namespace": []string{f.ns}, "name": "t"}, "requirements": []any{}, "updates": setLegalHold()}}}
		}},
	// Views take the table privileges ({view-made}: the fixture has view v).
	{route: "GET " + nsPath + "/views", name: "list views", path: "/v1/{c}/namespaces/{ns}/views", privs: p(authz.TableRead), want: 200},
	{route: "POST " + nsPath + "/views", name: "create view", path: "/v1/{c}/namespaces/{ns}/views", privs: p(authz.TableCreate), want: 200,
		body: func(f fixture) any { return viewBody("v_new", f.ns) }},
	{route: "POST " + nsPath + "/views [legal-hold]", name: "create view with a legal hold", path: "/v1/{c}/namespaces/{ns}/views", privs: p(authz.TableCreate, authz.TableLegalHold), want: 200,
		body: func(f fixture) any { return viewBody("v_held", f.ns, "icehold.legal-hold", "true") }},
	{route: "GET " + viewPath, name: "load view", path: "/v1/{c}/namespaces/{ns}/views/v{view-made}", privs: p(authz.TableRead), want: 200},
	{route: "HEAD " + viewPath, name: "view exists", path: "/v1/{c}/namespaces/{ns}/views/v{view-made}", privs: p(authz.TableRead), want: 204},
	{route: "POST " + viewPath, name: "replace view", path: "/v1/{c}/namespaces/{ns}/views/v{view-made}", privs: p(authz.TableWrite), want: 200,
		body: func(fixture) any { return map[string]any{"requirements": []any{}, "updates": setProps()} }},
	{route: "POST " + viewPath + " [legal-hold]", name: "replace view setting a legal hold", path: "/v1/{c}/namespaces/{ns}/views/v{view-made}", privs: p(authz.TableWrite, authz.TableLegalHold), want: 200,
		body: func(fixture) any { return map[string]any{"requirements": []any{}, "updates": setLegalHold()} }},
	{route: "DELETE " + viewPath, name: "drop view", path: "/v1/{c}/namespaces/{ns}/views/v{view-made}", privs: p(authz.TableDrop), want: 204},
	{route: "POST " + nsPath + "/register-view", name: "register view", path: "/v1/{c}/namespaces/{ns}/register-view{view-meta}", privs: p(authz.TableCreate), want: 200,
		body: func(f fixture) any { return map[string]any{"name": "v_reg", "metadata-location": f.viewMeta} }},
	{route: "POST /v1/{prefix}/views/rename", name: "rename view", path: "/v1/{c}/views/rename{view-made}", privs: p(authz.TableWrite, authz.TableCreate), want: 204,
		body: func(f fixture) any {
			return map[string]any{"source": map[string]any{"namespace": []string{f.ns}, "name": "v"}, "destination": map[string]any{"namespace": []string{f.ns}, "name": "v_moved"}}
		}},
	{route: "POST " + lcPath + "/namespaces/{namespace}/views/{view}/undrop", name: "undrop view", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/views/sv/undrop{soft-view}", privs: p(authz.TableUndrop), want: 200,
		body: func(fixture) any { return map[string]any{} }},
	{route: "POST " + lcPath + "/namespaces/{namespace}/views/{view}/purge-now", name: "purge-now view", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/views/sv/purge-now{soft-view}", privs: p(authz.TableDropWithPurge), want: 202,
		body: func(fixture) any { return map[string]any{} }},
	{route: "POST /lifecycle/v1/catalogs", name: "create catalog", path: "/lifecycle/v1/catalogs", privs: p(authz.CatalogManage), scope: "*", want: 201,
		body: func(fixture) any {
			name := uniq("cat")
			return map[string]any{"name": name, "warehouse": "s3://icehold-warehouse/" + name}
		}},
	{route: "GET " + lcPath, name: "get catalog", path: "/lifecycle/v1/catalogs/{c}", privs: p(authz.CatalogManage), want: 200},
	{route: "POST " + lcPath + "/properties", name: "catalog properties", path: "/lifecycle/v1/catalogs/{c}/properties", privs: p(authz.CatalogManage), want: 200,
		body: func(fixture) any { return map[string]any{"updates": map[string]string{"note": "x"}} }},
	{route: "POST " + lcPath + "/properties [legal-hold]", name: "catalog's legal hold", path: "/lifecycle/v1/catalogs/{c}/properties", privs: p(authz.CatalogManage, authz.TableLegalHold), want: 200,
		body: func(fixture) any { return map[string]any{"updates": map[string]string{"icehold.legal-hold": "false"}} }},
	{route: "PUT " + lcPath + "/grants/{principal...}", name: "put grant", path: "/lifecycle/v1/catalogs/{c}/grants/user:{ns}", privs: p(authz.CatalogManage), want: 200,
		body: func(fixture) any { return map[string]any{"privileges": []string{"TABLE_READ"}} }},
	{route: "GET " + lcPath + "/grants/{principal...}", name: "get grant", path: "/lifecycle/v1/catalogs/{c}/grants/user:{ns}", privs: p(authz.CatalogManage), want: 200},
	{route: "DELETE " + lcPath + "/grants/{principal...}", name: "delete grant", path: "/lifecycle/v1/catalogs/{c}/grants/user:{ns}", privs: p(authz.CatalogManage), want: 204},
	{route: "PUT " + lcPath + "/grants/{principal...}", name: "put grant on the system scope", path: "/lifecycle/v1/catalogs/*/grants/user:{ns}", privs: p(authz.CatalogManage), scope: "*", want: 200,
		body: func(fixture) any { return map[string]any{"privileges": []string{"CATALOG_MANAGE"}} }},
	{route: "GET " + lcPath + "/grants/{principal...}", name: "get grant on the system scope", path: "/lifecycle/v1/catalogs/*/grants/user:{ns}", privs: p(authz.CatalogManage), scope: "*", want: 200},
	{route: "DELETE " + lcPath + "/grants/{principal...}", name: "delete grant on the system scope", path: "/lifecycle/v1/catalogs/*/grants/user:{ns}", privs: p(authz.CatalogManage), scope: "*", want: 204},
	{route: "GET " + lcPath + "/purge-jobs", name: "list purge jobs", path: "/lifecycle/v1/catalogs/{c}/purge-jobs?namespace={ns}", privs: p(authz.CatalogManage), want: 200},
	{route: "GET " + lcPath + "/purge-jobs/{id}", name: "get purge job", path: "/lifecycle/v1/catalogs/{c}/purge-jobs/{job}", privs: p(authz.CatalogManage), want: 200},
	// The fixture's job is not FAILED: allowed, the answer is the 409 that says so.
	{route: "POST " + lcPath + "/purge-jobs/{id}/retry", name: "retry purge job", path: "/lifecycle/v1/catalogs/{c}/purge-jobs/{job}/retry", privs: p(authz.CatalogManage), want: 409},
	{route: "POST " + lcPath + "/purge-jobs/{id}/abandon", name: "abandon purge job", path: "/lifecycle/v1/catalogs/{c}/purge-jobs/{job}/abandon", privs: p(authz.CatalogManage), want: 409},
	{route: "GET " + lcPath + "/unregistered-tables", name: "list unregistered tables", path: "/lifecycle/v1/catalogs/{c}/unregistered-tables", privs: p(authz.CatalogManage), want: 200},
	{route: "GET " + lcPath + "/soft-deleted-tables", name: "list soft-deleted tables", path: "/lifecycle/v1/catalogs/{c}/soft-deleted-tables?namespace={ns}", privs: p(authz.TableListSoftDeleted), want: 200},
	{route: "POST " + lcPath + "/soft-deleted-tables/{uuid}/legal-hold", name: "legal hold", path: "/lifecycle/v1/catalogs/{c}/soft-deleted-tables/{soft}/legal-hold", privs: p(authz.TableLegalHold), want: 200,
		body: func(fixture) any { return map[string]any{"enabled": true} }},
	{route: "POST " + lcPath + "/namespaces/{namespace}/tables/{table}/undrop", name: "undrop", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/tables/sd/undrop{soft-made}", privs: p(authz.TableUndrop), want: 200,
		body: func(fixture) any { return map[string]any{} }},
	{route: "POST " + lcPath + "/namespaces/{namespace}/tables/{table}/purge-now", name: "purge-now", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/tables/sd/purge-now{soft-made}", privs: p(authz.TableDropWithPurge), want: 202,
		body: func(fixture) any { return map[string]any{} }},
	{route: "POST " + lcPath + "/namespaces/{namespace}/tables/{table}/partitions/drop", name: "partition drop", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/tables/pt/partitions/drop{part-made}", privs: p(authz.PartitionDrop), want: 200,
		body: func(fixture) any { return map[string]any{"partitions": []any{map[string]any{"x": 1}}} }},
	{route: "PUT " + lcPath + "/namespaces/{namespace}/tables/{table}/partition-retention", name: "set partition retention", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/tables/rt/partition-retention{ret-made}", privs: p(authz.PartitionDrop), want: 200,
		body: func(fixture) any { return map[string]any{"field": "ts_day", "keep": "P7D"} }},
	{route: "GET " + lcPath + "/namespaces/{namespace}/tables/{table}/partition-retention", name: "show partition retention", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/tables/rt/partition-retention{ret-set}", privs: p(authz.TableRead), want: 200},
	{route: "DELETE " + lcPath + "/namespaces/{namespace}/tables/{table}/partition-retention", name: "clear partition retention", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/tables/rt/partition-retention{ret-set}", privs: p(authz.PartitionDrop), want: 204},
	{route: "GET " + lcPath + "/namespaces/{namespace}/tables/{table}/verify", name: "verify", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/tables/t/verify", privs: p(authz.TableRead), want: 200},
	{route: "POST " + lcPath + "/namespaces/{namespace}/tables/{table}/repair", name: "repair", path: "/lifecycle/v1/catalogs/{c}/namespaces/{ns}/tables/t/repair", privs: p(authz.TableWrite), want: 200},
}

func routeKey(r router.RouteSpec) string {
	k := r.Method + " " + r.Pattern
	if r.Variant != "" {
		k += " [" + r.Variant + "]"
	}
	return k
}

func sorted(ps []authz.Privilege) []authz.Privilege {
	return slices.Sorted(slices.Values(ps))
}

// The matrix covers the router's whole table, with the SPEC's privileges.
func TestAuthorizationMatrixCoversEveryRoute(t *testing.T) {
	specs := map[string]router.RouteSpec{}
	for _, r := range router.Routes() {
		specs[routeKey(r)] = r
	}
	covered := map[string]bool{}
	for _, r := range matrix {
		spec, ok := specs[r.route]
		if !ok {
			t.Errorf("row %q names %q, which the router does not have", r.name, r.route)
			continue
		}
		covered[r.route] = true
		if spec.Any != (r.privs == nil) || !slices.Equal(sorted(spec.Privileges), sorted(r.privs)) {
			t.Errorf("%s: the router requires %v (any: %v), the SPEC %v", r.route, spec.Privileges, spec.Any, r.privs)
		}
		if spec.System && r.scope != authz.SystemCatalog {
			t.Errorf("%s: the router checks the system scope, the row does not", r.route)
		}
	}
	for k := range specs {
		if !covered[k] {
			t.Errorf("route %s has no row in the authorization matrix", k)
		}
	}
}

// grantTo makes a principal holding exactly privs and returns its token.
func grantTo(t *testing.T, admin, scope string, privs []authz.Privilege) string {
	t.Helper()
	principal := "user:" + uniq("p")
	names := make([]string, len(privs))
	for i, p := range privs {
		names[i] = string(p)
	}
	mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+scope+"/grants/"+principal, admin, map[string]any{"privileges": names})
	tok, err := localOnly(t).AddToken(principal)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Every route and variant: 401 without identity, 403 without the privilege
// (holding every other one), success with it.
func TestAuthorizationMatrix(t *testing.T) {
	localOnly(t)
	admin := shared.Token
	for _, r := range matrix {
		t.Run(r.name, func(t *testing.T) {
			f := newFixture(t, admin)
			// The grant routes act on a principal named after the fixture.
			if strings.Contains(r.name, "grant") && !strings.HasPrefix(r.name, "put grant") {
				scope := shared.Catalog
				if r.scope != "" {
					scope = r.scope
				}
				mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+scope+"/grants/user:"+f.ns, admin, map[string]any{"privileges": []string{"CATALOG_MANAGE"}})
			}
			if r.name == "drop namespace" {
				mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", admin, map[string]any{"namespace": []string{f.ns, "empty"}})
			}
			job := ""
			if strings.Contains(r.path, "{job}") {
				mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+f.ns+"/tables", admin, map[string]any{"name": "j", "schema": rawSchema})
				job = dropPurge(t, f.ns, "j").ID
			}
			soft := ""
			if strings.Contains(r.path, "{soft") {
				soft = softDeletedIn(t, shared.Catalog, f.ns, "sd")
			}
			if strings.Contains(r.path, "{view-made}") {
				mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+f.ns+"/views", admin, viewBody("v", f.ns))
			}
			if strings.Contains(r.path, "{view-meta}") {
				f.viewMeta = droppedViewIn(t, shared.Catalog, f.ns, "rv")
			}
			if strings.Contains(r.path, "{soft-view}") {
				softDeletedViewIn(t, shared.Catalog, f.ns, "sv")
			}
			if strings.Contains(r.path, "{part-made}") {
				partitionedIn(t, f.ns, "pt")
			}
			if strings.Contains(r.path, "{ret-") {
				retentionIn(t, f.ns, "rt", strings.Contains(r.path, "{ret-set}"))
			}
			path := strings.NewReplacer("{c}", shared.Catalog, "{ns}", f.ns, "{job}", job, "{soft}", soft, "{soft-made}", "", "{part-made}", "",
				"{ret-made}", "", "{ret-set}", "", "{view-made}", "", "{view-meta}", "", "{soft-view}", "").Replace(r.path)
			var body any
			if r.body != nil {
				body = r.body(f)
			}
			scope := shared.Catalog
			if r.scope != "" {
				scope = r.scope
			}

			if status, out := call(t, r.method(), path, "", body); status != http.StatusUnauthorized {
				t.Errorf("no identity: status %d, want 401: %s", status, out)
			}

			var others []authz.Privilege
			if r.privs != nil {
				for _, p := range authz.All {
					if !slices.Contains(r.privs, p) {
						others = append(others, p)
					}
				}
			}
			// Without: every other privilege on the catalog, and the system
			// scope's only privilege (which must reach into no catalog).
			without := grantTo(t, admin, shared.Catalog, others)
			if r.scope == authz.SystemCatalog {
				// Everything on the catalog, nothing on the system scope.
				mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+shared.Catalog+"/grants/"+principalOf(t, without), admin, map[string]any{"privileges": allNames()})
			} else {
				mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/*/grants/"+principalOf(t, without), admin, map[string]any{"privileges": []string{"CATALOG_MANAGE"}})
			}
			if status, out := call(t, r.method(), path, without, body); status != http.StatusForbidden {
				t.Errorf("without %v: status %d, want 403: %s", r.privs, status, out)
			} else if r.method() != "HEAD" {
				if typ, _, _ := errorModel(t, out); typ != "ForbiddenException" {
					t.Errorf("403 type %q", typ)
				}
			}

			need := r.privs
			if need == nil {
				need = []authz.Privilege{authz.TableRead}
			}
			with := grantTo(t, admin, scope, need)
			if status, out := call(t, r.method(), path, with, body); status != r.want {
				t.Errorf("with %v: status %d, want %d: %s", need, status, r.want, out)
			}
		})
	}
}

// method is the HTTP method of the row's route.
func (r row) method() string { return strings.Fields(r.route)[0] }

func allNames() []string {
	out := make([]string, len(authz.All))
	for i, p := range authz.All {
		out[i] = string(p)
	}
	return out
}

// principalOf finds the principal behind a token made by grantTo.
func principalOf(t *testing.T, token string) string {
	t.Helper()
	p := localOnly(t).PrincipalOf(token)
	if p == "" {
		t.Fatal(fmt.Sprintf("unknown token %s", token))
	}
	return p
}
