package router

import (
	"fmt"
	"net/http"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/softdelete"
)

// The soft-delete routes (SPEC §4, §7): the lifecycle API's undrop,
// purge-now, legal hold and soft-deleted listing.

// softDeleting answers 501 where the function serving the route has no
// soft-delete service.
func (s *server) softDeleting(w http.ResponseWriter) bool {
	if s.SoftDelete == nil {
		writeError(w, fmt.Errorf("%w: this function does not serve soft delete", errNotImplemented))
		return false
	}
	return true
}

func (s *server) listSoftDeleted(w http.ResponseWriter, r *http.Request) {
	if !s.softDeleting(w) {
		return
	}
	token, size, err := paging(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var ns []string
	if v := r.URL.Query().Get("namespace"); v != "" {
		if ns, err = namespaceParam(v); err != nil {
			writeError(w, err)
			return
		}
	}
	tables, next, err := s.SoftDelete.List(r.Context(), r.PathValue("c"), ns, r.URL.Query().Get("kind"), token, size)
	if err != nil {
		writeError(w, err)
		return
	}
	if tables == nil {
		tables = []softdelete.View{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tables": tables, "next-page-token": nullable(next)})
}

func (s *server) legalHold(w http.ResponseWriter, r *http.Request) {
	if !s.softDeleting(w) {
		return
	}
	var req struct {
		Enabled    *bool  `json:"enabled"`
		Generation string `json:"generation"`
	}
	if err := decodeStrict(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if req.Enabled == nil {
		writeError(w, fmt.Errorf("%w: enabled (true or false) is required", catalog.ErrBadRequest))
		return
	}
	rec, err := s.SoftDelete.SetLegalHold(r.Context(), r.PathValue("c"), r.PathValue("uuid"), req.Generation, *req.Enabled)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, softdelete.ViewOf(rec))
}
