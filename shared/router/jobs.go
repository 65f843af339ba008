package router

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// JobView is a purge job on the wire (SPEC §7); the CLI decodes it too.
type JobView struct {
	ID               string   `json:"id"`
	Kind             string   `json:"kind"` // purge | orphans | expire | view | sweep
	Namespace        []string `json:"namespace"`
	Table            string   `json:"table"`
	TableUUID        string   `json:"table-uuid"`
	State            string   `json:"state"`
	MetadataLocation string   `json:"metadata-location"`
	BatchesTotal     int      `json:"batches-total"`
	BatchesDone      int      `json:"batches-done"`
	BatchesDead      int      `json:"batches-dead"`
	FilesDeleted     int64    `json:"files-deleted"`
	// FilesDeleted by kind (their sum; missing files are counted apart).
	DataFilesDeleted     int64 `json:"data-files-deleted"`
	DeleteFilesDeleted   int64 `json:"delete-files-deleted"`
	MetadataFilesDeleted int64 `json:"metadata-files-deleted"`
	FilesMissing         int64 `json:"files-missing"`
	FilesSkipped         int64 `json:"files-skipped"`
	// FilesUnreferenced: objects under the table's own location no
	// metadata reached, deleted by the purge's final listing.
	FilesUnreferenced int64 `json:"files-unreferenced"`
	Bytes             int64 `json:"bytes"`
	Attempts          int   `json:"attempts"`
	// LastError: why the job failed or dead-lettered, or, while it runs,
	// the latest failed delivery of a batch SQS retries.
	LastError *string `json:"last-error"`
	// RecoveredError: the last retry error of a job that then succeeded.
	RecoveredError *string `json:"recovered-error,omitempty"`
	// Claims: the locations the job holds now (s3://bucket/prefix): while
	// it runs, and once FAILED until it is retried or abandoned.
	Claims []string `json:"claims"`
	// Retries: how often an operator retried it after it FAILED.
	Retries int `json:"retries,omitempty"`
	// AbandonedBy and AbandonedAt: who let a FAILED job's claims go, when.
	AbandonedBy *string `json:"abandoned-by,omitempty"`
	AbandonedAt *string `json:"abandoned-at,omitempty"`
	CreatedBy   string  `json:"created-by"`
	CreatedAt   string  `json:"created-at"`
	UpdatedAt   string  `json:"updated-at"`
	// StorageSweep: a storage sweep's report, progress and classes.
	StorageSweep *SweepView `json:"storage-sweep,omitempty"`
}

// PurgeJobHeader names the purge job a drop with purge (or purge-now)
// started: the drop answers 204 without a body, so the id travels here and
// in Location.
const PurgeJobHeader = "Icehold-Purge-Job"

// JobPath is the lifecycle URL path of a purge job.
func JobPath(cat, id string) string {
	return "/lifecycle/v1/catalogs/" + url.PathEscape(cat) + "/purge-jobs/" + url.PathEscape(id)
}

func setJobHeaders(w http.ResponseWriter, cat, id string) {
	w.Header().Set("Location", JobPath(cat, id))
	w.Header().Set(PurgeJobHeader, id)
}

func viewOf(j store.Job) JobView {
	v := JobView{
		ID: j.ID, Kind: cmp.Or(j.Kind, store.KindPurge), Namespace: j.Namespace, Table: j.Table, TableUUID: j.TableUUID, State: j.State,
		MetadataLocation: j.MetadataLocation, BatchesTotal: j.BatchesTotal, BatchesDone: j.BatchesDone,
		BatchesDead: j.BatchesDead, FilesDeleted: j.FilesDeleted, FilesMissing: j.FilesMissing,
		DataFilesDeleted: j.DataFilesDeleted, DeleteFilesDeleted: j.DeleteFilesDeleted, MetadataFilesDeleted: j.MetadataFilesDeleted,
		FilesSkipped: j.FilesSkipped, FilesUnreferenced: j.FilesUnreferenced, Bytes: j.Bytes, Attempts: j.Attempts, CreatedBy: j.CreatedBy,
		CreatedAt: store.Seconds(j.CreatedAt), UpdatedAt: store.Seconds(j.UpdatedAt),
		StorageSweep: sweepViewOf(j.StorageSweep),
	}
	if j.LastError != "" {
		v.LastError = &j.LastError
	}
	if j.RecoveredError != "" {
		v.RecoveredError = &j.RecoveredError
	}
	v.Claims = []string{}
	if j.Holding() {
		for _, h := range j.Holds() {
			v.Claims = append(v.Claims, h.URI())
		}
	}
	v.Retries = j.Retries
	if j.AbandonedAt != "" {
		v.AbandonedBy, v.AbandonedAt = &j.AbandonedBy, &j.AbandonedAt
	}
	return v
}

