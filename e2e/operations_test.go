package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/examples"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/store"
)

// Every command of docs/operations.md's local blocks, as written there, in
// one bash session with the installed icehold and the real AWS CLI, against
// a local server in a clone's .icehold/ (make run's composition, with short
// queue timings): the shell set up as the page says, a purge dead-lettered
// by the documented practice fault, the fault cleared, the page's redrive,
// and its inspection commands on the job that then ends SUCCEEDED.
func TestOperationsCommandsAsWritten(t *testing.T) {
	needAWSCLI(t)
	embeddedAWS(t) // moto lacks start-message-move-task
	md, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string][]string{}
	for _, b := range examples.Blocks(string(md)) {
		if name, ok := strings.CutPrefix(b.Marker, "ops: "); ok {
			blocks[name] = commands(b.Text)
		}
	}
	for _, name := range []string{"local setup", "redrive", "inspect"} {
		if len(blocks[name]) == 0 {
			t.Fatalf("docs/operations.md has no <!-- ops: %s --> block", name)
		}
	}

	clone := t.TempDir()
	srv, cat := ownServer(t, server.Options{Dir: filepath.Join(clone, ".icehold"), DemoProperties: map[string]string{},
		Visibility: time.Second, MaxReceives: 2, TimeScale: 0.01, ReconcileEvery: time.Hour, DeleteWorkers: 2})
	ctx := context.Background()
	if err := cat.CreateNamespace(ctx, table.Identifier{"sales"}, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{"sales", "orders"}, eventSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, appendRows(t, tbl, rows(t, 0, 5, false)), rows(t, 5, 5, false))

	// The installed CLI and the user's own aws, nothing of this machine's
	// AWS or icehold settings.
	bin := filepath.Join(t.TempDir(), "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "icehold"), "./cmd/icehold")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ICEHOLD_") && !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
	sh, err := startShell(clone, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.close)
	run := func(line string) string {
		t.Helper()
		out, err := sh.run(line, 2*time.Minute)
		t.Logf("$ %s\n%s", line, out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return out
	}

	for _, line := range blocks["local setup"] {
		run(line)
	}
	run("icehold local fault deny-deletes sales.orders")
	out := run("icehold tables drop sales.orders --purge")
	id := strings.Fields(out[strings.Index(out, "purge job ")+len("purge job "):])[0]
	waitFor(t, "the job to dead-letter", time.Minute, func() bool { return jobOf(t, srv, id).State == store.JobDeadLettered })
	waitFor(t, "its batches to reach the DLQ", time.Minute, func() bool { n, _ := srv.QueueDepth(ctx, true); return n > 0 })
	run("icehold local fault clear")

	for _, line := range blocks["redrive"] {
		run(line)
	}
	waitFor(t, "the job to succeed after the redrive", time.Minute, func() bool { return jobOf(t, srv, id).State == store.JobSucceeded })

	var all strings.Builder
	for _, line := range blocks["inspect"] {
		all.WriteString(run(line))
	}
	for _, want := range []string{id + "\tSUCCEEDED", `"S": "SUCCEEDED"`, "ExecutionSucceeded"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the inspection commands printed no %q", want)
		}
	}
}
