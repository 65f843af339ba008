package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/icehold/icehold/shared/authz"
)

// fixture is what one matrix row works on: its own namespace and table.
type fixture struct {
	ns, meta string
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

type route struct {
	name   string
	method string
	path   string // {c} catalog, {ns} namespace, {t} table
	body   func(f fixture) any
	privs  []authz.Privilege // all needed; nil: any one privilege of the catalog
	system bool              // the privilege is held on the system scope "*"
	want   int
}

func setProps() []any {
	return []any{map[string]any{"action": "set-properties", "updates": map[string]string{"k": "v"}}}
}

var routes = []route{
	{name: "config", method: "GET", path: "/v1/config?warehouse={c}", want: 200},
	{name: "list namespaces", method: "GET", path: "/v1/{c}/namespaces", want: 200},
	{name: "create namespace", method: "POST", path: "/v1/{c}/namespaces", privs: []authz.Privilege{authz.NamespaceCreate}, want: 200,
		body: func(f fixture) any { return map[string]any{"namespace": []string{f.ns, "child"}} }},
	{name: "load namespace", method: "GET", path: "/v1/{c}/namespaces/{ns}", want: 200},
	{name: "namespace exists", method: "HEAD", path: "/v1/{c}/namespaces/{ns}", want: 204},
	{name: "update namespace", method: "POST", path: "/v1/{c}/namespaces/{ns}/properties", privs: []authz.Privilege{authz.NamespaceCreate}, want: 200,
		body: func(fixture) any { return map[string]any{"updates": map[string]string{"a": "b"}} }},
	{name: "drop namespace", method: "DELETE", path: "/v1/{c}/namespaces/{ns}%1Fempty", privs: []authz.Privilege{authz.NamespaceDrop}, want: 204},
	{name: "list tables", method: "GET", path: "/v1/{c}/namespaces/{ns}/tables", privs: []authz.Privilege{authz.TableRead}, want: 200},
	{name: "create table", method: "POST", path: "/v1/{c}/namespaces/{ns}/tables", privs: []authz.Privilege{authz.TableCreate}, want: 200,
		body: func(fixture) any {
			return map[string]any{"name": "t_new", "schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{}}}
		}},
	{name: "load table", method: "GET", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: []authz.Privilege{authz.TableRead}, want: 200},
	{name: "table exists", method: "HEAD", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: []authz.Privilege{authz.TableRead}, want: 204},
	{name: "commit", method: "POST", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: []authz.Privilege{authz.TableWrite}, want: 200,
		body: func(fixture) any { return map[string]any{"requirements": []any{}, "updates": setProps()} }},
	{name: "drop table", method: "DELETE", path: "/v1/{c}/namespaces/{ns}/tables/t", privs: []authz.Privilege{authz.TableDrop}, want: 204},
	{name: "drop table with purge", method: "DELETE", path: "/v1/{c}/namespaces/{ns}/tables/t?purgeRequested=true", privs: []authz.Privilege{authz.TableDropWithPurge}, want: 204},
	{name: "register", method: "POST", path: "/v1/{c}/namespaces/{ns}/register", privs: []authz.Privilege{authz.TableCreate}, want: 200,
		body: func(f fixture) any { return map[string]any{"name": "t_reg", "metadata-location": f.meta} }},
	{name: "metrics", method: "POST", path: "/v1/{c}/namespaces/{ns}/tables/t/metrics", privs: []authz.Privilege{authz.TableRead}, want: 204,
		body: func(fixture) any { return map[string]any{"report-type": "scan-report"} }},
	{name: "rename", method: "POST", path: "/v1/{c}/tables/rename", privs: []authz.Privilege{authz.TableWrite, authz.TableCreate}, want: 204,
		body: func(f fixture) any {
			return map[string]any{"source": map[string]any{"namespace": []string{f.ns}, "name": "t"}, "destination": map[string]any{"namespace": []string{f.ns}, "name": "t_moved"}}
		}},
	{name: "multi-table commit", method: "POST", path: "/v1/{c}/transactions/commit", privs: []authz.Privilege{authz.TableWrite}, want: 204,
		body: func(f fixture) any {
			return map[string]any{"table-changes": []any{map[string]any{"identifier": map[string]any{"namespace": []string{f.ns}, "name": "t"}, "requirements": []any{}, "updates": setProps()}}}
		}},
	{name: "create catalog", method: "POST", path: "/lifecycle/v1/catalogs", privs: []authz.Privilege{authz.CatalogManage}, system: true, want: 201,
		body: func(fixture) any {
			name := uniq("cat")
			return map[string]any{"name": name, "warehouse": "s3://icehold-warehouse/" + name}
		}},
	{name: "get catalog", method: "GET", path: "/lifecycle/v1/catalogs/{c}", privs: []authz.Privilege{authz.CatalogManage}, want: 200},
	{name: "catalog properties", method: "POST", path: "/lifecycle/v1/catalogs/{c}/properties", privs: []authz.Privilege{authz.CatalogManage}, want: 200,
		body: func(fixture) any { return map[string]any{"updates": map[string]string{"note": "x"}} }},
	{name: "put grant", method: "PUT", path: "/lifecycle/v1/catalogs/{c}/grants/user:{ns}", privs: []authz.Privilege{authz.CatalogManage}, want: 200,
		body: func(fixture) any { return map[string]any{"privileges": []string{"TABLE_READ"}} }},
	{name: "get grant", method: "GET", path: "/lifecycle/v1/catalogs/{c}/grants/user:{ns}", privs: []authz.Privilege{authz.CatalogManage}, want: 200},
	{name: "list purge jobs", method: "GET", path: "/lifecycle/v1/catalogs/{c}/purge-jobs?namespace={ns}", privs: []authz.Privilege{authz.CatalogManage}, want: 200},
	{name: "delete grant", method: "DELETE", path: "/lifecycle/v1/catalogs/{c}/grants/user:{ns}", privs: []authz.Privilege{authz.CatalogManage}, want: 204},
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

// Every endpoint: 401 without identity, 403 without the privilege (holding
// every other one), success with it.
func TestAuthorizationMatrix(t *testing.T) {
	localOnly(t)
	admin := shared.Token
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			f := newFixture(t, admin)
			// The grant routes act on a principal named after the fixture.
			if strings.Contains(r.name, "grant") && r.name != "put grant" {
				mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+shared.Catalog+"/grants/user:"+f.ns, admin, map[string]any{"privileges": []string{"TABLE_READ"}})
			}
			if r.name == "drop namespace" {
				mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", admin, map[string]any{"namespace": []string{f.ns, "empty"}})
			}
			path := strings.NewReplacer("{c}", shared.Catalog, "{ns}", f.ns).Replace(r.path)
			var body any
			if r.body != nil {
				body = r.body(f)
			}
			scope := shared.Catalog
			if r.system {
				scope = authz.SystemCatalog
			}

			if status, out := call(t, r.method, path, "", body); status != http.StatusUnauthorized {
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
			without := grantTo(t, admin, scope, others)
			if r.system { // and everything on the catalog itself
				mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+shared.Catalog+"/grants/"+principalOf(t, without), admin, map[string]any{"privileges": allNames()})
			}
			if status, out := call(t, r.method, path, without, body); status != http.StatusForbidden {
				t.Errorf("without %v: status %d, want 403: %s", r.privs, status, out)
			} else if r.method != "HEAD" {
				if typ, _, _ := errorModel(t, out); typ != "ForbiddenException" {
					t.Errorf("403 type %q", typ)
				}
			}

			need := r.privs
			if need == nil {
				need = []authz.Privilege{authz.TableRead}
			}
			with := grantTo(t, admin, scope, need)
			if status, out := call(t, r.method, path, with, body); status != r.want {
				t.Errorf("with %v: status %d, want %d: %s", need, status, r.want, out)
			}
		})
	}
}

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
