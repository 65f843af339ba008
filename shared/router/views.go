package router

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/icehold/icehold/shared/catalog"
)

// The Iceberg REST spec's view endpoints (SPEC §2) and the lifecycle API's
// undrop and purge-now of views (SPEC §4). Views take the table privileges
// (TABLE_CREATE creates one, TABLE_READ loads it, …): the route table says
// which route needs what.

// writeView answers the spec's LoadViewResult.
func writeView(w http.ResponseWriter, _ *http.Request, res catalog.TableResult) {
	writeJSON(w, http.StatusOK, map[string]any{
		"metadata-location": res.MetadataLocation, "metadata": json.RawMessage(res.Metadata), "config": map[string]string{},
	})
}

func (s *server) listViews(w http.ResponseWriter, r *http.Request) {
	s.list(w, r, s.Catalog.ListViews)
}

func (s *server) createView(w http.ResponseWriter, r *http.Request) {
	answer(s.withNamespace, s.Catalog.CreateView, writeView)(w, r)
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
	writeView(w, r, res)
}

func (s *server) replaceView(w http.ResponseWriter, r *http.Request) {
	answer(s.withView, s.Catalog.ReplaceView, writeView)(w, r)
}

func (s *server) renameView(w http.ResponseWriter, r *http.Request) {
	s.rename(w, r, s.Catalog.RenameView)
}

func (s *server) registerView(w http.ResponseWriter, r *http.Request) {
	register := func(ctx context.Context, cat string, ns []string, req registration) (catalog.TableResult, error) {
		return s.Catalog.RegisterView(ctx, cat, catalog.Ident{Namespace: ns, Name: req.Name}, req.MetadataLocation)
	}
	answer(s.withNamespace, register, writeView)(w, r)
}
