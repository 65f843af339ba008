package main

// What a new operator meets on the first day (issue 34): output a script
// can read, destructive verbs that ask, watch lines that say why a job
// waits, errors that name the fix.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/local/server"
)

// startLocal starts a local server (no delete workers) in a temporary
// state folder and returns it and the --dir flag that names it.
func startLocal(t *testing.T, o server.Options) (*server.Server, []string) {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.DeleteWorkers == 0 {
		o.DeleteWorkers = -1
	}
	srv, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, []string{"--dir", o.Dir}
}

const schemaX = `"schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"long","required":false}]}`

// -o json prints [] for an empty list, never null: `jq '.tables[]'` on an
// empty catalog prints nothing instead of failing.
func TestJSONOutputHasNoNullLists(t *testing.T) {
	isolate(t)
	srv, dir := startLocal(t, server.Options{})
	seed(t, srv, []struct{ path, body string }{{"/v1/demo/namespaces", `{"namespace":["ops"]}`}})
	for _, args := range [][]string{
		{"jobs", "list"}, {"namespaces", "list", "ops"}, {"tables", "list", "ops"}, {"tables", "soft-deleted"},
		{"views", "list", "ops"}, {"views", "soft-deleted"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, _, err := cli(append(append(args, "-o", "json"), dir...)...)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "null") || !strings.Contains(out, "[]") {
				t.Errorf("want an empty list [], got:\n%s", out)
			}
			if !json.Valid([]byte(out)) {
				t.Errorf("not JSON:\n%s", out)
			}
		})
	}
}

