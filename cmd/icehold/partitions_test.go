package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/icehold/icehold/local/server"
)

// --partition values are JSON where they parse as JSON, strings otherwise.
func TestTupleFlag(t *testing.T) {
	var f tupleFlag
	for _, s := range []string{`team_id=42,ts_day=2026-09-15`, `name="42",on=true,x=null`} {
		if err := f.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Set("team_id"); err == nil {
		t.Errorf("a tuple without = was accepted")
	}
	want := []map[string]string{{"team_id": `42`, "ts_day": `"2026-09-15"`}, {"name": `"42"`, "on": `true`, "x": `null`}}
	for i, w := range want {
		for k, v := range w {
			if string(f[i][k]) != v {
				t.Errorf("tuple %d %s = %s, want %s", i, k, f[i][k], v)
			}
		}
	}
}

// partitions drop against a local server: a table without snapshots has
// nothing to drop; a bad tuple is the server's 400, with the key to retry.
func TestPartitionsDropCommand(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"t","schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"long","required":false}]},` +
			`"partition-spec":{"spec-id":0,"fields":[{"source-id":1,"field-id":1000,"name":"x","transform":"identity"}]}}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"e","schema":{"type":"struct","fields":[{"id":1,"name":"ts","type":"timestamptz","required":false}]},` +
			`"partition-spec":{"spec-id":0,"fields":[{"source-id":1,"field-id":1000,"name":"ts_day","transform":"day"}]}}`},
	})
	var out bytes.Buffer
	if err := execute(context.Background(), []string{"partitions", "drop", "ops.t", "--partition", "x=7", "--yes", "--dir", dir, "--key", "k1"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing to drop") || !strings.Contains(out.String(), "x=7") {
		t.Errorf("output:\n%s", out.String())
	}
	err = execute(context.Background(), []string{"partitions", "drop", "ops.t", "--partition", "y=7", "--yes", "--dir", dir, "--key", "k2"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "400") || strings.Contains(err.Error(), "retries safely") {
		t.Errorf("bad tuple: %v, want the 400 without a retry hint (a refusal answers the same again)", err)
	}
}

// Only an error a retry can mend names the key to retry with.
func TestPartitionsDropRetryHint(t *testing.T) {
	isolate(t)
	for _, c := range []struct {
		status int
		hint   bool
	}{{503, true}, {500, true}, {429, true}, {400, false}, {404, false}, {409, false}} {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(`{"error":{"message":"m","type":"T","code":` + strconv.Itoa(c.status) + `}}`))
		}))
		_, _, err := cli("partitions", "drop", "ops.t", "--partition", "x=7", "--yes", "--url", api.URL, "--token", "t", "--key", "k9")
		api.Close()
		if got := err != nil && strings.Contains(err.Error(), "--key k9 retries safely"); got != c.hint {
			t.Errorf("a %d: %v, want a retry hint %v", c.status, err, c.hint)
		}
	}
}

// retention set, show, clear, tables verify and tables repair against a
// local server.
func TestRetentionAndVerifyCommands(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Options{Dir: dir, RetentionEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"e","schema":{"type":"struct","fields":[{"id":1,"name":"ts","type":"timestamptz","required":false}]},` +
			`"partition-spec":{"spec-id":0,"fields":[{"source-id":1,"field-id":1000,"name":"ts_day","transform":"day"}]}}`},
	})
	conn := []string{"--dir", dir}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "ops.e", "--field", "ts_day", "--keep", "P7D", "--yes"}, "field ts_day, keep P7D"},
		{[]string{"show", "ops.e"}, "not applied yet"},
		{[]string{"clear", "ops.e"}, "cleared"},
	} {
		var out bytes.Buffer
		if err := execute(context.Background(), append(append([]string{"retention"}, c.args...), conn...), &out, io.Discard); err != nil || !strings.Contains(out.String(), c.want) {
			t.Errorf("retention %v: %v\n%s", c.args, err, out.String())
		}
	}
	var out bytes.Buffer
	if err := execute(context.Background(), append([]string{"retention", "show", "ops.e"}, conn...), &out, io.Discard); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("show after clear: %v", err)
	}
	out.Reset()
	if err := execute(context.Background(), append([]string{"tables", "verify", "ops.e"}, conn...), &out, io.Discard); err != nil || !strings.Contains(out.String(), "files-inside-location") || !strings.Contains(out.String(), "files-intact") {
		t.Errorf("verify: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := execute(context.Background(), append([]string{"tables", "repair", "ops.e"}, conn...), &out, io.Discard); err != nil || !strings.Contains(out.String(), "nothing to repair") {
		t.Errorf("repair of an intact table: %v\n%s", err, out.String())
	}
}

// seed posts JSON bodies to the local server as its admin.
func seed(t *testing.T, srv *server.Server, reqs []struct{ path, body string }) {
	t.Helper()
	for _, r := range reqs {
		req, _ := http.NewRequest("POST", srv.Info.RESTURL+r.path, strings.NewReader(r.body))
		req.Header.Set("Authorization", "Bearer "+srv.Info.AdminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode >= 300 {
			t.Fatalf("POST %s: %v %v", r.path, err, res)
		}
		res.Body.Close()
	}
}
