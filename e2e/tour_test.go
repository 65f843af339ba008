package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/icehold/icehold/examples"
	"github.com/icehold/icehold/local/server"
)

// tour runs shell commands as a user of a fresh clone would: in an empty
// folder (no .icehold/ yet), one after another in one bash session (a
// terminal), so that a command sees the variables the ones before it set. "go run ./PKG" and "make run" reach binaries
// built from this repository (shims on PATH), and make run listens on free
// ports, so that the test runs beside a developer's make run.
type tour struct {
	t         *testing.T
	tmp, dir  string
	env       []string
	cli       string
	serverOut func() string // what the server command printed so far
	sh        *shell
}

// TestTour runs every command of the README's five-minute tour, as written
// there and in order, then the commands make run's banner prints.
func TestTour(t *testing.T) {
	localOnly(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var serverCmds, steps []string
	for _, b := range examples.Blocks(string(readme)) {
		switch b.Marker {
		case "tour: server":
			serverCmds = append(serverCmds, commands(b.Text)...)
		case "tour":
			steps = append(steps, commands(b.Text)...)
		}
	}
	if len(serverCmds) != 1 || len(steps) == 0 {
		t.Fatalf("the README's tour: want one <!-- tour: server --> command and <!-- tour --> blocks, got %q and %q", serverCmds, steps)
	}
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	// The make shim stands for these recipes.
	if !regexp.MustCompile(`(?m)^run:\n\t\$\(GO\) run ./cmd/icehold local --ports \$\(PORTS\)$`).Match(makefile) ||
		!regexp.MustCompile(`(?m)^install:\n\t\$\(GO\) install ./cmd/icehold$`).Match(makefile) {
		t.Fatal("make run is no longer `go run ./cmd/icehold local --ports $(PORTS)`, or make install `go install ./cmd/icehold`: update the tour test's make shim")
	}
	if !strings.Contains(serverCmds[0], "PORTS=") {
		t.Errorf("the tour's server command %q names no base port (PORTS=)", serverCmds[0])
	}
	tr := newTour(t)

	tr.start(serverCmds[0])
	today := time.Now().UTC().Format(time.DateOnly)
	seen := map[string]int{} // how many times each step ran so far
	checked := map[int]bool{}
	for _, step := range steps {
		out := tr.run(step)
		bare := withoutComment(step)
		seen[bare]++
		for i, c := range softDeleteTour {
			if bare == c.step && seen[bare] == c.nth {
				checked[i] = true
				for _, w := range c.want {
					if !strings.Contains(out, w) {
						t.Errorf("%s: want %q in:\n%s", step, w, out)
					}
				}
				for _, n := range c.not {
					if strings.Contains(out, n) {
						t.Errorf("%s: want no %q in:\n%s", step, n, out)
					}
				}
			}
		}
		if m := statusComment.FindStringSubmatch(step); m != nil && strings.Contains(step, "%{http_code}") {
			if got := strings.TrimSpace(out); got != m[1] {
				t.Errorf("%s: status %s, the README says %s", step, got, m[1])
			}
		}
		switch {
		case strings.Contains(step, server.ExampleCommand):
			if !strings.Contains(out, "examples.events: appended 3 rows, 3 in the table") {
				t.Errorf("%s: want 3 rows appended to a new table, got:\n%s", step, out)
			}
		case strings.Contains(step, " tables drop ") && strings.Contains(step, "--watch"):
			if !strings.Contains(out, "SUCCEEDED") {
				t.Errorf("%s: want the job watched until SUCCEEDED, got:\n%s", step, out)
			}
		case strings.Contains(step, "./examples/partitioned -scan"):
			// Today's partition was dropped, retention ended the days
			// older than 7; the rest is as written.
			days := regexp.MustCompile(`ts_day=(\S+)  3 rows`).FindAllStringSubmatch(out, -1)
			oldest := time.Now().UTC().AddDate(0, 0, -8).Format(time.DateOnly)
			if len(days) == 0 || strings.Contains(out, "ts_day="+today) || days[0][1] < oldest {
				t.Errorf("%s: want today's partition dropped and none before %s, got:\n%s", step, oldest, out)
			}
		case strings.Contains(step, "./examples/partitioned"):
			if !strings.Contains(out, "30 rows in 10 day partitions") {
				t.Errorf("%s: want 10 days of 3 rows, got:\n%s", step, out)
			}
		}
	}

	for i, c := range softDeleteTour {
		if !checked[i] {
			t.Errorf("the README's tour has no step %q (run %d times): the soft-delete walkthrough changed, update softDeleteTour", c.step, c.nth)
		}
	}

	// make run's banner: its code is the example's region, its commands run.
	banner := tr.serverOut()
	if !strings.Contains(banner, "\n"+examples.IcebergGo+"\n") {
		t.Errorf("make run's banner does not quote examples/iceberg-go's region:\n%s", banner)
	}
	ran := 0
	for _, line := range strings.Split(banner, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "curl ") && !strings.HasSuffix(line, server.ExampleCommand) {
			continue
		}
		out := tr.run(line)
		if strings.HasSuffix(line, server.ExampleCommand) && !strings.Contains(out, "examples.events: appended 3 rows") {
			t.Errorf("%s: want 3 rows appended, got:\n%s", line, out)
		}
		ran++
	}
	if ran != 2 {
		t.Errorf("ran %d commands of make run's banner, want its curl and its iceberg-go line:\n%s", ran, banner)
	}
}

