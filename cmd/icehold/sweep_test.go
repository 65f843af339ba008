package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/icehold/icehold/local/server"
)

// jobs storage-sweep starts a sweep on the newest report (icehold local run
// inventory records one), of the catalog or of one table; --watch follows
// it and prints its classes; without a report it says how to get one.
func TestStorageSweepCommand(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Options{Dir: dir, TimeScale: 0.01, ReconcileEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"t","schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"long","required":false}]}}`},
	})
	if _, _, err := cli("jobs", "storage-sweep", "--dry-run", "--dir", dir); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no inventory report") {
		t.Errorf("a sweep before any report: %v, want 404 naming the missing report", err)
	}
	if out, _, err := cli("local", "run", "inventory", "--dir", dir); err != nil {
		t.Fatalf("local run inventory: %v\n%s", err, out)
	}
	for _, args := range [][]string{{}, {"ops.t"}} {
		out, _, err := cli(append(append([]string{"jobs", "storage-sweep"}, args...), "--dry-run", "--watch", "--every", "50ms", "--dir", dir)...)
		if err != nil {
			t.Fatalf("storage-sweep %v: %v\n%s", args, err, out)
		}
		for _, want := range []string{"storage sweep pj-", "SUCCEEDED", "CLASS", "reachable", "orphan", "protected"} {
			if !strings.Contains(out, want) {
				t.Errorf("storage-sweep %v lacks %q:\n%s", args, want, out)
			}
		}
		// The table's metadata file is reachable: counted, not deleted.
		reachable := ""
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "reachable" {
				reachable = f[1]
			}
		}
		if reachable == "" || reachable == "0" {
			t.Errorf("storage-sweep %v: reachable objects %q, want the table's files:\n%s", args, reachable, out)
		}
	}
	if _, _, err := cli("jobs", "storage-sweep", "a.b", "c.d", "--dir", dir); err == nil || !strings.Contains(err.Error(), "at most one table") {
		t.Errorf("two tables: %v, want a usage error", err)
	}
}
