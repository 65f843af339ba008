package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/server"
)

// startChild runs this test binary as a local server on dir and returns its
// process and the connection details it wrote.
func startChild(t *testing.T, dir string, env ...string) (*exec.Cmd, server.Info) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), serveEnv+"="+dir), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY ") {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("local server exited before it was ready")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("local server did not start")
	}
	var info server.Info
	raw, err := os.ReadFile(filepath.Join(dir, "local.json"))
	if err != nil {
		t.Fatal(err)
	}
	mustDecode(t, raw, &info)
	return cmd, info
}

func killHard(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

// Everything written before a SIGKILL is there after a restart. The
// child compacts its DynamoDB journal every few KB, so the kill finds a
// snapshot and its tail (or a compaction under way).
func TestStateSurvivesKill9(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	compactOften := compactEnv + "=4096"
	cmd, info := startChild(t, dir, compactOften)
	open := func(info server.Info) *rest.Catalog {
		cat, err := rest.NewCatalog(ctx, "icehold", info.RESTURL, rest.WithOAuthToken(info.AdminToken), rest.WithWarehouseLocation(info.Catalog))
		if err != nil {
			t.Fatal(err)
		}
		return cat
	}
	cat := open(info)
	ns := table.Identifier{"sales", "eu"}
	if err := cat.CreateNamespace(ctx, ns[:1], map[string]string{"owner": "ops"}); err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i, name := range []string{"orders", "refunds", "returns"} {
		tbl, err := cat.CreateTable(ctx, append(ns, name), eventSchema)
		if err != nil {
			t.Fatal(err)
		}
		tbl = appendRows(t, tbl, rows(t, 0, 3+i, false))
		want[name] = tbl.MetadataLocation()
	}
	killHard(t, cmd)
	if _, err := os.Stat(filepath.Join(dir, "dynamodb.snapshot")); err != nil {
		t.Fatalf("no journal compaction before the kill: %v", err)
	}

	cmd, info2 := startChild(t, dir, compactOften)
	defer killHard(t, cmd)
	if info2.AdminToken != info.AdminToken {
		t.Errorf("admin token changed across restart")
	}
	cat = open(info2)
	props, err := cat.LoadNamespaceProperties(ctx, ns[:1])
	if err != nil || props["owner"] != "ops" {
		t.Errorf("namespace properties after restart: %v %v", props, err)
	}
	children, err := cat.ListNamespaces(ctx, ns[:1])
	if err != nil || len(children) != 1 {
		t.Errorf("child namespaces after restart: %v %v", children, err)
	}
	n := 0
	for id, err := range cat.ListTables(ctx, ns) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		tbl, err := cat.LoadTable(ctx, id)
		if err != nil {
			t.Fatalf("load %v after restart: %v", id, err)
		}
		name := id[len(id)-1]
		if tbl.MetadataLocation() != want[name] {
			t.Errorf("%s points at %s, want %s", name, tbl.MetadataLocation(), want[name])
		}
		rowsWant := map[string]int64{"orders": 3, "refunds": 4, "returns": 5}[name]
		if got := countRows(t, tbl); got != rowsWant {
			t.Errorf("%s scans %d rows after restart, want %d", name, got, rowsWant)
		}
	}
	if n != 3 {
		t.Errorf("%d tables after restart, want 3", n)
	}
	raw, _ := json.Marshal(info2)
	t.Logf("restarted: %s", raw)
}

