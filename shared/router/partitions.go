package router

import (
	"fmt"
	"net/http"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/partitions"
)

// The partition routes of the lifecycle API (SPEC §5, §7).

// partitioning answers 501 where the function serving the route has no
// partitions service.
func (s *server) partitioning(w http.ResponseWriter) bool {
	if s.Partitions == nil {
		writeError(w, fmt.Errorf("%w: this function does not serve partition drop", errNotImplemented))
		return false
	}
	return true
}

// partitionTable is the table of a partition route; false: answered.
func (s *server) partitionTable(w http.ResponseWriter, r *http.Request) (string, catalog.Ident, bool) {
	if !s.partitioning(w) {
		return "", catalog.Ident{}, false
	}
	cat, id, err := lifecycleIdent(r, tables)
	if err != nil {
		writeError(w, err)
		return "", catalog.Ident{}, false
	}
	return cat, id, true
}

func (s *server) dropPartitions(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.partitionTable(w, r)
	if !ok {
		return
	}
	req, err := partitions.ParseDropRequest(peekBody(r))
	if err != nil {
		writeError(w, err)
		return
	}
	res, err := s.Partitions.Drop(r.Context(), cat, id, req)
	if err != nil {
		writeError(w, err)
		return
	}
	if res.Partitions == nil {
		res.Partitions = []partitions.TupleResult{}
	}
	writeJSON(w, http.StatusOK, res)
}

func (s *server) putRetention(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.partitionTable(w, r)
	if !ok {
		return
	}
	var req struct {
		Field string `json:"field"`
		Keep  string `json:"keep"`
	}
	if err := decodeStrict(r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if req.Field == "" || req.Keep == "" {
		writeError(w, fmt.Errorf("%w: field and keep are required, e.g. {\"field\": \"ts_day\", \"keep\": \"P7D\"}", catalog.ErrBadRequest))
		return
	}
	p, err := s.Partitions.SetRetention(r.Context(), cat, id, req.Field, req.Keep)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *server) getRetention(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.partitionTable(w, r)
	if !ok {
		return
	}
	p, err := s.Partitions.GetRetention(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

func (s *server) deleteRetention(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.partitionTable(w, r)
	if !ok {
		return
	}
	if err := s.Partitions.ClearRetention(r.Context(), cat, id); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) verifyTable(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.partitionTable(w, r)
	if !ok {
		return
	}
	rep, err := s.Partitions.Verify(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// repairTable restores what verify's files-intact check finds damaged
// (TABLE_WRITE: it writes the table's objects, the bytes its commits
// recorded, and changes no metadata).
func (s *server) repairTable(w http.ResponseWriter, r *http.Request) {
	cat, id, ok := s.partitionTable(w, r)
	if !ok {
		return
	}
	rep, err := s.Partitions.Repair(r.Context(), cat, id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
