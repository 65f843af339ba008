package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/icehold/icehold/local/emulators"
)

// The schedules (EventBridge rules in AWS) a local server runs on its own,
// and that `icehold local run NAME` runs now: POST
// /local/v1/schedules/NAME/run on the REST port, admin token only, answers
// the run's report.
const (
	ScheduleRetention  = "retention"   // partition retention and snapshot expiry (hourly)
	ScheduleHoldExpiry = "hold-expiry" // soft-deleted tables past their hold period (every 15 minutes)
	ScheduleReconcile  = "reconcile"   // stuck purge jobs, then the orphan sweep (every minute; 5 in AWS)
	ScheduleOrphans    = "orphans"     // the orphan sweep alone (part of reconcile)
	// ScheduleInventory writes the warehouse bucket's S3 Inventory report
	// (S3 delivers one daily in AWS) and records it as the newest.
	ScheduleInventory = "inventory"
	// ScheduleStorageSweep sweeps the warehouse bucket on its newest
	// report: what the stack's rule does when S3 delivers one.
	ScheduleStorageSweep = "storage-sweep"
)

// Schedules are the names RunSchedule takes.
var Schedules = []string{ScheduleRetention, ScheduleHoldExpiry, ScheduleReconcile, ScheduleOrphans, ScheduleInventory, ScheduleStorageSweep}

// InventoryRun is what `icehold local run inventory` answers.
type InventoryRun struct {
	Manifest string `json:"manifest"`
	Files    int    `json:"files"`
	Rows     int    `json:"rows"`
}

// SweepRun is what `icehold local run storage-sweep` answers: the jobs
// started (one per catalog of the bucket; GET …/purge-jobs/{id} follows
// each).
type SweepRun struct {
	Report string   `json:"report"`
	Jobs   []string `json:"jobs"`
}

// SchedulePath is the local route that runs a schedule now.
func SchedulePath(name string) string { return "/local/v1/schedules/" + name + "/run" }

// RunSchedule runs one schedule now, as its timer does, and returns what it
// did.
func (s *Server) RunSchedule(ctx context.Context, name string) (any, error) {
	switch name {
	case ScheduleRetention:
		return s.Partitions.SweepRetention(ctx, s.now(), 0)
	case ScheduleHoldExpiry:
		return s.SoftDelete.Expire(ctx, 0)
	case ScheduleReconcile:
		return s.Purge.Reconcile(ctx)
	case ScheduleOrphans:
		return s.Purge.SweepOrphans(ctx, s.now())
	case ScheduleInventory:
		return s.WriteInventory(ctx)
	case ScheduleStorageSweep:
		r, err := s.Catalog.Store().LatestReport(ctx, s.Info.Bucket)
		if err != nil {
			return nil, fmt.Errorf("the newest inventory report of %s (icehold local run inventory writes one): %w", s.Info.Bucket, err)
		}
		jobs, err := s.StorageSweep.SweepBucket(ctx, s.Info.Bucket)
		run := SweepRun{Report: r.Manifest, Jobs: []string{}}
		for _, j := range jobs {
			run.Jobs = append(run.Jobs, j.ID)
		}
		return run, err
	}
	return nil, fmt.Errorf("no schedule %q: want one of %s", name, strings.Join(Schedules, ", "))
}

// WriteInventory writes the warehouse bucket's inventory report with the
// embedded S3 (every version; the fields the storage sweep reads) into
// the inventory bucket, and records it as the bucket's newest.
func (s *Server) WriteInventory(ctx context.Context) (InventoryRun, error) {
	if s.S3Emulator == nil {
		return InventoryRun{}, fmt.Errorf("inventory reports are the embedded S3's; this server's S3 is external")
	}
	rep, err := s.S3Emulator.Store.WriteInventory(s.Info.Bucket, emulators.InventoryConfig{
		ID: InventoryID, DestinationBucket: InventoryBucket, DestinationPrefix: InventoryPrefix,
	}, s.now())
	if err != nil {
		return InventoryRun{}, err
	}
	uri := "s3://" + InventoryBucket + "/" + rep.ManifestKey
	if _, err := s.StorageSweep.Record(ctx, uri); err != nil {
		return InventoryRun{}, err
	}
	return InventoryRun{Manifest: uri, Files: len(rep.Manifest.Files), Rows: rep.Rows}, nil
}

func (s *Server) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// localAPI serves the local server's own routes (/local/v1/…) beside the
// product's API.
func (s *Server) localAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/local/v1/schedules/")
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		name, ok := strings.CutSuffix(rest, "/run")
		switch {
		case !ok || !slices.Contains(Schedules, name):
			localError(w, http.StatusNotFound, "NoSuchScheduleException", fmt.Sprintf("no schedule %q: want one of %s", name, strings.Join(Schedules, ", ")))
		case r.Method != http.MethodPost:
			localError(w, http.StatusMethodNotAllowed, "MethodNotAllowedException", "POST runs a schedule")
		case s.authenticate(r) != AdminPrincipal:
			localError(w, http.StatusForbidden, "ForbiddenException", "running a schedule takes the local admin token (local.json's admin_token)")
		default:
			rep, err := s.RunSchedule(r.Context(), name)
			if err != nil {
				localError(w, http.StatusInternalServerError, "ScheduleFailedException", fmt.Sprintf("%s: %v", name, err))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"schedule": name, "report": rep})
		}
	})
}

// localError answers in the Iceberg REST ErrorModel, as the API does.
func localError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}
