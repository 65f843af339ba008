package main

import (
	"context"
	"strings"
	"testing"

	"github.com/icehold/icehold/local/server"
)

// catalogs and grants against a local server: a token's principal holds
// what grants set gives it, until revoked.
func TestCatalogsAndGrants(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Options{Dir: dir, DeleteWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	tok, _, err := cli("local", "token", "add", "user:ana", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	tok = strings.TrimSpace(tok)
	asAna := []string{"--token", tok, "--url", srv.Info.RESTURL}
	for _, c := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{[]string{"catalogs", "show"}, "warehouse", ""},
		{[]string{"catalogs", "set-properties", "--set", "team=data"}, "team=data", ""},
		{[]string{"catalogs", "create", "sales", "--warehouse", "s3://" + srv.Info.Bucket + "/sales"}, "name       sales", ""},
		{[]string{"grants", "show", "user:ana"}, "", "404"},
		{append([]string{"tables", "soft-deleted"}, asAna...), "", "403"},
		{[]string{"grants", "set", "user:ana", "TABLE_LIST_SOFT_DELETED", "TABLE_READ"}, "user:ana on demo: TABLE_LIST_SOFT_DELETED, TABLE_READ", ""},
		{append([]string{"tables", "soft-deleted"}, asAna...), "LEGAL HOLD", ""},
		{[]string{"grants", "revoke", "user:ana"}, "revoked", ""},
		{append([]string{"tables", "soft-deleted"}, asAna...), "", "403"},
		// A pattern covers ana; the name user:an* would not.
		{[]string{"grants", "set", "user:an*", "TABLE_LIST_SOFT_DELETED"}, "user:an* on demo", ""},
		{append([]string{"tables", "soft-deleted"}, asAna...), "", "403"},
		{[]string{"grants", "set", "--pattern", "user:an*", "TABLE_LIST_SOFT_DELETED"}, "the pattern user:an* on demo", ""},
		{append([]string{"tables", "soft-deleted"}, asAna...), "LEGAL HOLD", ""},
		{[]string{"grants", "revoke", "--pattern", "user:an*"}, "revoked", ""},
		{append([]string{"tables", "soft-deleted"}, asAna...), "", "403"},
	} {
		out, _, err := cli(append(c.args, "--dir", dir)...)
		switch {
		case c.wantErr == "" && (err != nil || !strings.Contains(out, c.want)):
			t.Errorf("%v: %v, output lacks %q:\n%s", c.args, err, c.want, out)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%v: %v, want %s", c.args, err, c.wantErr)
		}
	}
}
