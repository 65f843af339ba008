package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/examples"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

// Every command of docs/operations.md's local blocks, as written there, in
// one bash session with the installed icehold and the real AWS CLI, against
// a local server in a clone's .icehold/ (make run's composition, with short
// queue timings): the shell set up as the page says, the practice (a table
// made, its deletes denied, its purge watched until it dead-letters, the
// fault cleared), the page's redrive, and its inspection commands (the
// icehold CLI's, then the AWS CLI's), which must pick the table's newest
// job: an older job of the same table, made before the practice, ended
// long ago.
func TestOperationsCommandsAsWritten(t *testing.T) {
	needAWSCLI(t)
	embeddedAWS(t) // moto lacks start-message-move-task
	blocks := docBlocks(t, "../docs/operations.md", "ops: ")
	for _, name := range []string{"local setup", "practice", "redrive", "jobs", "inspect"} {
		if len(blocks[name]) == 0 {
			t.Fatalf("docs/operations.md has no <!-- ops: %s --> block", name)
		}
	}

	clone := t.TempDir()
	srv, cat := ownServer(t, server.Options{Dir: filepath.Join(clone, ".icehold"),
		Visibility: time.Second, MaxReceives: 2, TimeScale: 0.01, ReconcileEvery: time.Hour, DeleteWorkers: 2})
	ctx := context.Background()
	// The practice's table had a life before: written, then purged.
	if err := cat.CreateNamespace(ctx, table.Identifier{"examples"}, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{"examples", "events"}, eventSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRows(t, tbl, rows(t, 0, 5, false))
	older, err := srv.Purge.Drop(ctx, "demo", catalog.Ident{Namespace: []string{"examples"}, Name: "events"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the older purge to end", time.Minute, func() bool { return jobOf(t, srv, older.ID).State == store.JobSucceeded })

	sh := opsShell(t, clone)
	for _, line := range blocks["local setup"] {
		sh.expect(line)
	}
	var practice strings.Builder
	for _, line := range blocks["practice"] {
		practice.WriteString(sh.expect(line))
	}
	jobs, _, err := srv.Catalog.Store().ListJobs(ctx, "demo", "", 10)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("want the older job and the practice's: %+v %v", jobs, err)
	}
	id := jobs[1].ID
	if j := jobOf(t, srv, id); j.State != store.JobDeadLettered {
		t.Fatalf("after the practice the job is %s, want DEAD_LETTERED", j.State)
	}
	for _, want := range []string{"retry reason: ", "AccessDenied", "is DEAD_LETTERED", "fix the cause first", "deletes denied under", "1 fault cleared"} {
		if !strings.Contains(practice.String(), want) {
			t.Errorf("the practice printed no %q", want)
		}
	}
	// The watch, to a pipe, prints a line when something changes.
	lines := strings.Split(practice.String(), "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" && lines[i] == lines[i-1] {
			t.Errorf("the practice printed %q twice in a row", lines[i])
		}
	}
	// A batch reaches the DLQ a visibility timeout after its last receive
	// (the page says to wait for ApproximateNumberOfMessages).
	waitFor(t, "its batches to reach the DLQ", time.Minute, func() bool { n, _ := srv.QueueDepth(ctx, true); return n > 0 })

	for _, line := range blocks["redrive"] {
		sh.expect(line)
	}
	waitFor(t, "the job to succeed after the redrive", time.Minute, func() bool { return jobOf(t, srv, id).State == store.JobSucceeded })

	var all strings.Builder
	for _, line := range append(blocks["jobs"], blocks["inspect"]...) {
		all.WriteString(sh.expect(line))
	}
	for _, want := range []string{id + "\tSUCCEEDED", `"S": "SUCCEEDED"`, "ExecutionSucceeded", `"S": "` + id + `"`} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the inspection commands printed no %q (the table's newest job is %s, the older %s)", want, id, older.ID)
		}
	}
}

// docBlocks are a Markdown page's blocks marked <!-- PREFIXname -->, by
// name, as commands.
func docBlocks(t *testing.T, path, prefix string) map[string][]string {
	t.Helper()
	md, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string][]string{}
	for _, b := range examples.Blocks(string(md)) {
		if name, ok := strings.CutPrefix(b.Marker, prefix); ok {
			blocks[name] = append(blocks[name], commands(b.Text)...)
		}
	}
	return blocks
}

// docShell is a bash session that runs a page's commands and checks each
// one's exit status: 0, or the one its comment says ("exits 1").
type docShell struct {
	t  *testing.T
	sh *shell
}

// opsShell is a bash session in clone with the installed CLI, go run of
// the examples, and the user's own aws, nothing of this machine's AWS or
// icehold settings.
func opsShell(t *testing.T, clone string) *docShell {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	cli := goRunShim(t, bin, map[string]string{"./cmd/icehold": "icehold", "./examples/iceberg-go": "iceberg-go"})
	if err := os.Symlink(cli, filepath.Join(bin, "icehold")); err != nil {
		t.Fatal(err)
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
	return &docShell{t: t, sh: sh}
}

// expect runs one command line and checks its exit status.
func (d *docShell) expect(line string) string {
	d.t.Helper()
	out, err := d.sh.run(line, 3*time.Minute)
	d.t.Logf("$ %s\n%s", line, out)
	want := "0"
	if m := exitsComment.FindStringSubmatch(line); m != nil {
		want = m[1]
	}
	got := "0"
	if err != nil {
		got = strings.TrimPrefix(err.Error(), "exit status ")
	}
	if got != want {
		d.t.Fatalf("%s: exit status %s, the page says %s\n%s", line, got, want, out)
	}
	return out
}

// exitsComment is the exit status a command's comment announces.
var exitsComment = regexp.MustCompile(`#.*\bexits (\d+)\b`)
