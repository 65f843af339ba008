package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/partitions"
)

// The route table is the one place that says what each endpoint needs: the
// guard authorizes every request from it before anything else runs (the
// idempotency claim included), and the authorization matrix test walks it,
// so a new route without a row there fails.

// RouteSpec is what a route needs, as the tests and docs read it.
type RouteSpec struct {
	Method, Pattern string
	// Variant names a form of the request that needs other privileges
	// ("" for the plain form), e.g. "purgeRequested=true".
	Variant string
	// Privileges are all needed; Any: any one privilege on the catalog.
	Privileges []authz.Privilege
	Any        bool
	// System: checked on the system scope "*" (creating catalogs).
	System bool
}

type route struct {
	method, path string
	privs        []authz.Privilege
	any          bool // any privilege on the catalog (reads of namespaces, config)
	system       bool // always the system scope
	variants     []variant
	// query: the query parameters a lifecycle route takes (SPEC §2,
	// strict input: any other is a 400; see strictInput).
	query []string
	// canonical, when set, is the form of the body an Idempotency-Key's
	// receipt fingerprints (SPEC §5: the canonical payload).
	canonical func(body []byte) []byte
	h         http.HandlerFunc
}

// variant is a form of a request that needs other privileges than the
// plain one: the whole set it needs replaces the route's. When several
// forms apply (a commit that creates and sets a legal hold), the request
// needs every privilege of each.
type variant struct {
	name    string
	privs   []authz.Privilege
	applies func(r *http.Request, body []byte) bool
}

