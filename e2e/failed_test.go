package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/store"
)

// failingPlans makes every plan step fail while on is set: the job ends
// FAILED past the workflow's retries (the catch path).
func failingPlans(t *testing.T, on *atomic.Bool) {
	t.Helper()
	srv := localOnly(t)
	srv.Purge.SetCrash(func(p string) error {
		if p == "plan.batches-written" && on.Load() {
			return errors.New("manifest lists unreachable (injected)")
		}
		return nil
	})
	t.Cleanup(func() { srv.Purge.SetCrash(nil) })
}

// Defect (issue 30): a purge that ended FAILED released its claim and left
// its files unowned (another table could take the prefix, a purge under
// the warehouse scope reach them), and teardown-check did not report it.
// A FAILED job keeps its claims: a create at its location is refused
// naming the FAILED job, teardown-check lists it, a retry runs it to
// SUCCEEDED (which lets them go), and an abandon lets them go and names
// where the files stay.
func TestFailedJobKeepsItsClaimsUntilRetriedOrAbandoned(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	var failing atomic.Bool
	failing.Store(true)
	failingPlans(t, &failing)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "failed")
	tables := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/tables"
	jobs := "/lifecycle/v1/catalogs/" + shared.Catalog + "/purge-jobs/"

	t1 := writtenTable(t, cat, ns, "t1", nil, false)
	t2 := writtenTable(t, cat, ns, "t2", nil, false)
	j1 := waitJob(t, dropPurge(t, ns, "t1").ID, store.JobFailed, 2*time.Minute)
	j2 := waitJob(t, dropPurge(t, ns, "t2").ID, store.JobFailed, 2*time.Minute)
	for _, c := range []struct {
		job jobJSON
		loc string
	}{{j1, t1.Location()}, {j2, t2.Location()}} {
		if !slices.Contains(c.job.Claims, c.loc) {
			t.Errorf("FAILED job %s claims %v, want %s kept", c.job.ID, c.job.Claims, c.loc)
		}
		st, body := call(t, "POST", tables, shared.Token, map[string]any{"name": uniq("squat"), "location": c.loc + "/sub", "schema": rawSchema})
		if _, _, msg := errorModel(t, body); st != 409 || !strings.Contains(msg, c.job.ID) || !strings.Contains(msg, "FAILED") {
			t.Errorf("create inside a FAILED job's location: %d %q, want 409 naming the job and its state", st, msg)
		}
	}
	rep, err := srv.Catalog.Teardown(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []jobJSON{j1, j2} {
		if !slices.ContainsFunc(rep.Failed, func(l string) bool { return strings.Contains(l, j.ID) }) || rep.Empty() {
			t.Errorf("teardown-check's failed jobs %q do not name %s", rep.Failed, j.ID)
		}
	}

	// Retried, it runs to SUCCEEDED and lets its claims go.
	failing.Store(false)
	var retried jobJSON
	mustDecode(t, mustCall(t, 202, "POST", jobs+j1.ID+"/retry", shared.Token, nil), &retried)
	if retried.Retries != 1 || store.Terminal(retried.State) {
		t.Errorf("retry answer: %+v, want the job running again (retry 1)", retried)
	}
	done := waitJob(t, j1.ID, store.JobSucceeded, 2*time.Minute)
	if len(done.Claims) != 0 {
		t.Errorf("a SUCCEEDED job claims %v", done.Claims)
	}
	if left := objectsUnder(t, srv, t1.Location()); len(left) > 0 {
		t.Errorf("the retried job SUCCEEDED with %d objects left under %s", len(left), t1.Location())
	}
	mustCall(t, 409, "POST", jobs+j1.ID+"/retry", shared.Token, nil)

	// Abandoned, it lets its claims go and says where the files stay.
	var ab router.AbandonView
	mustDecode(t, mustCall(t, 200, "POST", jobs+j2.ID+"/abandon", shared.Token, nil), &ab)
	if !slices.Equal(ab.FilesKept, []string{t2.Location()}) || len(ab.Job.Claims) != 0 || ab.Job.AbandonedBy == nil || ab.Job.State != store.JobFailed {
		t.Errorf("abandon answer: %+v, want FAILED, abandoned, no claims, files kept at %s", ab, t2.Location())
	}
	for _, again := range []string{"/abandon", "/retry"} {
		if st, body := call(t, "POST", jobs+j2.ID+again, shared.Token, nil); st != 409 {
			t.Errorf("%s of an abandoned job: %d %s, want 409", again, st, body)
		}
	}
	if _, ok := bucketObjects(t, srv)[t2.MetadataLocation()]; !ok {
		t.Errorf("abandon deleted %s", t2.MetadataLocation())
	}
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": uniq("adopt"), "location": t2.Location() + "/sub", "schema": rawSchema})
	if rep, err = srv.Catalog.Teardown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range rep.Failed {
		if strings.Contains(l, j1.ID) || strings.Contains(l, j2.ID) {
			t.Errorf("teardown-check still lists %s", l)
		}
	}
}
