package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/icehold/icehold/local/server"
)

// tables list, namespaces list, and legal-hold naming the table as every
// table verb does (NAMESPACE.TABLE; --uuid when several generations lie
// soft-deleted under the name).
func TestTablesNamespacesAndLegalHoldByName(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Options{Dir: dir, DeleteWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	schema := `"schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"long","required":false}]}`
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/v1/demo/namespaces", `{"namespace":["ops","eu"]}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"a",` + schema + `}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"b",` + schema + `}`},
		{"/v1/demo/namespaces/ops/tables", `{"name":"gone",` + schema + `}`},
	})
	run := func(args ...string) string {
		t.Helper()
		out, _, err := cli(append(args, "--dir", dir)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	if out := run("namespaces", "list"); !strings.Contains(out, "ops\n") {
		t.Errorf("namespaces list:\n%s", out)
	}
	if out := run("namespaces", "list", "ops"); !strings.Contains(out, "ops.eu\n") {
		t.Errorf("namespaces list ops:\n%s", out)
	}
	if out := run("tables", "list", "ops"); !strings.Contains(out, "ops.a\n") || !strings.Contains(out, "ops.b\n") {
		t.Errorf("tables list ops:\n%s", out)
	}
	var listed struct {
		Identifiers []struct {
			Namespace []string `json:"namespace"`
			Name      string   `json:"name"`
		} `json:"identifiers"`
	}
	if err := json.Unmarshal([]byte(run("tables", "list", "ops", "-o", "json")), &listed); err != nil || len(listed.Identifiers) != 3 {
		t.Errorf("tables list -o json: %v %+v", err, listed)
	}

	req, _ := http.NewRequest("DELETE", srv.Info.RESTURL+"/v1/demo/namespaces/ops/tables/gone", nil)
	req.Header.Set("Authorization", "Bearer "+srv.Info.AdminToken)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 204 {
		t.Fatalf("drop: %v %v", err, res)
	}
	if out := run("tables", "legal-hold", "ops.gone", "--on"); !strings.Contains(out, "ops.gone (soft-deleted") || !strings.Contains(out, "legal hold on") {
		t.Errorf("legal-hold ops.gone --on:\n%s", out)
	}
	if out := run("tables", "legal-hold", "ops.a", "--on"); !strings.Contains(out, "ops.a (live") {
		t.Errorf("legal-hold of a live table:\n%s", out)
	}
	if _, _, err := cli("tables", "legal-hold", "ops.never", "--on", "--dir", dir); err == nil || !strings.Contains(err.Error(), "no soft-deleted table ops.never") {
		t.Errorf("legal-hold of no table: %v", err)
	}
	run("tables", "legal-hold", "ops.gone", "--off")
	var undropped map[string]any
	if err := json.Unmarshal([]byte(run("tables", "undrop", "ops.gone", "--rename-to", "ops.back", "-o", "json")), &undropped); err != nil ||
		undropped["name"] != "back" || undropped["table-uuid"] == nil || undropped["view-uuid"] != nil {
		t.Errorf("tables undrop -o json: %v %v, want the table's name and table-uuid only", err, undropped)
	}
	if _, _, err := cli("tables", "undrop", "ops.gone", "--dir", dir); err == nil || !strings.Contains(err.Error(), "no such soft-deleted table") {
		t.Errorf("undrop of what is undropped already: %v", err)
	}
}

// A drop without purge on a catalog without soft delete leaves the table's
// files, which nothing records: the answer names where, and the CLI says
// so. With soft delete the drop keeps a record, so nothing is said.
func TestDropWithoutPurgeNamesTheFilesLeft(t *testing.T) {
	isolate(t)
	for _, c := range []struct {
		name  string
		props map[string]string
		left  bool
	}{{"no soft delete", map[string]string{}, true}, {"soft delete", nil, false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			srv, err := server.Start(context.Background(), server.Options{Dir: dir, DeleteWorkers: -1, DemoProperties: c.props})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			seed(t, srv, []struct{ path, body string }{
				{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
				{"/v1/demo/namespaces/ops/tables", `{"name":"t","schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"long","required":false}]}}`},
			})
			out, _, err := cli("tables", "drop", "ops.t", "--dir", dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(out, "files stay under s3://"+srv.Info.Bucket+"/"); got != c.left {
				t.Errorf("drop ops.t printed:\n%s\nwant the files left named: %v", out, c.left)
			}
		})
	}
}