func (s *server) table() []route {
	var (
		create   = variant{"assert-create", []authz.Privilege{authz.TableWrite, authz.TableCreate}, commitCreates}
		txCreate = variant{"assert-create", []authz.Privilege{authz.TableWrite, authz.TableCreate}, transactionCreates}
		purge    = variant{"purgeRequested=true", []authz.Privilege{authz.TableDropWithPurge}, func(r *http.Request, _ []byte) bool {
			return r.URL.Query().Get("purgeRequested") == "true"
		}}
		overwrite = variant{"overwrite", []authz.Privilege{authz.TableCreate, authz.TableWrite}, registerOverwrites}
		// A body that writes icehold.legal-hold needs TABLE_LEGAL_HOLD too
		// (register's properties come from its metadata file: the catalog
		// checks those).
		createHold = variant{"legal-hold", []authz.Privilege{authz.TableCreate, authz.TableLegalHold}, createWritesLegalHold}
		commitHold = variant{"legal-hold", []authz.Privilege{authz.TableWrite, authz.TableLegalHold}, commitWritesLegalHold}
		txHold     = variant{"legal-hold", []authz.Privilege{authz.TableWrite, authz.TableLegalHold}, transactionWritesLegalHold}
		// A namespace's or the catalog's hold holds every table under it.
		nsCreateHold = variant{"legal-hold", []authz.Privilege{authz.NamespaceCreate, authz.TableLegalHold}, createWritesLegalHold}
		nsHold       = variant{"legal-hold", []authz.Privilege{authz.NamespaceCreate, authz.TableLegalHold}, propertiesWriteLegalHold}
		catalogHold  = variant{"legal-hold", []authz.Privilege{authz.CatalogManage, authz.TableLegalHold}, propertiesWriteLegalHold}
		ns           = "/v1/{prefix}/namespaces/{namespace}"
		tbl          = ns + "/tables/{table}"
		vw           = ns + "/views/{view}"
		lc           = "/lifecycle/v1/catalogs/{c}"
		p            = func(ps ...authz.Privilege) []authz.Privilege { return ps }
	)
	return []route{
		{method: "GET", path: "/v1/config", any: true, h: s.getConfig},
		{method: "GET", path: "/v1/{prefix}/namespaces", any: true, h: s.listNamespaces},
		{method: "POST", path: "/v1/{prefix}/namespaces", privs: p(authz.NamespaceCreate), variants: []variant{nsCreateHold}, h: s.createNamespace},
		{method: "GET", path: ns, any: true, h: s.loadNamespace},
		{method: "HEAD", path: ns, any: true, h: s.namespaceExists},
		{method: "DELETE", path: ns, privs: p(authz.NamespaceDrop), h: s.dropNamespace},
		{method: "POST", path: ns + "/properties", privs: p(authz.NamespaceCreate), variants: []variant{nsHold}, h: s.updateNamespace},
		{method: "GET", path: ns + "/tables", privs: p(authz.TableRead), h: s.listTables},
		{method: "POST", path: ns + "/tables", privs: p(authz.TableCreate), variants: []variant{createHold}, h: s.createTable},
		{method: "GET", path: tbl, privs: p(authz.TableRead), h: s.loadTable},
		{method: "HEAD", path: tbl, privs: p(authz.TableRead), h: s.exists(tables)},
		{method: "POST", path: tbl, privs: p(authz.TableWrite), variants: []variant{create, commitHold}, h: s.commitTable},
		{method: "DELETE", path: tbl, privs: p(authz.TableDrop), variants: []variant{purge}, h: s.drop(tables)},
		{method: "POST", path: tbl + "/unregister", privs: p(authz.TableDrop), h: s.unregisterTable},
		{method: "GET", path: tbl + "/credentials", privs: p(authz.TableRead), h: s.loadCredentials},
		{method: "POST", path: ns + "/register", privs: p(authz.TableCreate), variants: []variant{overwrite}, h: s.registerTable},
		{method: "POST", path: tbl + "/metrics", privs: p(authz.TableRead), h: s.reportMetrics},
		{method: "POST", path: "/v1/{prefix}/tables/rename", privs: p(authz.TableWrite, authz.TableCreate), h: s.renameTable},
		{method: "POST", path: "/v1/{prefix}/transactions/commit", privs: p(authz.TableWrite), variants: []variant{txCreate, txHold}, h: s.commitTransaction},

		// Views take the table privileges (a legal hold TABLE_LEGAL_HOLD).
		{method: "GET", path: ns + "/views", privs: p(authz.TableRead), h: s.listViews},
		{method: "POST", path: ns + "/views", privs: p(authz.TableCreate), variants: []variant{createHold}, h: s.createView},
		{method: "GET", path: vw, privs: p(authz.TableRead), h: s.loadView},
		{method: "HEAD", path: vw, privs: p(authz.TableRead), h: s.exists(views)},
		{method: "POST", path: vw, privs: p(authz.TableWrite), variants: []variant{commitHold}, h: s.replaceView},
		{method: "DELETE", path: vw, privs: p(authz.TableDrop), h: s.drop(views)},
		{method: "POST", path: ns + "/register-view", privs: p(authz.TableCreate), h: s.registerView},
		{method: "POST", path: "/v1/{prefix}/views/rename", privs: p(authz.TableWrite, authz.TableCreate), h: s.renameView},

		{method: "POST", path: "/lifecycle/v1/catalogs", privs: p(authz.CatalogManage), system: true, h: s.createCatalog},
		{method: "GET", path: lc, privs: p(authz.CatalogManage), h: s.getCatalog},
		{method: "POST", path: lc + "/properties", privs: p(authz.CatalogManage), variants: []variant{catalogHold}, h: s.updateCatalog},
		{method: "GET", path: lc + "/grants/{principal...}", privs: p(authz.CatalogManage), query: []string{"pattern"}, h: s.getGrant},
		{method: "PUT", path: lc + "/grants/{principal...}", privs: p(authz.CatalogManage), query: []string{"pattern"}, h: s.putGrant},
		{method: "DELETE", path: lc + "/grants/{principal...}", privs: p(authz.CatalogManage), query: []string{"pattern"}, h: s.deleteGrant},
		{method: "GET", path: lc + "/purge-jobs", privs: p(authz.CatalogManage), query: []string{"pageToken", "pageSize", "state", "kind", "namespace", "table"}, h: s.listJobs},
		{method: "GET", path: lc + "/purge-jobs/{id}", privs: p(authz.CatalogManage), h: s.getJob},
		{method: "POST", path: lc + "/purge-jobs/{id}/retry", privs: p(authz.CatalogManage), h: s.retryJob},
		{method: "POST", path: lc + "/purge-jobs/{id}/abandon", privs: p(authz.CatalogManage), h: s.abandonJob},
		{method: "GET", path: lc + "/unregistered-tables", privs: p(authz.CatalogManage), query: []string{"pageToken", "pageSize"}, h: s.listUnregistered},
		{method: "POST", path: lc + "/storage-sweep", privs: p(authz.CatalogManage), h: s.startSweep},
		{method: "POST", path: lc + "/namespaces/{namespace}/tables/{table}/storage-sweep", privs: p(authz.CatalogManage), h: s.startSweep},

		{method: "GET", path: lc + "/soft-deleted-tables", privs: p(authz.TableListSoftDeleted), query: []string{"pageToken", "pageSize", "namespace", "kind"}, h: s.listSoftDeleted},
		{method: "POST", path: lc + "/soft-deleted-tables/{uuid}/legal-hold", privs: p(authz.TableLegalHold), h: s.legalHold},
		{method: "POST", path: lc + "/namespaces/{namespace}/tables/{table}/undrop", privs: p(authz.TableUndrop), h: s.undrop(tables)},
		{method: "POST", path: lc + "/namespaces/{namespace}/tables/{table}/purge-now", privs: p(authz.TableDropWithPurge), h: s.purgeNow(tables)},
		{method: "POST", path: lc + "/namespaces/{namespace}/views/{view}/undrop", privs: p(authz.TableUndrop), h: s.undrop(views)},
		{method: "POST", path: lc + "/namespaces/{namespace}/views/{view}/purge-now", privs: p(authz.TableDropWithPurge), h: s.purgeNow(views)},

		{method: "POST", path: lc + "/namespaces/{namespace}/tables/{table}/partitions/drop", privs: p(authz.PartitionDrop), canonical: partitions.CanonicalPayload, h: s.dropPartitions},
		{method: "PUT", path: lc + "/namespaces/{namespace}/tables/{table}/partition-retention", privs: p(authz.PartitionDrop), h: s.putRetention},
		{method: "GET", path: lc + "/namespaces/{namespace}/tables/{table}/partition-retention", privs: p(authz.TableRead), h: s.getRetention},
		{method: "DELETE", path: lc + "/namespaces/{namespace}/tables/{table}/partition-retention", privs: p(authz.PartitionDrop), h: s.deleteRetention},
		{method: "GET", path: lc + "/namespaces/{namespace}/tables/{table}/verify", privs: p(authz.TableRead), h: s.verifyTable},
		{method: "POST", path: lc + "/namespaces/{namespace}/tables/{table}/repair", privs: p(authz.TableWrite), h: s.repairTable},
	}
}

