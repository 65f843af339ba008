package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/icehold/icehold/local/server"
)

func TestProgressLine(t *testing.T) {
	first := job{FilesDeleted: 0}
	cases := []struct {
		j    job
		want []string
	}{
		{job{State: "RUNNING", BatchesTotal: 4, BatchesDone: 1, FilesDeleted: 5000}, []string{" 25%", "batches 1/4", "files 5000", "500 files/s", "ETA 30s"}},
		{job{State: "SUCCEEDED", BatchesTotal: 4, BatchesDone: 4, FilesDeleted: 20000}, []string{"100%", "batches 4/4", "SUCCEEDED", "ETA -"}},
		{job{State: "PENDING"}, []string{"  0%", "batches 0/0", "ETA -"}},
	}
	for _, c := range cases {
		got := progressLine(c.j, first, 10*time.Second)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("progress %q lacks %q", got, w)
			}
		}
	}
}

// The jobs commands against a local server: a purge shows in list, show
// and watch (which ends when the job does).
func TestJobsCommands(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := server.Start(ctx, server.Options{Dir: dir, TimeScale: 0.01, ReconcileEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	send := func(method, path, body string) {
		req, _ := http.NewRequest(method, srv.Info.RESTURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.Info.AdminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode >= 300 {
			t.Fatalf("%s %s: %v %v", method, path, err, res)
		}
		res.Body.Close()
	}
	send("POST", "/v1/demo/namespaces", `{"namespace":["ops"]}`)
	send("POST", "/v1/demo/namespaces/ops/tables", `{"name":"t","schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"long","required":false}]}}`)
	send("DELETE", "/v1/demo/namespaces/ops/tables/t?purgeRequested=true", "")

	conn := []string{"--dir", dir}
	var out bytes.Buffer
	if err := execute(ctx, append([]string{"jobs", "list", "--table", "t"}, conn...), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "ops.t") {
		t.Fatalf("jobs list:\n%s", out.String())
	}
	id := strings.Fields(lines[1])[0]
	out.Reset()
	if err := execute(ctx, append(append([]string{"jobs", "watch"}, conn...), "--every", "50ms", id), &out, io.Discard); err != nil {
		var show bytes.Buffer
		_ = execute(ctx, []string{"jobs", "show", id, "--dir", dir}, &show, io.Discard)
		t.Fatalf("watch: %v\n%s", err, show.String())
	}
	if !strings.Contains(out.String(), "100%") || !strings.Contains(out.String(), "SUCCEEDED") {
		t.Errorf("watch did not end at 100%%:\n%s", out.String())
	}
	out.Reset()
	if err := execute(ctx, []string{"jobs", "show", id, "--dir", dir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "SUCCEEDED") || !strings.Contains(out.String(), "deleted") {
		t.Errorf("show:\n%s", out.String())
	}
	if err := execute(ctx, append(append([]string{"jobs", "show"}, conn...), "pj-nope"), &out, io.Discard); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("show of an unknown job: %v", err)
	}
}

// tables drop --purge --watch follows the job the drop's Icehold-Purge-Job
// header names until it ends; a plain drop only drops.
func TestDropWatch(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Options{Dir: dir, TimeScale: 0.01, ReconcileEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	table := `{"name":"%s","schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"long","required":false}]}}`
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/v1/demo/namespaces/ops/tables", fmt.Sprintf(table, "t")},
		{"/v1/demo/namespaces/ops/tables", fmt.Sprintf(table, "u")},
	})
	out, _, err := cli("tables", "drop", "ops.t", "--purge", "--yes", "--watch", "--every", "50ms", "--dir", dir)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	jobs, _, err := srv.Catalog.Store().ListJobs(context.Background(), "demo", "", 10)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %+v (%v)", jobs, err)
	}
	if !strings.Contains(out, "purge job "+jobs[0].ID+" started") || !strings.Contains(out, "100%") || !strings.Contains(out, "SUCCEEDED") {
		t.Errorf("drop --watch did not follow %s to its end:\n%s", jobs[0].ID, out)
	}
	if out, _, err := cli("tables", "drop", "ops.u", "--dir", dir); err != nil || !strings.HasPrefix(out, "soft-deleted ops.u ") || strings.Contains(out, "purge") {
		t.Errorf("plain drop: %v %q", err, out)
	}
}

// watch to a pipe prints a line per change (no redraws), with -o json one
// JSON object per change, and stops non-zero on DEAD_LETTERED or FAILED
// naming the next step.
func TestWatchOutputs(t *testing.T) {
	run := func(asJSON bool, states ...job) (string, error) {
		var out bytes.Buffer
		i := 0
		err := watch(context.Background(), &out, time.Millisecond, asJSON, func() (job, error) {
			j := states[min(i, len(states)-1)]
			i++
			return j, nil
		}, func(j job) string { return "icehold local redrive" })
		return out.String(), err
	}
	running := job{ID: "j1", State: "RUNNING", BatchesTotal: 2, BatchesDone: 1, FilesDeleted: 10}
	done := job{ID: "j1", State: "SUCCEEDED", BatchesTotal: 2, BatchesDone: 2, FilesDeleted: 20}
	out, err := run(false, running, running, running, done)
	if err != nil || strings.Contains(out, "\r") || strings.Count(out, "\n") != 2 || !strings.Contains(out, "SUCCEEDED") {
		t.Errorf("piped watch: %v, want 2 lines (one per change), no redraws:\n%q", err, out)
	}
	out, err = run(true, running, running, done)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		var j job
		if json.Unmarshal([]byte(l), &j) != nil || j.ID != "j1" {
			t.Errorf("-o json: a line that is not a job: %q", l)
		}
	}
	if err != nil || len(lines) != 2 || strings.Contains(out, "█") {
		t.Errorf("-o json watch: %v, want 2 JSON lines, no bar:\n%s", err, out)
	}
	for _, end := range []string{"DEAD_LETTERED", "FAILED"} {
		out, err := run(false, running, job{ID: "j1", State: end, BatchesTotal: 2, BatchesDone: 1, BatchesDead: 1})
		if err == nil || !strings.Contains(err.Error(), end) || !strings.Contains(err.Error(), "icehold") {
			t.Errorf("watch to %s: %v, want an error naming the state and the next step\n%s", end, err, out)
		}
	}
}
