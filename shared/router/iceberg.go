package router

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/credentials"
)

// endpoints are advertised in /v1/config so clients (iceberg-go, Java) use
// HEAD, the multi-table commit and the views.
var endpoints = []string{
	"GET /v1/{prefix}/namespaces",
	"POST /v1/{prefix}/namespaces",
	"GET /v1/{prefix}/namespaces/{namespace}",
	"HEAD /v1/{prefix}/namespaces/{namespace}",
	"DELETE /v1/{prefix}/namespaces/{namespace}",
	"POST /v1/{prefix}/namespaces/{namespace}/properties",
	"GET /v1/{prefix}/namespaces/{namespace}/tables",
	"POST /v1/{prefix}/namespaces/{namespace}/tables",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
	"POST /v1/{prefix}/namespaces/{namespace}/register",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister",
	"GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
	"POST /v1/{prefix}/tables/rename",
	"POST /v1/{prefix}/transactions/commit",
	"GET /v1/{prefix}/namespaces/{namespace}/views",
	"POST /v1/{prefix}/namespaces/{namespace}/views",
	"GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
	"HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
	"POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
	"DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
	"POST /v1/{prefix}/namespaces/{namespace}/register-view",
	"POST /v1/{prefix}/views/rename",
}

func (s *server) getConfig(w http.ResponseWriter, r *http.Request) {
	cat, err := catalogOf(r, s.DefaultCatalog)
	if err != nil {
		writeError(w, err)
		return
	}
	defaults := s.clientConfig(r)
	if catalog.Vending(catalogInfo(r).Properties) == catalog.VendingRequired {
		// Java, PyIceberg and iceberg-go send header.* properties as headers.
		defaults["header."+delegationHeader] = "vended-credentials"
	}
	// Engines must not delete files behind the catalog's back: soft delete
	// and the purge pipeline own deletion.
	defaults["s3.delete-enabled"] = "false"
	defaults["rest-catalog-purge"] = "true"
	noStore(w, defaults)
	writeJSON(w, http.StatusOK, map[string]any{
		"defaults":                 defaults,
		"overrides":                map[string]string{"prefix": cat},
		"endpoints":                endpoints,
		"idempotency-key-lifetime": ReceiptLifetimeISO,
	})
}

func (s *server) listNamespaces(w http.ResponseWriter, r *http.Request) {
	cat := r.PathValue("prefix")
	token, size, err := paging(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var parent []string
	if p := r.URL.Query().Get("parent"); p != "" {
		if parent, err = namespaceParam(p); err != nil {
			writeError(w, err)
			return
		}
	}
	nss, next, err := s.Catalog.ListNamespaces(r.Context(), cat, parent, token, size)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespaces": nss, "next-page-token": nullable(next)})
}

func (s *server) createNamespace(w http.ResponseWriter, r *http.Request) {
	cat := r.PathValue("prefix")
	var req catalog.NamespaceInfo
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	ns, err := s.Catalog.CreateNamespace(r.Context(), cat, req.Namespace, req.Properties)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ns)
}

// withNamespace parses the namespace path parameter (the guard has
// authorized the caller already).
func (s *server) withNamespace(w http.ResponseWriter, r *http.Request) (string, []string, bool) {
	cat := r.PathValue("prefix")
	ns, err := namespaceParam(r.PathValue("namespace"))
	if err != nil {
		writeError(w, err)
		return "", nil, false
	}
	return cat, ns, true
}