// softDeleteTour is what the README's soft-delete walkthrough shows, step
// by step (a step's text at its nth run): the deadline and the undrop
// command at the drop, the record listed, the undrop, the legal hold of a
// live table and of a dropped one, the expiry held off, then done.
var softDeleteTour = []struct {
	step      string
	nth       int
	want, not []string
}{
	{"icehold tables drop shop.orders", 1, []string{"soft-deleted shop.orders", "recoverable until", "(hold period P7D)", "undo: icehold tables undrop shop.orders"}, nil},
	{"icehold tables soft-deleted", 1, []string{"shop.orders", "PURGE AT"}, nil},
	{"icehold tables undrop shop.orders", 1, []string{"undropped shop.orders"}, nil},
	{"icehold tables legal-hold shop.orders --on", 1, []string{"shop.orders (live", "legal hold on", "icehold.legal-hold=true"}, nil},
	{"icehold tables drop shop.scratch", 1, []string{"(hold period PT1S)", "under legal hold"}, nil},
	{"icehold local run hold-expiry", 1, []string{"expired=0"}, nil},
	{"icehold tables legal-hold shop.scratch --off", 1, []string{"shop.scratch (soft-deleted", "legal hold off"}, nil},
	{"icehold tables soft-deleted", 2, nil, []string{"shop.scratch"}},
}

// withoutComment is a command line without its trailing comment: from the
// first '#' outside quotes that follows a blank.
func withoutComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && i > 0 && (line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i])
		}
	}
	return strings.TrimSpace(line)
}

// statusComment is the status a curl -w '%{http_code}' step says it gets.
var statusComment = regexp.MustCompile(`#\s*(\d{3})\b[^']*$`)

// commands are a block's shell commands: comment lines and blank lines
// dropped, backslash continuations joined.
func commands(text string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(line); cur == "" && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if c, ok := strings.CutSuffix(line, "\\"); ok {
			cur += c
			continue
		}
		out = append(out, strings.TrimSpace(cur+line))
		cur = ""
	}
	return out
}

