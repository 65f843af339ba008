package awstest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RequireMoto skips the test when moto_server is not on PATH, and fails it
// under CI=true, where its absence is a broken machine.
func RequireMoto(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("moto_server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("moto_server is not on PATH, and CI=true requires it")
		}
		t.Skip("moto_server is not on PATH")
	}
}

// StartMoto runs a moto_server of the test's own (for what is global to a
// server: its settings, env's K=V entries, or its IAM authorization) and
// stops it at cleanup; its log is shown when the test fails.
func StartMoto(t testing.TB, env ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("moto_server", "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Env = env
	for _, kv := range os.Environ() {
		if !strings.HasSuffix(kv, "=") { // an empty AWS_PROFILE is a profile named "" to moto's boto
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// moto's log goes to a file: read while moto writes, a shared buffer
	// raced (and a slow start printed it).
	log, err := os.Create(filepath.Join(t.TempDir(), "moto.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	logged := func() string { b, _ := os.ReadFile(log.Name()); return string(b) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("moto_server's log:\n%s", logged())
		}
	})
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	// A loaded 2-core machine takes tens of seconds to start moto.
	for range 1200 {
		if r, err := http.Get(endpoint + "/moto-api/"); err == nil {
			r.Body.Close()
			return endpoint
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("moto_server did not start in 2 minutes: %s", logged())
	return ""
}