// Under -o json a failure prints a JSON object on stderr (the API's
// ErrorModel fields), so that a script reads both answers the same way.
func TestErrorsAreJSONUnderOutputJSON(t *testing.T) {
	isolate(t)
	_, dir := startLocal(t, server.Options{})
	for _, c := range []struct {
		args       []string
		code, exit int
		typ        string
	}{
		{[]string{"jobs", "show", "pj-nope", "-o", "json"}, 404, 1, "NotFoundException"},
		{[]string{"tables", "drop", "nodot", "--output=json"}, 0, 2, "UsageError"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			exit := run(context.Background(), append(c.args, dir...), &out, &errOut)
			var e struct {
				Error struct {
					Message string `json:"message"`
					Type    string `json:"type"`
					Code    int    `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(errOut.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("stderr is not a JSON error (%v):\n%s", err, errOut.String())
			}
			if exit != c.exit || e.Error.Code != c.code || (c.typ != "" && !strings.Contains(e.Error.Type, strings.TrimSuffix(c.typ, "Exception"))) {
				t.Errorf("exit %d, error %+v; want exit %d, code %d, type %s", exit, e.Error, c.exit, c.code, c.typ)
			}
		})
	}
}

// The destructive verbs ask on a terminal and take --yes in a script; a
// script without --yes is refused, naming --yes, and sends nothing.
func TestDestructiveCommandsConfirm(t *testing.T) {
	isolate(t)
	cases := [][]string{
		{"tables", "drop", "ops.t", "--purge"},
		{"tables", "purge-now", "ops.t"},
		{"views", "purge-now", "ops.v"},
		{"partitions", "drop", "ops.t", "--partition", "d=2026-01-01"},
		{"retention", "set", "ops.t", "--field", "d", "--keep", "P7D"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			api := newFakeAPI(t)
			conn := []string{"--url", api.URL, "--token", "t"}
			// A script: no terminal, no --yes.
			_, _, err := cli(append(args, conn...)...)
			if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--yes") {
				t.Errorf("without --yes in a script: %v, want a usage error naming --yes", err)
			}
			if n := len(api.requests()); n != 0 {
				t.Errorf("a refused command sent %d requests", n)
			}
			// A terminal that answers no, then yes.
			for _, answer := range []string{"n\n", "y\n"} {
				before := len(api.requests())
				var out, errOut bytes.Buffer
				err := executeIn(context.Background(), append(args, conn...), strings.NewReader(answer), true, &out, &errOut)
				sent := len(api.requests()) > before
				if answer == "n\n" && (err == nil || sent) {
					t.Errorf("answered no: err %v, sent %v", err, sent)
				}
				if answer == "y\n" && !sent {
					t.Errorf("answered yes: nothing sent (%v)", err)
				}
				if !strings.Contains(errOut.String(), "[y/N]") {
					t.Errorf("the terminal was not asked:\n%s", errOut.String())
				}
			}
			before := len(api.requests())
			_, _, _ = cli(append(append(args, "--yes"), conn...)...)
			if len(api.requests()) == before {
				t.Errorf("--yes sent nothing")
			}
		})
	}
}

// jobs watch to a pipe prints a line when something a reader sees
// changes (not each poll), the reason a batch is being retried, and on
// DEAD_LETTERED the order of the fix: the cause first, then the redrive.
func TestWatchToAPipePrintsChangesAndTheRetryReason(t *testing.T) {
	retry := "AccessDenied: Access Denied (delivery 1 of 5 failed; SQS retries it)"
	dead := "AccessDenied: Access Denied"
	polls := []job{
		{ID: "pj-1", State: "RUNNING", BatchesTotal: 2, UpdatedAt: "t1"},
		{ID: "pj-1", State: "RUNNING", BatchesTotal: 2, UpdatedAt: "t2"},
		{ID: "pj-1", State: "RUNNING", BatchesTotal: 2, UpdatedAt: "t3", LastError: &retry},
		{ID: "pj-1", State: "RUNNING", BatchesTotal: 2, UpdatedAt: "t4", LastError: &retry},
		{ID: "pj-1", State: "DEAD_LETTERED", BatchesTotal: 2, BatchesDead: 2, UpdatedAt: "t5", LastError: &dead},
	}
	i := 0
	var out bytes.Buffer
	err := watch(context.Background(), &out, time.Millisecond, false, func() (job, error) {
		j := polls[min(i, len(polls)-1)]
		i++
		return j, nil
	}, func(job) string { return "icehold local redrive moves them back" })
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Errorf("want 3 lines (running, retrying, dead-lettered), got %d:\n%s", len(lines), out.String())
	}
	if !strings.Contains(out.String(), "AccessDenied") || !strings.Contains(out.String(), "delivery 1 of 5") {
		t.Errorf("the retry reason is not shown:\n%s", out.String())
	}
	msg := fmt.Sprint(err)
	fix, redrive := strings.Index(msg, "fix the cause"), strings.Index(msg, "redrive")
	if err == nil || fix < 0 || redrive < fix || !strings.Contains(msg, "AccessDenied") {
		t.Errorf("DEAD_LETTERED: %v, want the cause (AccessDenied), then: fix the cause, then redrive", err)
	}
}

// jobs show says how much the job deleted in a size a reader reads.
func TestJobsShowHumanSize(t *testing.T) {
	var out bytes.Buffer
	showJob(&out, job{ID: "pj-1", State: "SUCCEEDED", Bytes: 1536 * 1024 * 1024}, "")
	if !strings.Contains(out.String(), "1.5 GiB") {
		t.Errorf("jobs show:\n%s\nwant 1.5 GiB", out.String())
	}
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1024: "1.0 KiB", 5 << 20: "5.0 MiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// A 403 names the command that grants what is missing: icehold grants set
// with the principal and the privilege, and for the system scope the
// deploy's admins.
func TestForbiddenNamesTheGrantCommand(t *testing.T) {
	isolate(t)
	srv, dir := startLocal(t, server.Options{})
	seed(t, srv, []struct{ path, body string }{{"/v1/demo/namespaces", `{"namespace":["ops"]}`}})
	alice, err := srv.AddToken("user:alice")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = cli(append([]string{"tables", "list", "ops", "--token", alice}, dir...)...)
	for _, want := range []string{"403", "icehold grants set user:alice", "TABLE_READ", "--catalog demo"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("403 on a catalog: %v, want %q", err, want)
		}
	}
	_, _, err = cli(append([]string{"catalogs", "create", "x", "--warehouse", "s3://" + srv.Info.Bucket + "/x", "--token", alice}, dir...)...)
	for _, want := range []string{"403", "CATALOG_MANAGE", "--catalog '*'", "icehold:admins"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("403 on the system scope: %v, want %q", err, want)
		}
	}
}

// A busy port's hint suggests a base port whose six ports are free now,
// not a fixed one that may be the busy one.
func TestBusyPortSuggestsAFreePort(t *testing.T) {
	isolate(t)
	// Hold make run's documented alternative too, as another developer's
	// server would.
	if l, err := net.Listen("tcp", "127.0.0.1:9680"); err == nil {
		defer l.Close()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	_, _, err = cli("local", "--dir", t.TempDir(), "--ports", strconv.Itoa(busy))
	m := regexp.MustCompile(`make run PORTS=(\d+)`).FindStringSubmatch(fmt.Sprint(err))
	if m == nil {
		t.Fatalf("a busy port: %v, want a suggested make run PORTS=N", err)
	}
	base, _ := strconv.Atoi(m[1])
	if base <= busy+5 && base+5 >= busy {
		t.Errorf("suggested %d, which overlaps the busy %d", base, busy)
	}
	for p := base; p < base+6; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Errorf("suggested base %d, but port %d is busy: %v", base, p, err)
			continue
		}
		l.Close()
	}
}

// Without AWS credentials a command that needs them says what to set, not
// the SDK's chain of attempts.
func TestNoCredentialsSaysWhatToSet(t *testing.T) {
	isolate(t)
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	tmpl := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(tmpl, []byte(`{"Resources":{"F":{"Type":"AWS::Lambda::Function","Properties":{}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := cli("preflight", "--template", tmpl, "--region", "us-east-1")
	for _, want := range []string{"no AWS credentials", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "aws sso login"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("preflight without credentials: %v, want %q", err, want)
		}
	}
}

type cobraCommand = cobra.Command

// namespaces create, tables create with a simple schema, tables show: what
// a reader needs to practise on an empty catalog.
func TestCreateNamespaceAndTable(t *testing.T) {
	isolate(t)
	_, dir := startLocal(t, server.Options{})
	run := func(args ...string) string {
		t.Helper()
		out, _, err := cli(append(args, dir...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := run("namespaces", "create", "sales", "--property", "owner=ops"); !strings.Contains(out, "created namespace sales") {
		t.Errorf("namespaces create:\n%s", out)
	}
	run("namespaces", "create", "sales.eu")
	if out := run("namespaces", "list", "sales"); !strings.Contains(out, "sales.eu") {
		t.Errorf("namespaces list sales:\n%s", out)
	}
	out := run("tables", "create", "sales.orders", "--schema", "id:long,amount:double,day:date,note:string", "--property", "soft-delete.hold-period=P1D")
	if !strings.Contains(out, "created sales.orders") {
		t.Errorf("tables create:\n%s", out)
	}
	out = run("tables", "show", "sales.orders")
	for _, want := range []string{"sales.orders", "id long", "amount double", "day date", "note string", "soft-delete.hold-period=P1D", "legal hold", "s3://"} {
		if !strings.Contains(out, want) {
			t.Errorf("tables show lacks %q:\n%s", want, out)
		}
	}
	var shown struct {
		MetadataLocation string `json:"metadata-location"`
	}
	if err := json.Unmarshal([]byte(run("tables", "show", "sales.orders", "-o", "json")), &shown); err != nil || shown.MetadataLocation == "" {
		t.Errorf("tables show -o json: %v %+v", err, shown)
	}
	for _, bad := range [][]string{
		{"tables", "create", "sales.x", "--schema", "id"},
		{"tables", "create", "sales.x", "--schema", "id:integer"},
		{"tables", "create", "sales.x", "--schema", "id:long,id:long"},
		{"tables", "create", "sales.x"},
	} {
		if _, _, err := cli(append(bad, dir...)...); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

// A drop on a catalog with soft delete says until when the table is
// recoverable and the command that brings it back (the API answers 204
// without a body, as the Iceberg spec says: the CLI reads the record).
func TestDropSaysUntilWhenRecoverable(t *testing.T) {
	isolate(t)
	srv, dir := startLocal(t, server.Options{})
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"t",` + schemaX + `}`},
	})
	before := time.Now().UTC()
	out, _, err := cli(append([]string{"tables", "drop", "ops.t"}, dir...)...)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`recoverable until (\S+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "icehold tables undrop ops.t") || !strings.Contains(out, "P7D") {
		t.Fatalf("drop printed:\n%s\nwant until when (the hold period P7D) and the undrop command", out)
	}
	until, err := time.Parse(time.RFC3339, m[1])
	if err != nil || until.Before(before.Add(7*24*time.Hour-time.Minute)) {
		t.Errorf("recoverable until %s (%v), want 7 days from now", m[1], err)
	}
}

// legal-hold --on on a live table sets its icehold.legal-hold property (a
// drop then keeps the hold), --off on the dropped one releases the record.
func TestLegalHoldOnALiveTable(t *testing.T) {
	isolate(t)
	srv, dir := startLocal(t, server.Options{})
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"t",` + schemaX + `}`},
	})
	run := func(args ...string) string {
		t.Helper()
		out, _, err := cli(append(args, dir...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := run("tables", "legal-hold", "ops.t", "--on"); !strings.Contains(out, "legal hold on") || !strings.Contains(out, "icehold.legal-hold=true") {
		t.Errorf("legal-hold of a live table:\n%s", out)
	}
	if out := run("tables", "show", "ops.t"); !strings.Contains(out, "icehold.legal-hold=true") {
		t.Errorf("tables show after legal-hold --on:\n%s", out)
	}
	if out := run("tables", "drop", "ops.t"); !strings.Contains(out, "legal hold") {
		t.Errorf("drop of a held table:\n%s\nwant it to say the hold keeps it", out)
	}
	if out := run("tables", "soft-deleted", "-o", "json"); !strings.Contains(out, `"legal-hold": true`) {
		t.Errorf("the dropped table's record is not held:\n%s", out)
	}
	if out := run("tables", "legal-hold", "ops.t", "--off"); !strings.Contains(out, "legal hold off") {
		t.Errorf("legal-hold --off of the dropped table:\n%s", out)
	}
}

// Completion offers what the server holds: namespaces (going on with a
// '.'), tables, views, soft-deleted ones and job ids; never file names.
func TestCompletionFromTheServer(t *testing.T) {
	isolate(t)
	srv, dir := startLocal(t, server.Options{})
	view := `{"name":"v","schema":{"type":"struct","fields":[]},"view-version":{"version-id":1,"timestamp-ms":1,"schema-id":0,` +
		`"summary":{},"representations":[{"type":"sql","sql":"select 1","dialect":"spark"}],"default-namespace":["ops"]}}`
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/v1/demo/namespaces", `{"namespace":["ops","eu"]}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"orders",` + schemaX + `}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"gone",` + schemaX + `}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"old",` + schemaX + `}`},
		{"/v1/demo/namespaces/ops/views", view},
	})
	if _, _, err := cli(append([]string{"tables", "drop", "ops.gone"}, dir...)...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli(append([]string{"tables", "drop", "ops.old", "--purge", "--yes"}, dir...)...); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := srv.Catalog.Store().ListJobs(context.Background(), "demo", "", 10)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %v %v", jobs, err)
	}
	for _, c := range []struct {
		args      []string
		want, not []string
		noSpace   bool
	}{
		{[]string{"tables", "drop", ""}, []string{"ops."}, nil, true},
		{[]string{"tables", "show", "ops."}, []string{"ops.orders", "ops.eu."}, []string{"ops.gone", "ops.v\n"}, true},
		{[]string{"tables", "show", "ops.o"}, []string{"ops.orders"}, []string{"ops.eu."}, false},
		{[]string{"views", "drop", "ops."}, []string{"ops.v"}, []string{"ops.orders"}, true},
		{[]string{"tables", "list", ""}, []string{"ops"}, []string{"ops."}, false},
		{[]string{"tables", "undrop", ""}, []string{"ops.gone"}, []string{"ops.orders"}, false},
		{[]string{"tables", "legal-hold", "ops."}, []string{"ops.gone", "ops.orders"}, nil, true},
		{[]string{"jobs", "show", ""}, []string{jobs[0].ID}, nil, false},
		{[]string{"jobs", "watch", ""}, []string{jobs[0].ID}, nil, false},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append(append([]string{"__complete"}, c.args[:len(c.args)-1]...), dir...)
			out, _, err := cli(append(args, c.args[len(c.args)-1])...)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			for _, n := range c.not {
				if strings.Contains(out, n) {
					t.Errorf("offers %q:\n%s", n, out)
				}
			}
			directive := out[strings.LastIndex(out, ":"):]
			d, _ := strconv.Atoi(strings.Fields(directive[1:])[0])
			if d&4 == 0 { // ShellCompDirectiveNoFileComp
				t.Errorf("offers file names too (directive %d)", d)
			}
			if got := d&2 != 0; got != c.noSpace { // ShellCompDirectiveNoSpace
				t.Errorf("no space after it: %v, want %v", got, c.noSpace)
			}
		})
	}
	// Every argument that names a namespace, table or view completes.
	var walk func(c *cobraCommand)
	walk = func(c *cobraCommand) {
		if strings.Contains(c.Use, "NAMESPACE") && c.ValidArgsFunction == nil && !strings.HasPrefix(c.Use, "drop NAMESPACE.TABLE --partition") {
			t.Errorf("%s takes %s but completes nothing", c.CommandPath(), c.Use)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
}

// catalogs list names every catalog: on the local server from its table,
// against a stack from the table --table (ICEHOLD_TABLE) names.
func TestCatalogsList(t *testing.T) {
	isolate(t)
	srv, dir := startLocal(t, server.Options{})
	if _, _, err := cli(append([]string{"catalogs", "create", "sales", "--warehouse", "s3://" + srv.Info.Bucket + "/sales"}, dir...)...); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli(append([]string{"catalogs", "list"}, dir...)...)
	if err != nil || !strings.Contains(out, "demo ") || !strings.Contains(out, "sales ") || !strings.Contains(out, "s3://"+srv.Info.Bucket+"/sales") {
		t.Errorf("catalogs list: %v\n%s", err, out)
	}
	var listed struct {
		Catalogs []struct {
			Name string `json:"name"`
		} `json:"catalogs"`
	}
	out, _, err = cli(append([]string{"catalogs", "list", "-o", "json"}, dir...)...)
	if err != nil || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Catalogs) != 2 {
		t.Errorf("catalogs list -o json: %v\n%s", err, out)
	}
	// As against a stack: the table and an endpoint named, AWS keys.
	t.Setenv("AWS_ACCESS_KEY_ID", srv.Info.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.Info.SecretKey)
	t.Setenv("ICEHOLD_TABLE", srv.Info.Table)
	out, _, err = cli("catalogs", "list", "--url", "https://abc.execute-api.us-east-1.amazonaws.com/v1", "--endpoint-url", srv.Info.AWSEndpoint, "--dir", t.TempDir())
	if err != nil || !strings.Contains(out, "sales ") {
		t.Errorf("catalogs list of a stack's table: %v\n%s", err, out)
	}
	t.Setenv("ICEHOLD_TABLE", "")
	if _, _, err := cli("catalogs", "list", "--url", "https://abc.execute-api.us-east-1.amazonaws.com/v1", "--dir", t.TempDir()); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--table") {
		t.Errorf("catalogs list of a stack without its table: %v, want a usage error naming --table", err)
	}
}
