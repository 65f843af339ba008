package router

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

func (s *server) lifecycleRoutes() {
	m := s.mux
	m.HandleFunc("POST /lifecycle/v1/catalogs", s.createCatalog)
	m.HandleFunc("GET /lifecycle/v1/catalogs/{c}", s.getCatalog)
	m.HandleFunc("POST /lifecycle/v1/catalogs/{c}/properties", s.updateCatalog)
	m.HandleFunc("GET /lifecycle/v1/catalogs/{c}/grants/{principal...}", s.getGrant)
	m.HandleFunc("PUT /lifecycle/v1/catalogs/{c}/grants/{principal...}", s.putGrant)
	m.HandleFunc("DELETE /lifecycle/v1/catalogs/{c}/grants/{principal...}", s.deleteGrant)
	m.HandleFunc("GET /lifecycle/v1/catalogs/{c}/purge-jobs", s.listJobs)
	m.HandleFunc("GET /lifecycle/v1/catalogs/{c}/purge-jobs/{id}", s.getJob)
}

func (s *server) createCatalog(w http.ResponseWriter, r *http.Request) {
	if err := s.Authz.Check(r.Context(), authz.SystemCatalog, authz.CatalogManage); err != nil {
		writeError(w, err)
		return
	}
	var req struct {
		Name       string            `json:"name"`
		Warehouse  string            `json:"warehouse"`
		Properties map[string]string `json:"properties"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	c, err := s.Catalog.CreateCatalog(r.Context(), req.Name, req.Warehouse, req.Properties)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

// manage checks CATALOG_MANAGE on the path's catalog ("*" is the system scope).
func (s *server) manage(w http.ResponseWriter, r *http.Request) (string, bool) {
	cat := r.PathValue("c")
	if cat == authz.SystemCatalog {
		if err := s.Authz.Check(r.Context(), cat, authz.CatalogManage); err != nil {
			writeError(w, err)
			return "", false
		}
		return cat, true
	}
	if err := catalog.ValidateCatalogName(cat); err != nil {
		writeError(w, err)
		return "", false
	}
	return cat, s.catalogFor(w, r, cat, authz.CatalogManage)
}

func (s *server) getCatalog(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	c, err := s.Catalog.GetCatalog(r.Context(), cat)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *server) updateCatalog(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	var req struct {
		Updates  map[string]string `json:"updates"`
		Removals []string          `json:"removals"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	c, err := s.Catalog.UpdateCatalogProperties(r.Context(), cat, req.Updates, req.Removals)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

type grantBody struct {
	Principal  string   `json:"principal,omitempty"`
	Privileges []string `json:"privileges"`
}

func principalParam(r *http.Request) (string, error) {
	p := r.PathValue("principal")
	if p == "" || len(p) > 2048 {
		return "", fmt.Errorf("%w: principal must be 1 to 2048 characters", catalog.ErrBadRequest)
	}
	return p, nil
}

func (s *server) getGrant(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	p, err := principalParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := s.store.GetGrant(r.Context(), cat, p)
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("grant of %s on %s: %w", p, cat, catalog.ErrNotFound)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, grantBody{Principal: g.Principal, Privileges: g.Privileges})
}

func (s *server) putGrant(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	p, err := principalParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req grantBody
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Privileges == nil {
		writeError(w, fmt.Errorf("%w: privileges is required", catalog.ErrBadRequest))
		return
	}
	for _, priv := range req.Privileges {
		if !authz.Valid(priv) {
			writeError(w, fmt.Errorf("%w: unknown privilege %q", catalog.ErrBadRequest, priv))
			return
		}
	}
	privs := slices.Compact(slices.Sorted(slices.Values(req.Privileges)))
	if err := s.store.PutGrant(r.Context(), cat, store.Grant{Principal: p, Privileges: privs}); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, grantBody{Principal: p, Privileges: privs})
}

func (s *server) deleteGrant(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	p, err := principalParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.store.DeleteGrant(r.Context(), cat, p); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("grant of %s on %s: %w", p, cat, catalog.ErrNotFound)
		}
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
