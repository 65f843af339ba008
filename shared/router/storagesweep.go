package router

import (
	"net/http"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/storagesweep"
	"github.com/icehold/icehold/shared/store"
)

// SweepView is a storage sweep's part of a job on the wire: the report it
// reads, its windows, how far its plan is, and what it found per class.
type SweepView struct {
	Report        string `json:"report"`
	ReportTime    string `json:"report-time"`
	DryRun        bool   `json:"dry-run"`
	OrphanWindow  string `json:"orphan-window"`
	VersionWindow string `json:"version-window"`
	// Stage: scan, list, reach, split, join (planning) or done.
	Stage   string               `json:"stage"`
	Classes map[string]ClassView `json:"classes"`
	// Unowned names folders of objects no table owns (a few).
	Unowned []string `json:"unowned-samples"`
}

// ClassView counts one class's objects (versions) and their bytes.
type ClassView struct {
	Objects int64 `json:"objects"`
	Bytes   int64 `json:"bytes"`
}

func sweepViewOf(sw *store.StorageSweep) *SweepView {
	if sw == nil {
		return nil
	}
	v := &SweepView{
		Report: sw.Report, ReportTime: time.UnixMilli(sw.ReportTime).UTC().Format(time.RFC3339), DryRun: sw.DryRun,
		OrphanWindow: sw.OrphanWindow, VersionWindow: sw.VersionWindow, Stage: sw.Stage,
		Classes: map[string]ClassView{}, Unowned: sw.Unowned,
	}
	for _, c := range storagesweep.Classes {
		v.Classes[c] = ClassView{Objects: sw.Counts[c], Bytes: sw.Counts[c+"-bytes"]}
	}
	if v.Unowned == nil {
		v.Unowned = []string{}
	}
	return v
}

// startSweep is POST …/storage-sweep, of a catalog or of one table: it
// checks the report and answers 202 with the sweep's job.
func (s *server) startSweep(w http.ResponseWriter, r *http.Request) {
	if s.StorageSweep == nil {
		writeError(w, errNotImplemented)
		return
	}
	req := storagesweep.Request{Catalog: r.PathValue("c")}
	if r.PathValue("table") != "" {
		_, id, err := lifecycleIdent(r, tables)
		if err != nil {
			writeError(w, err)
			return
		}
		req.Namespace, req.Table = id.Namespace, id.Name
	}
	var body struct {
		DryRun bool   `json:"dry-run"`
		Report string `json:"report"`
	}
	if err := decodeStrict(r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	req.DryRun, req.Report = body.DryRun, strings.TrimSpace(body.Report)
	j, err := s.StorageSweep.Start(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	setJobHeaders(w, req.Catalog, j.ID)
	writeJSON(w, http.StatusAccepted, viewOf(j))
}
