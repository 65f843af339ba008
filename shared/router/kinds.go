package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/store"
)

// kind is what the table and view routes differ in where they do the same
// (exists, drop, undrop, purge-now): one handler each, parameterised by
// kind, so that a change to one kind's lifecycle is made once.
type kind struct {
	noun      string // the path value that names one, and the name rule
	uuidField string // the body and answer field of its uuid
	view      bool
}

var (
	tables = kind{noun: "table", uuidField: "table-uuid"}
	views  = kind{noun: "view", uuidField: "view-uuid", view: true}
)

// withIdent parses {prefix}, {namespace} and the kind's name of an
// Iceberg route.
func (s *server) withIdent(w http.ResponseWriter, r *http.Request, k kind) (string, catalog.Ident, bool) {
	cat, ns, ok := s.withNamespace(w, r)
	if !ok {
		return "", catalog.Ident{}, false
	}
	id := catalog.Ident{Namespace: ns, Name: r.PathValue(k.noun)}
	if err := catalog.ValidateName(k.noun, id.Name); err != nil {
		writeError(w, err)
		return "", catalog.Ident{}, false
	}
	return cat, id, true
}

func (s *server) withTable(w http.ResponseWriter, r *http.Request) (string, catalog.Ident, bool) {
	return s.withIdent(w, r, tables)
}

func (s *server) withView(w http.ResponseWriter, r *http.Request) (string, catalog.Ident, bool) {
	return s.withIdent(w, r, views)
}

// lifecycleIdent parses {c}, {namespace} and the kind's name of a
// lifecycle route.
func lifecycleIdent(r *http.Request, k kind) (string, catalog.Ident, error) {
	ns, err := namespaceParam(r.PathValue("namespace"))
	if err != nil {
		return "", catalog.Ident{}, err
	}
	id := catalog.Ident{Namespace: ns, Name: r.PathValue(k.noun)}
	return r.PathValue("c"), id, catalog.ValidateName(k.noun, id.Name)
}

// entry reads the kind's entry (HEAD answers from it alone).
func (s *server) entry(r *http.Request, k kind, cat string, id catalog.Ident) (store.TableEntry, error) {
	if k.view {
		return s.Catalog.ViewEntry(r.Context(), cat, id)
	}
	return s.Catalog.Entry(r.Context(), cat, id)
}

// exists answers HEAD: 204 or the load's error.
func (s *server) exists(k kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cat, id, ok := s.withIdent(w, r, k)
		if !ok {
			return
		}
		if _, err := s.entry(r, k, cat, id); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// drop answers DELETE: a table's purge when asked, else a soft delete on
// a catalog with soft delete, else a plain drop that leaves the files and
// names where they stay.
func (s *server) drop(k kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cat, id, ok := s.withIdent(w, r, k)
		if !ok {
			return
		}
		if !k.view && r.URL.Query().Get("purgeRequested") == "true" {
			s.dropPurge(w, r, cat, id)
			return
		}
		if s.SoftDelete != nil {
			softDrop := s.SoftDelete.Drop
			if k.view {
				softDrop = s.SoftDelete.DropView
			}
			_, err := softDrop(r.Context(), cat, id)
			if err == nil {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			if !errors.Is(err, softdelete.ErrNotEnabled) {
				writeError(w, err)
				return
			}
		}
		plainDrop := s.Catalog.DropTable
		if k.view {
			plainDrop = s.Catalog.DropView
		}
		e, err := plainDrop(r.Context(), cat, id)
		if err != nil {
			writeError(w, err)
			return
		}
		// Without purge or soft delete nothing records the files left
		// behind (the caller chose to keep them): the answer names where
		// they stay.
		for _, h := range e.Holds() {
			w.Header().Add(FilesKeptHeader, "s3://"+h.Bucket+"/"+h.Prefix)
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// FilesKeptHeader names, on a drop that neither purges nor soft-deletes,
// each location whose files the dropped table or view leaves, unowned.
const FilesKeptHeader = "Icehold-Files-Kept"

// pick reads an undrop's or purge-now's body (empty is the newest
// generation): the kind's uuid field, a generation, and for an undrop a
// rename-to; any other field is a 400.
func pick(r *http.Request, k kind, undrop bool) (softdelete.Pick, *catalog.Ident, error) {
	var req struct {
		TableUUID  string         `json:"table-uuid"`
		ViewUUID   string         `json:"view-uuid"`
		Generation string         `json:"generation"`
		RenameTo   *catalog.Ident `json:"rename-to"`
	}
	if err := decodeStrict(r, &req, true); err != nil {
		return softdelete.Pick{}, nil, err
	}
	allowed := map[string]bool{k.uuidField: true, "generation": true, "rename-to": undrop}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(peekBody(r), &fields) // well-formed: decodeStrict read it
	for f := range fields {
		if !allowed[f] {
			return softdelete.Pick{}, nil, fmt.Errorf("%w: malformed JSON body: json: unknown field %q", catalog.ErrBadRequest, f)
		}
	}
	p := softdelete.Pick{TableUUID: req.TableUUID, Generation: req.Generation, View: k.view}
	if k.view {
		p.TableUUID = req.ViewUUID
	}
	return p, req.RenameTo, nil
}

// undrop brings a soft-deleted table or view back (SPEC §4).
func (s *server) undrop(k kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.softDeleting(w) {
			return
		}
		cat, id, err := lifecycleIdent(r, k)
		var p softdelete.Pick
		var renameTo *catalog.Ident
		if err == nil {
			p, renameTo, err = pick(r, k, true)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		e, err := s.SoftDelete.Undrop(r.Context(), cat, id, p, renameTo)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"namespace": e.Namespace, "name": e.Name, k.uuidField: e.TableUUID, "metadata-location": e.MetadataLocation})
	}
}

// purgeNow ends a soft-deleted table's or view's hold at once (SPEC §4).
func (s *server) purgeNow(k kind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.softDeleting(w) {
			return
		}
		cat, id, err := lifecycleIdent(r, k)
		var p softdelete.Pick
		if err == nil {
			p, _, err = pick(r, k, false)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		j, err := s.SoftDelete.PurgeNow(r.Context(), cat, id, p)
		if err != nil {
			writeError(w, err)
			return
		}
		setJobHeaders(w, cat, j.ID)
		writeJSON(w, http.StatusAccepted, viewOf(j))
	}
}

// answer answers a route whose path parse reads (a namespace, or one table
// or view) and whose body is a B: do's result, written by write (creates,
// registers, commits and replaces of either kind).
func answer[P, B any](parse func(http.ResponseWriter, *http.Request) (string, P, bool), do func(ctx context.Context, cat string, p P, b B) (catalog.TableResult, error), write func(http.ResponseWriter, *http.Request, catalog.TableResult)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		cat, p, ok := parse(w, r)
		if !ok {
			return
		}
		var b B
		if err := decode(r, &b); err != nil {
			writeError(w, err)
			return
		}
		res, err := do(r.Context(), cat, p, b)
		if err != nil {
			writeError(w, err)
			return
		}
		write(w, r, res)
	}
}

// registration is the REST spec's RegisterTableRequest (a view's register
// takes the same body; overwrite is a table's only).
type registration struct {
	Name             string `json:"name"`
	MetadataLocation string `json:"metadata-location"`
	Overwrite        bool   `json:"overwrite"`
}
