package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

// Defect (issue 30): a purge that ended FAILED let its claims go, and
// teardown-check reported neither it nor unregistered tables. Now
// teardown-check fails naming the FAILED job and lists the unregistered
// table apart; icehold tables unregistered lists it with what it keeps;
// icehold jobs abandon lets the job's claims go and prints where its files
// stay, after which teardown-check no longer names it.
func TestFailedJobAndUnregisteredTableCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := server.Start(ctx, server.Options{Dir: dir, TimeScale: 0.01, ReconcileEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", server.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", server.SecretKey)
	srv.Purge.SetCrash(func(p string) error {
		if p == "plan.batches-written" {
			return errors.New("manifest lists unreachable (injected)")
		}
		return nil
	})
	createTable(t, srv, "f")
	createTable(t, srv, "u")
	if _, err := srv.Catalog.UnregisterTable(ctx, "demo", catalog.Ident{Namespace: []string{"ops"}, Name: "u"}); err != nil {
		t.Fatal(err)
	}
	j, err := srv.Purge.Drop(ctx, "demo", catalog.Ident{Namespace: []string{"ops"}, Name: "f"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if j, err = srv.Catalog.Store().GetJob(ctx, "demo", j.ID); err == nil && j.State == store.JobFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s, want FAILED", j.ID, j.State)
		}
	}
	check := func() (catalog.TeardownReport, error) {
		var rep catalog.TeardownReport
		return rep, runMigrateCmd(t, srv, "teardown-check", &rep)
	}
	rep, err := check()
	if err == nil || !strings.Contains(err.Error(), "1 FAILED jobs") || len(rep.Failed) != 1 || !strings.Contains(rep.Failed[0], j.ID) {
		t.Errorf("teardown-check with a FAILED job: %+v %v, want it to fail naming %s", rep, err, j.ID)
	}
	if len(rep.Unregistered) != 1 || !strings.Contains(rep.Unregistered[0], "table ops.u") {
		t.Errorf("teardown-check's unregistered tables %q, want ops.u", rep.Unregistered)
	}

	conn := []string{"--dir", dir}
	var out bytes.Buffer
	if err := execute(ctx, append([]string{"tables", "unregistered"}, conn...), &out, io.Discard); err != nil || !strings.Contains(out.String(), "ops.u") || !strings.Contains(out.String(), "s3://") {
		t.Errorf("tables unregistered: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := execute(ctx, append([]string{"jobs", "abandon", j.ID}, conn...), &out, io.Discard); err != nil || !strings.Contains(out.String(), j.Hold.URI()) || !strings.Contains(out.String(), "owned by nobody") {
		t.Errorf("jobs abandon: %v\n%s", err, out.String())
	}
	if err := execute(ctx, append([]string{"jobs", "retry", j.ID}, conn...), io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "abandoned") {
		t.Errorf("jobs retry of an abandoned job: %v, want a 409 saying so", err)
	}
	if rep, err := check(); err != nil || len(rep.Failed) != 0 {
		t.Errorf("teardown-check after the abandon: %+v %v", rep, err)
	}
}
