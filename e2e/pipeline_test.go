package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/emulators"
)

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := uniq(prefix)
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	return ns
}

func dropPurge(t *testing.T, ns, name string) jobJSON {
	t.Helper()
	mustCall(t, 204, "DELETE", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/"+name+"?purgeRequested=true", shared.Token, nil)
	jobs := jobsOf(t, ns, name)
	if len(jobs) == 0 {
		t.Fatalf("no job for %s.%s", ns, name)
	}
	return jobs[len(jobs)-1] // the newest

}

// assertGone checks that nothing reachable from a dropped table is left.
func assertGone(t *testing.T, data, meta map[string]bool) {
	t.Helper()
	after := bucketObjects(t, localOnly(t))
	for _, set := range []map[string]bool{data, meta} {
		for p := range set {
			if _, ok := after[p]; ok {
				t.Errorf("reachable object survived: %s", p)
			}
		}
	}
}

// A batch that fails every time lands in the DLQ after maxReceiveCount
// receives and the job is DEAD_LETTERED with the reason; once the fault is
// cleared, a redrive (the console's) completes the job.
func TestPoisonBatchDeadLettersAndRedriveCompletes(t *testing.T) {
	embeddedAWS(t)
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "poison")
	tbl := writtenTable(t, cat, ns, "t", nil, false)
	data, meta := reachable(t, tbl)

	srv.S3Emulator.SetFault(&emulators.Fault{Match: emulators.IsDeleteObjects, Status: http.StatusForbidden, Code: "AccessDenied"})
	defer srv.S3Emulator.SetFault(nil)
	job := dropPurge(t, ns, "t")
	dead := waitJob(t, job.ID, "DEAD_LETTERED", time.Minute)
	if dead.LastError == nil || !strings.Contains(*dead.LastError, "AccessDenied") || dead.BatchesDead == 0 {
		t.Fatalf("dead-lettered job lacks its reason: %+v", dead)
	}
	// Every batch ends in the DLQ; nothing was deleted meanwhile.
	deadline := time.Now().Add(time.Minute)
	for dlqDepth(t) < dead.BatchesTotal {
		if time.Now().After(deadline) {
			t.Fatalf("DLQ holds %d messages, want %d", dlqDepth(t), dead.BatchesTotal)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if dead.FilesDeleted != 0 {
		t.Errorf("files deleted while every delete failed: %d", dead.FilesDeleted)
	}

	srv.S3Emulator.SetFault(nil)
	if err := srv.Redrive(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, job.ID, "SUCCEEDED", time.Minute)
	if done.BatchesDead != 0 || done.FilesDeleted != int64(len(data)+len(meta)) {
		t.Errorf("after redrive: %+v, want %d files deleted and no dead batch", done, len(data)+len(meta))
	}
	assertGone(t, data, meta)
}

func dlqDepth(t *testing.T) int {
	t.Helper()
	out, err := localOnly(t).QueueDepth(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Register with the job's own metadata location while the job is PENDING
// cancels it and restores the table; once deletion has started it is a 409.
func TestRegisterRecoversPendingPurge(t *testing.T) {
	embeddedAWS(t)
	srv := localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := newNamespace(t, "recover")
	tbl := writtenTable(t, cat, ns, "t", nil, false)
	data, _ := reachable(t, tbl)

	// No execution starts: the job stays PENDING (as when StartExecution is lost).
	noStart := errors.New("workflow unavailable")
	srv.Purge.SetCrash(func(p string) error {
		if p == "start" || p == "drop.before-start" {
			return noStart
		}
		return nil
	})
	t.Cleanup(func() { srv.Purge.SetCrash(nil); srv.S3Emulator.SetFault(nil) })
	job := dropPurge(t, ns, "t")
	if job.State != "PENDING" {
		t.Fatalf("job is %s, want PENDING", job.State)
	}
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/register", shared.Token,
		map[string]any{"name": "t", "metadata-location": tbl.MetadataLocation()})
	srv.Purge.SetCrash(nil)
	waitJob(t, job.ID, "CANCELLED", 5*time.Second)
	back, err := cat.LoadTable(ctx, table.Identifier{ns, "t"})
	if err != nil {
		t.Fatalf("restored table: %v", err)
	}
	if n := countRows(t, back); n != 30 {
		t.Errorf("restored table scans %d rows, want 30", n)
	}
	now := bucketObjects(t, srv)
	for p := range data {
		if _, ok := now[p]; !ok {
			t.Errorf("a cancelled job deleted %s", p)
		}
	}

	// Deletion started: no recovery.
	srv.S3Emulator.SetFault(&emulators.Fault{Match: emulators.IsDeleteObjects, Status: http.StatusForbidden, Code: "AccessDenied"})
	job = dropPurge(t, ns, "t")
	waitJob(t, job.ID, "RUNNING", 10*time.Second)
	status, body := call(t, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/register", shared.Token,
		map[string]any{"name": "t", "metadata-location": back.MetadataLocation()})
	srv.S3Emulator.SetFault(nil)
	if status != 409 || !strings.Contains(string(body), job.ID) {
		t.Errorf("register after deletion started: %d %s, want 409 naming %s", status, body, job.ID)
	}
	_ = srv.Redrive(ctx)
	waitJob(t, job.ID, "SUCCEEDED", time.Minute)
}

// Crash points: the pipeline stops at each point once and resumes (retries,
// lease expiry, reconcile) to exactly the state and counters of an
// uninterrupted run; the same with every SQS message delivered twice. Each
// table also holds files no commit reached, for the final listing.
func TestCrashPointsResumeExactly(t *testing.T) {
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "crash")
	uncommitted := func(tbl *table.Table) string {
		loc := strings.TrimRight(tbl.Location(), "/")
		putObjects(t, srv, loc+"/data/uncommitted-0.parquet", loc+"/data/x=1/uncommitted-1.parquet", loc+"/metadata/uncommitted.avro")
		return loc
	}

	baselineTbl := writtenTable(t, cat, ns, "baseline", nil, true)
	bdata, bmeta := reachable(t, baselineTbl)
	bloc := uncommitted(baselineTbl)
	base := waitJob(t, dropPurge(t, ns, "baseline").ID, "SUCCEEDED", time.Minute)
	assertGone(t, bdata, bmeta)
	if base.BatchesTotal < 2 || base.FilesUnreferenced != 3 {
		t.Fatalf("baseline has %d batches and %d unreferenced files; the test needs several and 3", base.BatchesTotal, base.FilesUnreferenced)
	}
	if left := objectsUnder(t, srv, bloc); len(left) > 0 {
		t.Fatalf("baseline left %d objects", len(left))
	}

	cases := []struct {
		name       string
		point      string
		duplicates bool
	}{
		{"after the transaction, before StartExecution", "drop.before-start", false},
		{"in the middle of planning", "plan.batches-written", false},
		{"after some DeleteObjects of a batch", "delete.before-checkpoint", false},
		{"after all batches, before finalization", "finalize.start", false},
		{"in the final listing, a page counted, not deleted", "finalize.sweep-counted", false},
		{"in the final listing, a page deleted, not closed", "finalize.sweep-deleted", false},
		{"in the middle of finalization", "finalize.before-checkpoint", false},
		{"after the current metadata file went", "finalize.metadata-deleted", false},
		{"every message delivered twice", "", true},
		{"delivered twice and a crash after DeleteObjects", "delete.before-checkpoint", true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.duplicates {
				embeddedAWS(t)
			}
			name := fmt.Sprintf("t%d", i)
			tbl := writtenTable(t, cat, ns, name, nil, true)
			data, meta := reachable(t, tbl)
			loc := uncommitted(tbl)
			var crashed atomic.Int32
			srv.Purge.SetCrash(func(p string) error {
				if p == tc.point && crashed.Add(1) == 1 {
					return fmt.Errorf("crash at %s", p)
				}
				return nil
			})
			if tc.duplicates {
				srv.Queues.SetDuplicates(true)
				defer srv.Queues.SetDuplicates(false)
			}
			defer srv.Purge.SetCrash(nil)
			job := dropPurge(t, ns, name)
			done := waitJob(t, job.ID, "SUCCEEDED", time.Minute)
			if tc.point != "" && crashed.Load() == 0 {
				t.Fatalf("the pipeline never reached %s", tc.point)
			}
			if done.FilesDeleted != base.FilesDeleted || done.FilesMissing != base.FilesMissing || done.FilesSkipped != base.FilesSkipped ||
				done.FilesUnreferenced != base.FilesUnreferenced ||
				done.BatchesDone != base.BatchesDone || done.BatchesTotal != base.BatchesTotal || done.BatchesDead != 0 {
				t.Errorf("counters differ from the uninterrupted run:\n got  %+v\n want %+v", done, base)
			}
			assertGone(t, data, meta)
			if left := objectsUnder(t, srv, loc); len(left) > 0 {
				t.Errorf("%d objects left under the location", len(left))
			}
		})
	}
}

// A step that fails past its retries takes the state machine's Catch path:
// the job is FAILED with the cause and the name is free again.
func TestFailingStepTakesCatchPath(t *testing.T) {
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "catch")
	writtenTable(t, cat, ns, "t", nil, false)
	var calls atomic.Int32
	srv.Purge.SetCrash(func(p string) error {
		if p == "plan.batches-written" {
			calls.Add(1)
			return errors.New("manifest lists unreachable")
		}
		return nil
	})
	t.Cleanup(func() { srv.Purge.SetCrash(nil) })
	job := dropPurge(t, ns, "t")
	failed := waitJob(t, job.ID, "FAILED", time.Minute)
	if failed.LastError == nil || !strings.Contains(*failed.LastError, "manifest lists unreachable") {
		t.Errorf("failed job's last-error: %v", failed.LastError)
	}
	if n := calls.Load(); n != 6 {
		t.Errorf("plan ran %d times, want 6 (1 + the definition's 5 retries)", n)
	}
	if got := eventually(func() []string { return lifecycleEvents(t, job.ID) }, func(got []string) bool { return slices.Contains(got, "PurgeFailed") }); !slices.Contains(got, "PurgeFailed") {
		t.Errorf("events of a failed purge: %v", got)
	}
	// A FAILED job does not hold the name.
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables", shared.Token, `{"name":"t","schema":`+schemaJSON+`}`)
}