// retryJob runs a FAILED job again (its claims still its own): 202 with
// the job. Its execution starts here where this function can start one,
// else at the next reconcile run.
func (s *server) retryJob(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok || !noBody(w, r) {
		return
	}
	j, err := purge.Retry(r.Context(), s.store, cat, r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	if s.Purge != nil {
		s.Purge.Started(r.Context(), j)
	}
	setJobHeaders(w, cat, j.ID)
	writeJSON(w, http.StatusAccepted, viewOf(j))
}

// AbandonView is the answer of an abandon: the job, and where its files
// stay in the bucket, owned by nobody now.
type AbandonView struct {
	Job       JobView  `json:"job"`
	FilesKept []string `json:"files-kept"`
}

// abandonJob lets a FAILED job's claims go; the answer names each
// location whose files stay (also in Icehold-Files-Kept, as a drop's).
func (s *server) abandonJob(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok || !noBody(w, r) {
		return
	}
	j, kept, err := purge.Abandon(r.Context(), s.store, cat, r.PathValue("id"), authz.Principal(r.Context()))
	if err != nil {
		writeError(w, err)
		return
	}
	for _, k := range kept {
		w.Header().Add(FilesKeptHeader, k)
	}
	writeJSON(w, http.StatusOK, AbandonView{Job: viewOf(j), FilesKept: kept})
}

// noBody refuses a body on a POST that takes none ({} and no body are
// none): a field there would be a request this route does not make.
func noBody(w http.ResponseWriter, r *http.Request) bool {
	var none struct{}
	if err := decodeStrict(r, &none, true); err != nil {
		writeError(w, err)
		return false
	}
	return true
}

var jobStates = []string{store.JobPending, store.JobRunning, store.JobDeadLettered, store.JobSucceeded, store.JobFailed, store.JobCancelled}

func (s *server) listJobs(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	token, size, err := paging(r)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	state, kind := q.Get("state"), q.Get("kind")
	if kind != "" && !slices.Contains(store.Kinds, kind) {
		writeError(w, fmt.Errorf("%w: kind must be one of %s", catalog.ErrBadRequest, strings.Join(store.Kinds, ", ")))
		return
	}
	if state != "" && !slices.Contains(jobStates, state) {
		writeError(w, fmt.Errorf("%w: state must be one of %s", catalog.ErrBadRequest, strings.Join(jobStates, ", ")))
		return
	}
	var ns []string
	if v := q.Get("namespace"); v != "" {
		if ns, err = namespaceParam(v); err != nil {
			writeError(w, err)
			return
		}
	}
	jobs, next, err := s.store.ListJobs(r.Context(), cat, token, size)
	if errors.Is(err, store.ErrBadPageToken) {
		err = fmt.Errorf("%w: %v", catalog.ErrBadRequest, err)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	out := []JobView{}
	for _, j := range jobs {
		if (state == "" || j.State == state) && (ns == nil || slices.Equal(ns, j.Namespace)) && (q.Get("table") == "" || q.Get("table") == j.Table) &&
			(kind == "" || kind == cmp.Or(j.Kind, store.KindPurge)) {
			out = append(out, viewOf(j))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"jobs": out, "next-page-token": nullable(next)})
}

func (s *server) getJob(w http.ResponseWriter, r *http.Request) {
	cat, ok := s.manage(w, r)
	if !ok {
		return
	}
	j, err := s.store.GetJob(r.Context(), cat, r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("purge job %s: %w", r.PathValue("id"), catalog.ErrNotFound)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(j))
}
