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

func (s *server) createCatalog(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name       string            `json:"name"`
		Warehouse  string            `json:"warehouse"`
		Properties map[string]string `json:"properties"`
	}
	if err := decodeStrict(r, &req, false); err != nil {
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

// manage returns the path's catalog ("*" is the system scope); the guard
// has checked CATALOG_MANAGE on it.
func (s *server) manage(_ http.ResponseWriter, r *http.Request) (string, bool) {
	return r.PathValue("c"), true
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
	if err := decodeStrict(r, &req, false); err != nil {
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
	Pattern    bool     `json:"pattern"`
}

// grantOf answers a grant; no privileges is [], not null.
func grantOf(who authz.Grantee, privs []string) grantBody {
	if privs == nil {
		privs = []string{}
	}
	return grantBody{Principal: who.Principal, Privileges: privs, Pattern: who.Pattern}
}

// grantee is whom the path names: the principal as its bytes are
// (authz checks them), a pattern only with ?pattern=true.
func grantee(r *http.Request) (authz.Grantee, error) {
	who := authz.Grantee{Principal: r.PathValue("principal")}
	switch v, ok := r.URL.Query()["pattern"]; {
	case !ok:
	case len(v) == 1 && (v[0] == "true" || v[0] == "false"):
		who.Pattern = v[0] == "true"
	default:
		return who, fmt.Errorf("%w: pattern is true or false, once", catalog.ErrBadRequest)
	}
	return who, nil
}

func (s *server) getGrant(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	who, err := grantee(r)
	if err != nil {
		writeError(w, err)
		return
	}
	g, err := s.Authz.Lookup(r.Context(), cat, who)
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("grant of %s on %s: %w", describe(who), cat, catalog.ErrNotFound)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, grantOf(who, g.Privileges))
}

// describe names a grantee in messages.
func describe(who authz.Grantee) string {
	if who.Pattern {
		return "the pattern " + who.Principal
	}
	return who.Principal
}

func (s *server) putGrant(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	who, err := grantee(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req struct {
		Privileges []string `json:"privileges"` // the principal is the path's
	}
	if err := decodeStrict(r, &req, false); err != nil {
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
		if cat == authz.SystemCatalog && !slices.Contains(authz.SystemPrivileges, authz.Privilege(priv)) {
			writeError(w, fmt.Errorf("%w: the system scope %q holds only %v (creating catalogs); grant %s on a catalog", catalog.ErrBadRequest, authz.SystemCatalog, authz.SystemPrivileges, priv))
			return
		}
	}
	privs := slices.Compact(slices.Sorted(slices.Values(req.Privileges)))
	if err := s.Authz.Grant(r.Context(), cat, who, privs); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, grantOf(who, privs))
}

func (s *server) deleteGrant(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	who, err := grantee(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.Authz.Revoke(r.Context(), cat, who); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("grant of %s on %s: %w", describe(who), cat, catalog.ErrNotFound)
		}
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// UnregisteredView is an unregistered table on the wire: the catalog forgot
// it and keeps its files, its claims (Claims, s3://bucket/prefix) keeping
// every other table and purge off them until its metadata is registered
// again.
type UnregisteredView struct {
	Namespace        []string `json:"namespace"`
	Name             string   `json:"name"`
	TableUUID        string   `json:"table-uuid"`
	MetadataLocation string   `json:"metadata-location"`
	LegalHold        bool     `json:"legal-hold"`
	UnregisteredAt   string   `json:"unregistered-at"`
	UnregisteredBy   string   `json:"unregistered-by"`
	Claims           []string `json:"claims"`
}

func (s *server) listUnregistered(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	token, size, err := paging(r)
	if err != nil {
		writeError(w, err)
		return
	}
	recs, next, err := s.Catalog.ListUnregistered(r.Context(), cat, token, size)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]UnregisteredView, len(recs))
	for i, u := range recs {
		out[i] = UnregisteredView{
			Namespace: u.Entry.Namespace, Name: u.Entry.Name, TableUUID: u.Entry.TableUUID, MetadataLocation: u.MetadataLocation,
			LegalHold: u.Entry.LegalHold, UnregisteredAt: u.UnregisteredAt, UnregisteredBy: u.UnregisteredBy, Claims: []string{},
		}
		for _, h := range u.Entry.Holds() {
			out[i].Claims = append(out[i].Claims, h.URI())
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tables": out, "next-page-token": nullable(next)})
}
