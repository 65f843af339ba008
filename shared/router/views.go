package router

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/softdelete"
)

// The Iceberg REST spec's view endpoints (SPEC §2) and the lifecycle API's
// undrop and purge-now of views (SPEC §4). Views take the table privileges
// (TABLE_CREATE creates one, TABLE_READ loads it, …): the route table says
// which route needs what.

// writeView answers the spec's LoadViewResult.
func writeView(w http.ResponseWriter, res catalog.TableResult) {
	writeJSON(w, http.StatusOK, map[string]any{
		"metadata-location": res.MetadataLocation, "metadata": json.RawMessage(res.Metadata), "config": map[string]string{},
	})
}

// withView parses namespace and view.
func (s *server) withView(w http.ResponseWriter, r *http.Request) (string, catalog.Ident, bool) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return "", catalog.Ident{}, false
	}
	id := catalog.Ident{Namespace: ns, Name: r.PathValue("view")}
	if err := catalog.ValidateName("view", id.Name); err != nil {
		writeError(w, err)
		return "", catalog.Ident{}, false
	}
	return cat, id, true
}

func (s *server) listViews(w http.ResponseWriter, r *http.Request) {
	s.list(w, r, s.Catalog.ListViews)
}

func (s *server) createView(w http.ResponseWriter, r *http.Request) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	var req catalog.CreateViewRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Catalog.CreateView(r.Context(), cat, ns, req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeView(w, res)
}

func (s *server) loadView(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withView(w, r)
	if !ok {
		return
	}
	res, err := s.Catalog.LoadView(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeView(w, res)
}

func (s *server) viewExists(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withView(w, r)
	if !ok {
		return
	}
	if _, err := s.Catalog.ViewEntry(r.Context(), cat, id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) replaceView(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withView(w, r)
	if !ok {
		return
	}
	var ch catalog.ViewChange
	if err := decode(r, &ch); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Catalog.ReplaceView(r.Context(), cat, id, ch)
	if err != nil {
		writeError(w, err)
		return
	}
	writeView(w, res)
}

// dropView soft-deletes the view on a catalog with soft delete, else drops
// it (its files stay, as a table's without purge).
func (s *server) dropView(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.withView(w, r)
	if !ok {
		return
	}
	if s.SoftDelete != nil {
		_, err := s.SoftDelete.DropView(r.Context(), cat, id)
		if err == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if !errors.Is(err, softdelete.ErrNotEnabled) {
			writeError(w, err)
			return
		}
	}
	if _, err := s.Catalog.DropView(r.Context(), cat, id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) renameView(w http.ResponseWriter, r *http.Request) {
	s.rename(w, r, s.Catalog.RenameView)
}

func (s *server) registerView(w http.ResponseWriter, r *http.Request) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return
	}
	var req struct {
		Name             string `json:"name"`
		MetadataLocation string `json:"metadata-location"`
	}
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Catalog.RegisterView(r.Context(), cat, catalog.Ident{Namespace: ns, Name: req.Name}, req.MetadataLocation)
	if err != nil {
		writeError(w, err)
		return
	}
	writeView(w, res)
}

// lifecycleView parses {c}, {namespace} and {view} of a lifecycle route.
func lifecycleView(r *http.Request) (string, catalog.Ident, error) {
	ns, err := namespaceParam(r.PathValue("namespace"))
	if err != nil {
		return "", catalog.Ident{}, err
	}
	id := catalog.Ident{Namespace: ns, Name: r.PathValue("view")}
	return r.PathValue("c"), id, catalog.ValidateName("view", id.Name)
}

func (s *server) undropView(w http.ResponseWriter, r *http.Request) {
	if !s.softDeleting(w) {
		return
	}
	cat, id, err := lifecycleView(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req struct {
		ViewUUID   string         `json:"view-uuid"`
		Generation string         `json:"generation"`
		RenameTo   *catalog.Ident `json:"rename-to"`
	}
	if err := decodeStrict(r, &req, true); err != nil {
		writeError(w, err)
		return
	}
	e, err := s.SoftDelete.Undrop(r.Context(), cat, id, softdelete.Pick{TableUUID: req.ViewUUID, Generation: req.Generation, View: true}, req.RenameTo)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"namespace": e.Namespace, "name": e.Name, "view-uuid": e.TableUUID, "metadata-location": e.MetadataLocation})
}

func (s *server) purgeNowView(w http.ResponseWriter, r *http.Request) {
	if !s.softDeleting(w) {
		return
	}
	cat, id, err := lifecycleView(r)
	if err != nil {
		writeError(w, err)
		return
	}
	var req struct {
		ViewUUID   string `json:"view-uuid"`
		Generation string `json:"generation"`
	}
	if err := decodeStrict(r, &req, true); err != nil {
		writeError(w, err)
		return
	}
	j, err := s.SoftDelete.PurgeNow(r.Context(), cat, id, softdelete.Pick{TableUUID: req.ViewUUID, Generation: req.Generation, View: true})
	if err != nil {
		writeError(w, err)
		return
	}
	setJobHeaders(w, cat, j.ID)
	writeJSON(w, http.StatusAccepted, viewOf(j))
}
