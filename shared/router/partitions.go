package router

import (
	"fmt"
	"net/http"

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

func (s *server) dropPartitions(w http.ResponseWriter, r *http.Request) {
	if !s.partitioning(w) {
		return
	}
	cat, id, err := lifecycleTable(r)
	if err != nil {
		writeError(w, err)
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
