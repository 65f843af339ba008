package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/localserver"
)

// startChild runs this test binary as a local server on dir and returns its
// process and the connection details it wrote.
func startChild(t *testing.T, dir string, env ...string) (*exec.Cmd, localserver.Info) {
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
	var info localserver.Info
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

// Everything written before a SIGKILL is there after a restart.
func TestStateSurvivesKill9(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	dir := t.TempDir()
	cmd, info := startChild(t, dir)
	open := func(info localserver.Info) *rest.Catalog {
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

	cmd, info2 := startChild(t, dir)
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
	child := &localserver.Server{Info: info}

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
	child = &localserver.Server{Info: info}
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