// eventually reads events until they satisfy ok (or 10 s pass): an event is
// published after the state change it reports, so a reader that has seen
// the state may not have the event yet (the outbox of the first-contact
// issue orders them; until then the tests wait).
func eventually[T any](read func() T, ok func(T) bool) T {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := read()
		if ok(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lifecycleEvents reads the local event bus (events.log) for one job.
func lifecycleEvents(t *testing.T, jobID string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(localOnly(t).Info.StateDir, "events.log"))
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e struct {
			Type   string `json:"detail-type"`
			Source string `json:"source"`
			Detail struct {
				JobID     string   `json:"job-id"`
				Catalog   string   `json:"catalog"`
				Namespace []string `json:"namespace"`
				Table     string   `json:"table"`
				TableUUID string   `json:"table-uuid"`
				Actor     string   `json:"actor"`
				Time      string   `json:"time"`
			} `json:"detail"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Detail.JobID != jobID {
			continue
		}
		if e.Source != "icehold" || e.Detail.Catalog == "" || e.Detail.Table == "" || e.Detail.TableUUID == "" || e.Detail.Actor == "" || e.Detail.Time == "" {
			t.Errorf("event lacks actor/catalog/identifier/uuid/time: %s", line)
		}
		types = append(types, e.Type)
	}
	return types
}

// Each purge publishes its lifecycle events to the bus (locally a JSON-lines log).
func TestPurgeEvents(t *testing.T) {
	embeddedAWS(t)
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "events")

	writtenTable(t, cat, ns, "ok", nil, false)
	job := dropPurge(t, ns, "ok")
	waitJob(t, job.ID, "SUCCEEDED", time.Minute)
	want := []string{"TablePermanentlyDeleted", "PurgeStarted", "PurgeCompleted"}
	if got := eventually(func() []string { return lifecycleEvents(t, job.ID) }, func(got []string) bool { return slices.Equal(got, want) }); !slices.Equal(got, want) {
		t.Errorf("events of a purge: %v", got)
	}

	writtenTable(t, cat, ns, "dead", nil, false)
	srv.S3Emulator.SetFault(&emulators.Fault{Match: emulators.IsDeleteObjects, Status: http.StatusForbidden, Code: "AccessDenied"})
	t.Cleanup(func() { srv.S3Emulator.SetFault(nil) })
	job = dropPurge(t, ns, "dead")
	dead := waitJob(t, job.ID, "DEAD_LETTERED", time.Minute)
	for deadline := time.Now().Add(time.Minute); dlqDepth(t) < dead.BatchesTotal && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond) // every batch in the DLQ before the redrive
	}
	srv.S3Emulator.SetFault(nil)
	if got := eventually(func() []string { return lifecycleEvents(t, job.ID) }, func(got []string) bool { return slices.Contains(got, "PurgeDeadLettered") }); !slices.Contains(got, "PurgeDeadLettered") {
		t.Errorf("events of a dead-lettered purge: %v", got)
	}
	_ = srv.Redrive(context.Background())
	waitJob(t, job.ID, "SUCCEEDED", time.Minute)
	waitDrained(t)
}

// waitDrained waits until the delete queue and its DLQ are empty, so that a
// later test's fault injection meets no leftover batch.
func waitDrained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		main, err := localOnly(t).QueueDepth(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		if main+dlqDepth(t) == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Issue 12, finding 7: while SQS retries a failing batch the job says why
// (not "-"); once it succeeds the error is shown as recovered, not as its
// state; files deleted are counted by kind, and the kinds add up.
func TestJobShowsRetryErrorsAndCountsFilesByKind(t *testing.T) {
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "retry")
	tbl := writtenTable(t, cat, ns, "t", nil, true)
	data, meta := reachable(t, tbl)
	deletes := deleteFilesOf(t, tbl)
	if len(deletes) == 0 {
		t.Fatal("the table has no delete file")
	}
	srv.S3Emulator.SetFault(&emulators.Fault{Match: emulators.IsDeleteObjects, Status: http.StatusForbidden, Code: "AccessDenied"})
	t.Cleanup(func() { srv.S3Emulator.SetFault(nil) })
	job := dropPurge(t, ns, "t")

	var j jobJSON
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+shared.Catalog+"/purge-jobs/"+job.ID, shared.Token, nil), &j)
		if j.LastError != nil || j.State != "RUNNING" && j.State != "PENDING" || time.Now().After(deadline) {
			break
		}
	}
	srv.S3Emulator.SetFault(nil)
	if j.State != "RUNNING" || j.LastError == nil || !strings.Contains(*j.LastError, "retrying") || !strings.Contains(*j.LastError, "AccessDenied") {
		t.Fatalf("a job whose batch is being retried shows state %s, last error %v", j.State, j.LastError)
	}

	done := waitJob(t, job.ID, "SUCCEEDED", time.Minute)
	if done.LastError != nil || done.RecoveredError == nil || !strings.Contains(*done.RecoveredError, "AccessDenied") {
		t.Errorf("a recovered job shows last error %v, recovered error %v", done.LastError, done.RecoveredError)
	}
	wantData, wantDeletes := int64(len(data)-len(deletes)), int64(len(deletes))
	if done.DataFilesDeleted != wantData || done.DeleteFilesDeleted != wantDeletes || done.MetadataFilesDeleted != int64(len(meta)) ||
		done.DataFilesDeleted+done.DeleteFilesDeleted+done.MetadataFilesDeleted != done.FilesDeleted {
		t.Errorf("deleted %d = %d data + %d delete + %d metadata files, want %d + %d + %d",
			done.FilesDeleted, done.DataFilesDeleted, done.DeleteFilesDeleted, done.MetadataFilesDeleted, wantData, wantDeletes, len(meta))
	}
	waitDrained(t)
}

// deleteFilesOf lists the table's position and equality delete files.
func deleteFilesOf(t *testing.T, tbl *table.Table) map[string]bool {
	t.Helper()
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, sn := range tbl.Metadata().Snapshots() {
		mfs, err := sn.Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			entries, err := mf.FetchEntries(fs, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.DataFile().ContentType() != iceberg.EntryContentData {
					out[e.DataFile().FilePath()] = true
				}
			}
		}
	}
	return out
}