// kill -9 in the middle of a purge: after a restart the purge finishes, with
// nothing reachable left, nothing foreign deleted and exact counters.
func TestPurgeSurvivesKill9(t *testing.T) {
	localOnly(t)
	dir := t.TempDir()
	cmd, info := startChild(t, dir, slowDeletesEnv+"=150ms")
	saved := *shared
	shared = &env{URL: info.RESTURL, Token: info.AdminToken, Catalog: info.Catalog}
	defer func() { *shared = saved }()
	child := &server.Server{Info: info}

	cat := client(t, shared.Token)
	ns := newNamespace(t, "kill")
	tbl := writtenTable(t, cat, ns, "t", nil, true)
	writtenTable(t, cat, ns, "t2", nil, false)
	data, meta := reachable(t, tbl)
	before := bucketObjects(t, child)

	job := dropPurge(t, ns, "t")
	deadline := time.Now().Add(time.Minute)
	for {
		var j jobJSON
		mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+shared.Catalog+"/purge-jobs/"+job.ID, shared.Token, nil), &j)
		if j.State == "RUNNING" && j.FilesDeleted > 0 {
			break
		}
		if j.State == "SUCCEEDED" || time.Now().After(deadline) {
			t.Fatalf("could not catch the purge mid-way: %+v", j)
		}
		time.Sleep(20 * time.Millisecond)
	}
	killHard(t, cmd)

	cmd, info = startChild(t, dir)
	defer killHard(t, cmd)
	shared.URL = info.RESTURL
	child = &server.Server{Info: info}
	done := waitJob(t, job.ID, "SUCCEEDED", 2*time.Minute)
	after := bucketObjects(t, child)
	for k, etag := range before {
		gone := after[k] == ""
		switch {
		case (data[k] || meta[k]) && !gone:
			t.Errorf("reachable object survived: %s", k)
		case !data[k] && !meta[k] && after[k] != etag:
			t.Errorf("foreign object deleted or changed: %s", k)
		}
	}
	if done.FilesDeleted != int64(len(data)+len(meta)) || done.FilesSkipped != 0 || done.BatchesDone != done.BatchesTotal {
		t.Errorf("counters after kill -9: %+v, want %d files deleted", done, len(data)+len(meta))
	}
}

// Soft delete across kill -9: a soft-deleted table survives a crash and is
// undropped whole afterwards; a hold-expiry sweep killed mid-way resumes
// after the restart and ends every record exactly once (one purge job per
// table, none lost, none twice).
func TestSoftDeleteSurvivesKill9(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	env := holdExpiryEnv + "=100ms"
	cmd, info := startChild(t, dir, env)
	req := func(info server.Info, method, path string, body any, want int) []byte {
		t.Helper()
		var rd *strings.Reader
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
		r, _ := http.NewRequest(method, info.RESTURL+path, rd)
		r.Header.Set("Authorization", "Bearer "+info.AdminToken)
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		if want != 0 && res.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, out, want)
		}
		return out
	}
	req(info, "POST", "/lifecycle/v1/catalogs", map[string]any{"name": "soft", "warehouse": "s3://icehold-warehouse/soft",
		"properties": map[string]string{"soft-delete.enabled": "true"}}, 201)
	req(info, "POST", "/v1/soft/namespaces", map[string]any{"namespace": []string{"ns"}}, 200)
	cat, err := rest.NewCatalog(ctx, "icehold", info.RESTURL, rest.WithOAuthToken(info.AdminToken), rest.WithWarehouseLocation("soft"))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{"ns", "t"}, eventSchema)
	if err != nil {
		t.Fatal(err)
	}
	tbl = appendRows(t, tbl, rows(t, 0, 7, false))
	req(info, "DELETE", "/v1/soft/namespaces/ns/tables/t", nil, 204)
	killHard(t, cmd)

	cmd, info = startChild(t, dir, env)
	req(info, "POST", "/lifecycle/v1/catalogs/soft/namespaces/ns/tables/t/undrop", map[string]any{}, 200)
	cat, _ = rest.NewCatalog(ctx, "icehold", info.RESTURL, rest.WithOAuthToken(info.AdminToken), rest.WithWarehouseLocation("soft"))
	back, err := cat.LoadTable(ctx, table.Identifier{"ns", "t"})
	if err != nil {
		t.Fatal(err)
	}
	if back.Metadata().TableUUID() != tbl.Metadata().TableUUID() || countRows(t, back) != 7 {
		t.Errorf("after kill -9 and undrop: uuid %s, %d rows", back.Metadata().TableUUID(), countRows(t, back))
	}

	// The sweep, killed mid-way.
	const n = 40
	req(info, "POST", "/lifecycle/v1/catalogs", map[string]any{"name": "short", "warehouse": "s3://icehold-warehouse/short",
		"properties": map[string]string{"soft-delete.enabled": "true", "soft-delete.hold-period": "PT1S"}}, 201)
	req(info, "POST", "/v1/short/namespaces", map[string]any{"namespace": []string{"ns"}}, 200)
	for i := range n {
		req(info, "POST", "/v1/short/namespaces/ns/tables", map[string]any{"name": fmt.Sprintf("x%02d", i), "schema": rawSchema}, 200)
		req(info, "DELETE", fmt.Sprintf("/v1/short/namespaces/ns/tables/x%02d", i), nil, 204)
	}
	type jobs struct {
		Jobs []struct {
			TableUUID string `json:"table-uuid"`
			State     string `json:"state"`
		} `json:"jobs"`
	}
	var js jobs
	for deadline := time.Now().Add(30 * time.Second); len(js.Jobs) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mustDecode(t, req(info, "GET", "/lifecycle/v1/catalogs/short/purge-jobs", nil, 200), &js)
	}
	killHard(t, cmd)
	t.Logf("killed with %d of %d records expired", len(js.Jobs), n)

	cmd, info = startChild(t, dir, env)
	defer killHard(t, cmd)
	var soft softList
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		mustDecode(t, req(info, "GET", "/lifecycle/v1/catalogs/short/soft-deleted-tables", nil, 200), &soft)
		if len(soft.Tables) == 0 || time.Now().After(deadline) {
			break
		}
	}
	mustDecode(t, req(info, "GET", "/lifecycle/v1/catalogs/short/purge-jobs", nil, 200), &js)
	per := map[string]int{}
	for _, j := range js.Jobs {
		per[j.TableUUID]++
	}
	if len(soft.Tables) != 0 || len(js.Jobs) != n || len(per) != n {
		t.Errorf("after the restart: %d records left, %d jobs for %d tables; want 0, %d, %d", len(soft.Tables), len(js.Jobs), len(per), n, n)
	}
}

