package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/icehold/icehold/local/server"
)

// views list, drop, soft-deleted, undrop --rename-to and purge-now
// against a local server with soft delete on; tables soft-deleted lists no
// view.
func TestViewsCommands(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	view := func(name string) struct{ path, body string } {
		return struct{ path, body string }{"/v1/demo/namespaces/ops/views", `{"name":"` + name + `","schema":{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","type":"long","required":false}]},` +
			`"view-version":{"version-id":1,"schema-id":0,"timestamp-ms":1,"summary":{},"default-namespace":["ops"],"representations":[{"type":"sql","sql":"SELECT 1 AS x","dialect":"spark"}]}}`}
	}
	seed(t, srv, []struct{ path, body string }{
		{"/v1/demo/namespaces", `{"namespace":["ops"]}`},
		{"/lifecycle/v1/catalogs/demo/properties", `{"updates":{"soft-delete.enabled":"true"}}`},
		view("v"), view("w"),
	})
	for _, c := range []struct {
		args []string
		want string // in the output
		not  string // not in the output
	}{
		{[]string{"views", "list", "ops"}, "ops.v\nops.w\n", ""},
		{[]string{"views", "drop", "ops.v"}, "dropped view ops.v", ""},
		{[]string{"views", "drop", "ops.w"}, "dropped view ops.w", ""},
		{[]string{"views", "list", "ops"}, "", "ops.v"},
		{[]string{"views", "soft-deleted"}, "ops.v", ""},
		{[]string{"tables", "soft-deleted"}, "TABLE", "ops.v"},
		{[]string{"views", "undrop", "ops.v", "--rename-to", "ops.back"}, "undropped view ops.back", ""},
		{[]string{"views", "list", "ops"}, "ops.back\n", ""},
		{[]string{"views", "purge-now", "ops.w", "--yes"}, "purge job", ""},
		{[]string{"views", "soft-deleted"}, "VIEW UUID", "ops.w"},
	} {
		var out bytes.Buffer
		err := execute(context.Background(), append(c.args, "--dir", dir), &out, io.Discard)
		if err != nil || !strings.Contains(out.String(), c.want) || c.not != "" && strings.Contains(out.String(), c.not) {
			t.Errorf("%v: %v\n%s", c.args, err, out.String())
		}
	}
}