func newTour(t *testing.T) *tour {
	tmp := t.TempDir()
	bin, dir := filepath.Join(tmp, "bin"), filepath.Join(tmp, "clone")
	for _, d := range []string{bin, dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cli := goRunShim(t, bin, map[string]string{"./cmd/icehold": "icehold", "./examples/iceberg-go": "iceberg-go", "./examples/partitioned": "partitioned"})
	shims := map[string]string{
		"make": "#!/bin/sh\n# the tour test's make: make install puts icehold on PATH; make run [PORTS=N] runs it on a free base port\n" +
			"case \"$*\" in\n" +
			"  install) ln -sf " + fmt.Sprintf("%q %q", cli, filepath.Join(bin, "icehold")) + " && exit 0;;\n" +
			"  run|run\\ PORTS=*) exec " + fmt.Sprintf("%q", cli) + " local --ports " + strconv.Itoa(freeBasePort(t)) + ";;\n" +
			"esac\n" +
			"echo \"tour test: no shim for make $*\" >&2; exit 2\n",
		// Until make install, icehold is not found (not one elsewhere on PATH).
		"icehold": "#!/bin/sh\necho 'icehold: command not found (the tour runs make install first)' >&2; exit 127\n",
	}
	for name, text := range shims {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ICEHOLD_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	sh, err := startShell(dir, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.close)
	return &tour{t: t, tmp: tmp, dir: dir, env: env, cli: cli, sh: sh}
}

// goRunShim builds each package of pkgs (path: binary name) from this
// tree into bin/pkg and writes bin/go, which runs them for "go run ./PKG";
// it returns the path of the icehold binary.
func goRunShim(t *testing.T, bin string, pkgs map[string]string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(bin, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	var cases []string
	for pkg, name := range pkgs {
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "pkg", name), pkg)
		build.Dir = ".."
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
		cases = append(cases, fmt.Sprintf("  %s) shift 2; exec %q \"$@\";;", pkg, filepath.Join(bin, "pkg", name)))
	}
	sort.Strings(cases)
	shim := "#!/bin/sh\n# the documentation tests' go: go run ./PKG runs PKG as built from the repository\n" +
		"[ \"$1\" = run ] && case \"$2\" in\n" + strings.Join(cases, "\n") + "\nesac\n" +
		"echo \"documentation test: no shim for go $*\" >&2; exit 2\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(bin, "pkg", "icehold")
}

// run runs one command to its end; a non-zero exit fails the test.
func (tr *tour) run(line string) string {
	tr.t.Helper()
	out, err := tr.sh.run(line, 5*time.Minute)
	tr.t.Logf("$ %s\n%s", line, out)
	if err != nil {
		tr.t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return out
}

// start runs the server command in the background until the test ends and
// waits until the server it starts answers (a user waits for its banner).
func (tr *tour) start(line string) {
	t := tr.t
	t.Helper()
	logf := filepath.Join(tr.tmp, "server.out")
	f, err := os.Create(logf)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = tr.dir, tr.env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	tr.serverOut = func() string { b, _ := os.ReadFile(logf); return string(b) }
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case <-exited:
			t.Fatalf("%s exited:\n%s", line, tr.serverOut())
		default:
		}
		if tr.answers() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no answer after 2 minutes:\n%s", line, tr.serverOut())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// answers: .icehold/local.json names a server that serves /v1/config.
func (tr *tour) answers() bool {
	raw, err := os.ReadFile(filepath.Join(tr.dir, ".icehold", "local.json"))
	if err != nil {
		return false
	}
	var info server.Info
	if json.Unmarshal(raw, &info) != nil || info.ConfigCheck == "" {
		return false
	}
	req, _ := http.NewRequest(http.MethodGet, info.ConfigCheck, nil)
	req.Header.Set("Authorization", "Bearer "+info.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	// The banner comes right after the server answers.
	return res.StatusCode == http.StatusOK && strings.Contains(tr.serverOut(), "The S3 endpoint and keys reach clients")
}

// freeBasePort is a base port whose six ports (the edge, REST, S3,
// DynamoDB, SQS, Step Functions) are free now.
func freeBasePort(t *testing.T) int {
	for try := 0; try < 50; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if base+5 > 65535 {
			continue
		}
		free := true
		for p := base; p < base+6 && free; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if free = err == nil; free {
				l.Close()
			}
		}
		if free {
			return base
		}
	}
	t.Fatal("no six free consecutive ports")
	return 0
}

// shell is one bash session that runs commands one at a time.
type shell struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string // its output (stdout and stderr), line by line
	n     int
}

func startShell(dir string, env []string) (*shell, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "--norc", "--noprofile")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w.Close()
	sh := &shell{cmd: cmd, in: in, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
		close(sh.lines)
	}()
	return sh, nil
}

// run runs one command line and returns its output; an error for a
// non-zero status. The command reads no stdin (the session's is the script).
func (sh *shell) run(line string, timeout time.Duration) (string, error) {
	sh.n++
	mark := fmt.Sprintf("__tour_step_%d_status", sh.n)
	if _, err := fmt.Fprintf(sh.in, "{ %s\n} </dev/null 2>&1\n__rc=$?; echo; echo %s $__rc\n", line, mark); err != nil {
		return "", err
	}
	var out strings.Builder
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				return out.String(), errors.New("the shell exited")
			}
			if rc, found := strings.CutPrefix(l, mark+" "); found {
				text := strings.TrimSuffix(out.String(), "\n") // the echo before the mark
				if rc != "0" {
					return text, fmt.Errorf("exit status %s", rc)
				}
				return text, nil
			}
			out.WriteString(l + "\n")
		case <-deadline:
			return out.String(), fmt.Errorf("still running after %v", timeout)
		}
	}
}

func (sh *shell) close() {
	sh.in.Close()
	_ = syscall.Kill(-sh.cmd.Process.Pid, syscall.SIGKILL)
	_ = sh.cmd.Wait()
}
