package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serveDirEnv makes this test binary act as `icehold local -dir D` (the
// state-lock test runs it as real server processes and kills them).
const serveDirEnv = "ICEHOLD_LOCALSERVER_SERVE_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveDirEnv); dir != "" {
		os.Exit(serveForTest(dir))
	}
	os.Exit(m.Run())
}

// serveForTest is the child: start on dir (free ports), say READY, serve
// until SIGTERM; a refused start exits 1 with the error on stderr, as the
// CLI does.
func serveForTest(dir string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	srv, err := Start(ctx, Options{Dir: dir, DeleteWorkers: -1, RetentionEvery: -1, ReconcileEvery: time.Hour})
	if err != nil {
		fmt.Fprintln(os.Stderr, "icehold:", err)
		return 1
	}
	defer srv.Close()
	fmt.Println("READY " + srv.Info.RESTURL)
	<-ctx.Done()
	return 0
}

// child is a server process started on dir.
type child struct {
	cmd     *exec.Cmd
	stderr  *bytes.Buffer
	ready   chan string   // the REST URL, once READY
	exited  chan struct{} // closed once the process is gone; then err is set
	waitErr error
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveDirEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stderr: &bytes.Buffer{}, ready: make(chan string, 1), exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.kill)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				c.ready <- url
			}
		}
		c.waitErr = cmd.Wait() // the one Wait: after stdout is drained
		close(c.exited)
	}()
	return c
}

// kill is kill -9: the server gets no chance to release anything itself.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL) // fails once it is gone: fine
	<-c.exited
}

func (c *child) waitReady(t *testing.T) string {
	t.Helper()
	select {
	case url := <-c.ready:
		return url
	case <-c.exited:
		t.Fatalf("server exited before it was ready: %v: %s", c.waitErr, c.stderr)
	case <-time.After(60 * time.Second):
		t.Fatal("server did not start within 60 s")
	}
	return ""
}

func readInfo(t *testing.T, dir string) Info {
	t.Helper()
	var info Info
	raw, err := os.ReadFile(filepath.Join(dir, "local.json"))
	if err == nil {
		err = json.Unmarshal(raw, &info)
	}
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// Two servers on one state folder (issue 12): the second start fails at
// once naming the first's pid and URL and leaves the folder alone; after the
// first dies by kill -9 the lock is gone with it and a new start succeeds.
func TestStateFolderLock(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the state folder is locked with flock")
	}
	dir := t.TempDir()
	first := startChild(t, dir)
	firstURL := first.waitReady(t)
	firstPID := first.cmd.Process.Pid
	if info := readInfo(t, dir); info.ProcessID != firstPID || info.RESTURL != firstURL {
		t.Fatalf("local.json names pid %d %s, want the first server's %d %s", info.ProcessID, info.RESTURL, firstPID, firstURL)
	}
	names := []string{"pid " + strconv.Itoa(firstPID), firstURL, dir}

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"second process refused", func(t *testing.T) {
			second := startChild(t, dir)
			select {
			case <-second.exited:
				var exit *exec.ExitError
				if !errors.As(second.waitErr, &exit) || exit.ExitCode() != 1 {
					t.Fatalf("second server: %v, want exit status 1", second.waitErr)
				}
			case url := <-second.ready:
				t.Fatalf("a second server started on the folder in use, at %s", url)
			case <-time.After(20 * time.Second):
				t.Fatal("second server neither refused nor started within 20 s")
			}
			for _, want := range names {
				if !strings.Contains(second.stderr.String(), want) {
					t.Errorf("refusal %q does not name %q", second.stderr.String(), want)
				}
			}
		}},
		{"in-process start refused", func(t *testing.T) {
			srv, err := Start(context.Background(), Options{Dir: dir, DeleteWorkers: -1, RetentionEvery: -1})
			if err == nil {
				srv.Close()
				t.Fatal("started on a folder in use")
			}
			var inUse *InUseError
			if !errors.Is(err, ErrStateInUse) || !errors.As(err, &inUse) || inUse.PID != firstPID || inUse.URL != firstURL {
				t.Fatalf("error %v (%+v), want ErrStateInUse naming pid %d %s", err, inUse, firstPID, firstURL)
			}
		}},
		{"refusals left local.json alone", func(t *testing.T) {
			if info := readInfo(t, dir); info.ProcessID != firstPID || info.RESTURL != firstURL {
				t.Errorf("local.json now names pid %d %s", info.ProcessID, info.RESTURL)
			}
		}},
		{"start after kill -9", func(t *testing.T) {
			first.kill()
			third := startChild(t, dir)
			url := third.waitReady(t)
			if info := readInfo(t, dir); info.ProcessID != third.cmd.Process.Pid || info.RESTURL != url {
				t.Errorf("local.json names pid %d %s, want the new server's %d %s", info.ProcessID, info.RESTURL, third.cmd.Process.Pid, url)
			}
			third.kill()
		}},
		{"start after a clean stop", func(t *testing.T) {
			for range 2 { // Close releases the lock for the next Start
				srv, err := Start(context.Background(), Options{Dir: dir, DeleteWorkers: -1, RetentionEvery: -1})
				if err != nil {
					t.Fatal(err)
				}
				srv.Close()
			}
		}},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return // each step needs the state the one before left
		}
	}
}

// The refusal says who holds the folder as far as it is known.
func TestInUseErrorNamesHolder(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  InUseError
		want string
	}{
		{"running", InUseError{Dir: ".icehold", PID: 42, URL: "http://127.0.0.1:8181"}, ".icehold: another icehold local (pid 42, http://127.0.0.1:8181) is serving it"},
		{"starting", InUseError{Dir: "d", PID: 42}, "d: another icehold local (pid 42, still starting) is serving it"},
		{"unknown", InUseError{Dir: "d"}, "d: another icehold local is serving it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("%q, want it to start with %q", got, tc.want)
			}
		})
	}
}