func (s *server) loadNamespace(w http.ResponseWriter, r *http.Request) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	info, err := s.Catalog.LoadNamespace(r.Context(), cat, ns)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *server) namespaceExists(w http.ResponseWriter, r *http.Request) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	if _, err := s.Catalog.LoadNamespace(r.Context(), cat, ns); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) dropNamespace(w http.ResponseWriter, r *http.Request) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	if err := s.Catalog.DropNamespace(r.Context(), cat, ns); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) updateNamespace(w http.ResponseWriter, r *http.Request) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	var req struct {
		Removals []string          `json:"removals"`
		Updates  map[string]string `json:"updates"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Catalog.UpdateNamespaceProperties(r.Context(), cat, ns, req.Updates, req.Removals)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *server) listTables(w http.ResponseWriter, r *http.Request) {
	s.list(w, r, s.Catalog.ListTables)
}

// list answers a listing of a namespace's tables or views, a page at a time.
func (s *server) list(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, cat string, ns []string, token string, limit int) ([]catalog.Ident, string, error)) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	token, size, err := paging(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ids, next, err := do(r.Context(), cat, ns, token, size)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"identifiers": ids, "next-page-token": nullable(next)})
}

// writeTable answers the REST spec's LoadTableResult, tagged (a staged
// create, which has no metadata location yet, has no tag), with the
// storage credentials vended for it (nil: none).
func (s *server) writeTable(w http.ResponseWriter, r *http.Request, res catalog.TableResult, snapshots string, v *credentials.Vended) {
	config := s.clientConfig(r)
	path := tablePath(catalogInfo(r).Name, res.Entry.Namespace, res.Entry.Name)
	out := map[string]any{"metadata": json.RawMessage(res.Metadata), "config": config}
	if res.MetadataLocation != "" {
		out["metadata-location"] = res.MetadataLocation
		w.Header().Set("ETag", tableTag(path, res.MetadataLocation, snapshots, tagOf(v)))
	}
	noStore(w, config)
	if v != nil {
		out["storage-credentials"] = storageCredentials(v, res.MetadataLocation)
		config[refreshKey] = path + "/credentials"
		w.Header().Set("Cache-Control", "no-store")
	}
	writeJSON(w, http.StatusOK, out)
}

// writeTableVended is writeTable with the credentials the request gets.
func (s *server) writeTableVended(w http.ResponseWriter, r *http.Request, res catalog.TableResult, snapshots string) {
	var v *credentials.Vended
	vend, err := s.vends(r)
	if err == nil && vend && res.MetadataLocation != "" {
		v, err = s.vend(r, res.Entry)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeTable(w, r, res, snapshots, v)
}

func (s *server) createTable(w http.ResponseWriter, r *http.Request) {
	answer(s.withNamespace, s.Catalog.CreateTable, s.writeCreated)(w, r)
}

// writeCreated answers a created or registered table, with the
// credentials the request gets.
func (s *server) writeCreated(w http.ResponseWriter, r *http.Request, res catalog.TableResult) {
	s.writeTableVended(w, r, res, "all")
}

func (s *server) loadTable(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withTable(w, r)
	if !ok {
		return
	}
	mode := r.URL.Query().Get("snapshots")
	if mode != "" && mode != "all" && mode != "refs" {
		writeError(w, fmt.Errorf("%w: snapshots must be all or refs", catalog.ErrBadRequest))
		return
	}
	e, err := s.Catalog.Entry(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	vend, err := s.vends(r)
	if err != nil {
		writeError(w, err)
		return
	}
	// A revalidation is answered from the entry alone: no metadata read,
	// no credentials vended.
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		if tag, ok := revalidates(inm, tablePath(cat, id.Namespace, id.Name), e.MetadataLocation, mode, vend, func() bool { return s.vendsWrite(r, e) }, s.now()); ok {
			notModified(w, tag)
			return
		}
	}
	res, err := s.Catalog.LoadEntry(r.Context(), id, e, mode == "refs")
	if err != nil {
		writeError(w, err)
		return
	}
	var v *credentials.Vended
	if vend {
		if v, err = s.vend(r, e); err != nil {
			writeError(w, err)
			return
		}
	}
	s.writeTable(w, r, res, mode, v)
}

func (s *server) commitTable(w http.ResponseWriter, r *http.Request) {
	answer(s.withTable, s.Catalog.CommitTable, writeCommitted)(w, r)
}

// writeCommitted answers a commit: the new metadata, tagged (no config,
// no credentials: the client has them).
func writeCommitted(w http.ResponseWriter, r *http.Request, res catalog.TableResult) {
	w.Header().Set("ETag", tableTag(tablePath(r.PathValue("prefix"), res.Entry.Namespace, res.Entry.Name), res.MetadataLocation, "all", tagCreds{}))
	writeJSON(w, http.StatusOK, map[string]any{"metadata-location": res.MetadataLocation, "metadata": json.RawMessage(res.Metadata)})
}

// dropPurge answers a drop with purgeRequested=true: 204 as the Iceberg
// spec says (clients expect no body); the job's handle rides in headers
// for those who want to follow it.
func (s *server) dropPurge(w http.ResponseWriter, r *http.Request, cat string, id catalog.Ident) {
	if s.Purge == nil {
		writeError(w, fmt.Errorf("%w: this function does not purge", errNotImplemented))
		return
	}
	j, err := s.Purge.Drop(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	setJobHeaders(w, cat, j.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) registerTable(w http.ResponseWriter, r *http.Request) {
	register := func(ctx context.Context, cat string, ns []string, req registration) (catalog.TableResult, error) {
		return s.Catalog.RegisterTable(ctx, cat, catalog.Ident{Namespace: ns, Name: req.Name}, req.MetadataLocation, req.Overwrite)
	}
	answer(s.withNamespace, register, s.writeCreated)(w, r)
}

// unregisterTable forgets a table and keeps its files (the spec's
// unregisterTable, an empty POST): 200 with the last metadata location and
// metadata, which a register (here or elsewhere) takes back.
func (s *server) unregisterTable(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withTable(w, r)
	if !ok {
		return
	}
	if !noBody(w, r) { // {"purge":true} is a 400, not an unregister
		return
	}
	res, err := s.Catalog.UnregisterTable(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"metadata-location": res.MetadataLocation, "metadata": json.RawMessage(res.Metadata)})
}

func (s *server) reportMetrics(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withTable(w, r)
	if !ok {
		return
	}
	var report map[string]any
	if err := decode(r, &report); err != nil {
		writeError(w, err)
		return
	}
	if err := s.Catalog.TableExists(r.Context(), cat, id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent) // accepted; icehold keeps no scan metrics
}

func (s *server) renameTable(w http.ResponseWriter, r *http.Request) {
	s.rename(w, r, s.Catalog.RenameTable)
}

// rename answers a rename of a table or a view.
func (s *server) rename(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, cat string, from, to catalog.Ident) error) {
	cat := r.PathValue("prefix")
	var req struct {
		Source      *catalog.Ident `json:"source"`
		Destination *catalog.Ident `json:"destination"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Source == nil || req.Destination == nil {
		writeError(w, fmt.Errorf("%w: source and destination are required", catalog.ErrBadRequest))
		return
	}
	if err := do(r.Context(), cat, *req.Source, *req.Destination); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) commitTransaction(w http.ResponseWriter, r *http.Request) {
	cat := r.PathValue("prefix")
	var req struct {
		TableChanges []catalog.TableChange `json:"table-changes"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := s.Catalog.CommitTransaction(r.Context(), cat, req.TableChanges); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