// Routes lists every route and variant with what it needs.
func Routes() []RouteSpec {
	var out []RouteSpec
	for _, rt := range (&server{}).table() {
		out = append(out, RouteSpec{Method: rt.method, Pattern: rt.path, Privileges: rt.privs, Any: rt.any, System: rt.system})
		for _, v := range rt.variants {
			out = append(out, RouteSpec{Method: rt.method, Pattern: rt.path, Variant: v.name, Privileges: v.privs, System: rt.system})
		}
	}
	return out
}

func (s *server) routes() {
	for _, rt := range s.table() {
		s.mux.HandleFunc(rt.method+" "+rt.path, s.guard(rt))
	}
}

// guard authorizes a request from the route table, checks that its catalog
// exists, and only then claims an Idempotency-Key and runs the handler.
func (s *server) guard(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cat, err := catalogOf(r, s.DefaultCatalog)
		if err != nil {
			writeError(w, err)
			return
		}
		body := peekBody(r)
		privs := rt.privs
		var forms []authz.Privilege
		for _, v := range rt.variants {
			if v.applies(r, body) {
				forms = append(forms, v.privs...)
			}
		}
		if forms != nil {
			privs = forms
		}
		scope := cat
		if rt.system {
			scope = authz.SystemCatalog
		}
		if rt.any {
			err = s.Authz.CheckAny(r.Context(), scope, authz.All...)
		} else {
			err = s.Authz.Check(r.Context(), scope, privs...)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		if err := strictInput(r, rt); err != nil {
			writeError(w, err)
			return
		}
		if !rt.system && !(cat == authz.SystemCatalog && isGrantRoute(rt.path)) {
			info, err := s.Catalog.GetCatalog(r.Context(), cat)
			if err != nil {
				writeError(w, err)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), catalogKey{}, info))
		}
		if key := r.Header.Get("Idempotency-Key"); key != "" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.idempotent(w, r, key, rt.canonical, rt.h)
			return
		}
		rt.h(w, r)
	}
}

// strictInput reads the query of icehold's own routes (the lifecycle API
// and unregister) strictly, as their bodies are (SPEC §2, strict input): a
// query parameter the route does not take, given twice or given empty, is
// a 400 naming it. The Iceberg REST routes follow the spec's clients,
// which send parameters this would refuse (an empty pageToken).
func strictInput(r *http.Request, rt route) error {
	if !strings.HasPrefix(rt.path, "/lifecycle/") && !strings.HasSuffix(rt.path, "/unregister") {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return fmt.Errorf("%w: malformed query: %v", catalog.ErrBadRequest, err)
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch vs := q[k]; {
		case !slices.Contains(rt.query, k):
			takes := "takes no query parameters"
			if len(rt.query) > 0 {
				takes = "takes only " + strings.Join(rt.query, ", ")
			}
			return fmt.Errorf("%w: unknown query parameter %q: %s %s %s", catalog.ErrBadRequest, k, rt.method, rt.path, takes)
		case len(vs) > 1:
			return fmt.Errorf("%w: query parameter %q is given %d times", catalog.ErrBadRequest, k, len(vs))
		case vs[0] == "":
			return fmt.Errorf("%w: query parameter %q is empty (leave it out for none)", catalog.ErrBadRequest, k)
		}
	}
	return nil
}

