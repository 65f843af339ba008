package router

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/softdelete"
)

// endpoints are advertised in /v1/config so clients (iceberg-go, Java) use
// HEAD and the multi-table commit.
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
	"POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
	"POST /v1/{prefix}/tables/rename",
	"POST /v1/{prefix}/transactions/commit",
}

func (s *server) getConfig(w http.ResponseWriter, r *http.Request) {
	cat, err := catalogOf(r, s.DefaultCatalog)
	if err != nil {
		writeError(w, err)
		return
	}
	defaults := maps.Clone(s.ClientDefaults)
	if defaults == nil {
		defaults = map[string]string{}
	}
	// Engines must not delete files behind the catalog's back: soft delete
	// and the purge pipeline own deletion.
	defaults["s3.delete-enabled"] = "false"
	defaults["rest-catalog-purge"] = "true"
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
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	token, size, err := paging(r)
	if err != nil {
		writeError(w, err)
		return
	}
	ids, next, err := s.Catalog.ListTables(r.Context(), cat, ns, token, size)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"identifiers": ids, "next-page-token": nullable(next)})
}

// tableResult is the REST spec's LoadTableResult.
func (s *server) writeTable(w http.ResponseWriter, res catalog.TableResult) {
	out := map[string]any{"metadata": json.RawMessage(res.Metadata), "config": s.ClientDefaults}
	if res.MetadataLocation != "" {
		out["metadata-location"] = res.MetadataLocation
	}
	if s.ClientDefaults == nil {
		out["config"] = map[string]string{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *server) createTable(w http.ResponseWriter, r *http.Request) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	var req catalog.CreateTableRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Catalog.CreateTable(r.Context(), cat, ns, req)
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeTable(w, res)
}

// withTable parses namespace and table.
func (s *server) withTable(w http.ResponseWriter, r *http.Request) (string, catalog.Ident, bool) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return "", catalog.Ident{}, false
	}
	id := catalog.Ident{Namespace: ns, Name: r.PathValue("table")}
	if err := id.Validate(); err != nil {
		writeError(w, err)
		return "", catalog.Ident{}, false
	}
	return cat, id, true
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
	res, err := s.Catalog.LoadTable(r.Context(), cat, id, mode == "refs")
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeTable(w, res)
}

func (s *server) tableExists(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withTable(w, r)
	if !ok {
		return
	}
	if err := s.Catalog.TableExists(r.Context(), cat, id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) commitTable(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withTable(w, r)
	if !ok {
		return
	}
	var ch catalog.TableChange
	if err := decode(r, &ch); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Catalog.CommitTable(r.Context(), cat, id, ch)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"metadata-location": res.MetadataLocation, "metadata": json.RawMessage(res.Metadata)})
}

func (s *server) dropTable(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withTable(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("purgeRequested") == "true" {
		if s.Purge == nil {
			writeError(w, fmt.Errorf("%w: this function does not purge", errNotImplemented))
			return
		}
		j, err := s.Purge.Drop(r.Context(), cat, id)
		if err != nil {
			writeError(w, err)
			return
		}
		// 204 as the Iceberg spec says (clients expect no body); the job's
		// handle rides in headers for those who want to follow it.
		setJobHeaders(w, cat, j.ID)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if s.SoftDelete != nil {
		_, err := s.SoftDelete.Drop(r.Context(), cat, id)
		if err == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !errors.Is(err, softdelete.ErrNotEnabled) {
			writeError(w, err)
			return
		}
	}
	e, err := s.Catalog.DropTable(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	// Without purge or soft delete nothing records the files left behind
	// (the caller chose to keep them): the answer names where they stay.
	for _, h := range e.Holds() {
		w.Header().Add(FilesKeptHeader, "s3://"+h.Bucket+"/"+h.Prefix)
	}
	w.WriteHeader(http.StatusNoContent)
}

// FilesKeptHeader names, on a drop that neither purges nor soft-deletes,
// each location whose files the dropped table leaves, unowned.
const FilesKeptHeader = "Icehold-Files-Kept"

func (s *server) registerTable(w http.ResponseWriter, r *http.Request) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	var req struct {
		Name             string `json:"name"`
		MetadataLocation string `json:"metadata-location"`
		Overwrite        bool   `json:"overwrite"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Catalog.RegisterTable(r.Context(), cat, catalog.Ident{Namespace: ns, Name: req.Name}, req.MetadataLocation, req.Overwrite)
	if err != nil {
		writeError(w, err)
		return
	}
	s.writeTable(w, res)
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
	if err := s.Catalog.RenameTable(r.Context(), cat, *req.Source, *req.Destination); err != nil {
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