// Events across kill -9 (the outbox): a purge runs to its end while the
// relay is stalled, the server is killed; a restart that dies right after
// its first publish (before the outbox record goes) is killed too; the next
// run delivers the rest. Every event of the job is in the log exactly once,
// in order.
func TestEventsSurviveKill9(t *testing.T) {
	localOnly(t)
	dir := t.TempDir()
	cmd, info := startChild(t, dir, outboxEnv+"=hold")
	saved := *shared
	shared = &env{URL: info.RESTURL, Token: info.AdminToken, Catalog: info.Catalog}
	defer func() { *shared = saved }()

	cat := client(t, shared.Token)
	ns := newNamespace(t, "outbox")
	writtenTable(t, cat, ns, "t", nil, false)
	job := dropPurge(t, ns, "t")
	waitJob(t, job.ID, "SUCCEEDED", time.Minute)
	logged := func() []jobEvent { return jobEvents(t, filepath.Join(dir, "events.log"), job.ID) }
	if got := logged(); len(got) != 0 {
		t.Fatalf("events published while the relay was held: %v", got)
	}
	killHard(t, cmd) // the job ended; its events are only in the outbox

	cmd, _ = startChild(t, dir, outboxEnv+"=die-after-publish")
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the relay never published after the restart")
	}
	if got := logged(); len(got) != 1 {
		t.Fatalf("after a crash right after the first publish, the log holds %v, want one event", got)
	}

	cmd, _ = startChild(t, dir)
	defer killHard(t, cmd)
	want := []string{"TablePermanentlyDeleted", "PurgeStarted", "PurgeCompleted"}
	got := eventually(logged, func(got []jobEvent) bool { return len(got) >= len(want) })
	var types []string
	seen := map[string]bool{}
	for _, e := range got {
		types = append(types, e.Type)
		if seen[e.ID] || e.ID == "" {
			t.Errorf("event id %q logged twice or missing", e.ID)
		}
		seen[e.ID] = true
	}
	if !slices.Equal(types, want) {
		t.Errorf("events after two crashes: %v, want %v", types, want)
	}
}

type jobEvent struct{ Type, ID string }

// jobEvents reads a job's events from a local event log, in order.
func jobEvents(t *testing.T, path, jobID string) []jobEvent {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []jobEvent
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e struct {
			Type   string `json:"detail-type"`
			Detail struct {
				ID    string `json:"event-id"`
				JobID string `json:"job-id"`
			} `json:"detail"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Detail.JobID == jobID {
			out = append(out, jobEvent{Type: e.Type, ID: e.Detail.ID})
		}
	}
	return out
}