func isGrantRoute(path string) bool { return strings.Contains(path, "/grants/") }

type catalogKey struct{}

// catalogInfo is the catalog the guard read for the request (its
// properties decide answers, e.g. vended credentials).
func catalogInfo(r *http.Request) catalog.CatalogInfo {
	info, _ := r.Context().Value(catalogKey{}).(catalog.CatalogInfo)
	return info
}

// catalogOf names the catalog a request acts on: the {prefix} or {c} path
// parameter, or for /v1/config the warehouse query (or the default).
func catalogOf(r *http.Request, def string) (string, error) {
	cat := r.PathValue("prefix")
	if cat == "" {
		cat = r.PathValue("c")
	}
	if cat == "" && r.URL.Path == "/v1/config" {
		if cat = r.URL.Query().Get("warehouse"); cat == "" {
			cat = def
		}
		if cat == "" {
			return "", fmt.Errorf("%w: the warehouse parameter names the catalog", catalog.ErrBadRequest)
		}
	}
	if cat == "" || cat == authz.SystemCatalog {
		return cat, nil
	}
	return cat, catalog.ValidateCatalogName(cat)
}

// peekBody returns the (already size-bounded) body and leaves it readable.
func peekBody(r *http.Request) []byte {
	if r.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

type requirementTypes struct {
	Requirements []struct {
		Type string `json:"type"`
	} `json:"requirements"`
}

func (c requirementTypes) creates() bool {
	for _, r := range c.Requirements {
		if r.Type == "assert-create" {
			return true
		}
	}
	return false
}

// commitCreates: a commit finishing a staged create creates a table.
func commitCreates(_ *http.Request, body []byte) bool {
	var c requirementTypes
	return json.Unmarshal(body, &c) == nil && c.creates()
}

// transactionCreates: any table change of a transaction creates a table.
func transactionCreates(_ *http.Request, body []byte) bool {
	var t struct {
		Changes []requirementTypes `json:"table-changes"`
	}
	if json.Unmarshal(body, &t) != nil {
		return false
	}
	for _, c := range t.Changes {
		if c.creates() {
			return true
		}
	}
	return false
}

// writesLegalHold: properties set or removed name icehold.legal-hold.
func writesLegalHold(set map[string]json.RawMessage, removed []string) bool {
	_, ok := set[catalog.PropLegalHold]
	return ok || slices.Contains(removed, catalog.PropLegalHold)
}

type propertyUpdates struct {
	Updates []struct {
		Action   string                     `json:"action"`
		Updates  map[string]json.RawMessage `json:"updates"`
		Removals []string                   `json:"removals"`
	} `json:"updates"`
}

func (c propertyUpdates) writesLegalHold() bool {
	for _, u := range c.Updates {
		if writesLegalHold(u.Updates, u.Removals) {
			return true
		}
	}
	return false
}

// createWritesLegalHold: a create whose properties name the legal hold.
func createWritesLegalHold(_ *http.Request, body []byte) bool {
	var c struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	return json.Unmarshal(body, &c) == nil && writesLegalHold(c.Properties, nil)
}

// propertiesWriteLegalHold: a namespace's or the catalog's properties
// update ({"updates": {...}, "removals": [...]}) that names the hold.
func propertiesWriteLegalHold(_ *http.Request, body []byte) bool {
	var u struct {
		Updates  map[string]json.RawMessage `json:"updates"`
		Removals []string                   `json:"removals"`
	}
	return json.Unmarshal(body, &u) == nil && writesLegalHold(u.Updates, u.Removals)
}

// commitWritesLegalHold: a commit that sets or removes the legal hold.
func commitWritesLegalHold(_ *http.Request, body []byte) bool {
	var c propertyUpdates
	return json.Unmarshal(body, &c) == nil && c.writesLegalHold()
}

// transactionWritesLegalHold: any change of a transaction that does.
func transactionWritesLegalHold(_ *http.Request, body []byte) bool {
	var t struct {
		Changes []propertyUpdates `json:"table-changes"`
	}
	if json.Unmarshal(body, &t) != nil {
		return false
	}
	return slices.ContainsFunc(t.Changes, propertyUpdates.writesLegalHold)
}

// registerOverwrites: overwriting replaces an existing table's history.
func registerOverwrites(_ *http.Request, body []byte) bool {
	var reg struct {
		Overwrite bool `json:"overwrite"`
	}
	return json.Unmarshal(body, &reg) == nil && reg.Overwrite
}
