package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/icehold/icehold/local/server"
)

var tokenRE = regexp.MustCompile(`^ih_[0-9a-f]{32}\n$`)

// tokenCLI runs `icehold local token ARGS --dir dir` and returns its stdout.
func tokenCLI(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := execute(context.Background(), append(append([]string{"local", "token"}, args...), "--dir", dir), &out, &errOut)
	return out.String(), err
}

// addToken runs `token add` and checks that stdout is the token and only that.
func addToken(t *testing.T, dir, principal string) string {
	t.Helper()
	out, err := tokenCLI(t, dir, "add", principal)
	if err != nil {
		t.Fatalf("token add %s: %v", principal, err)
	}
	if !tokenRE.MatchString(out) {
		t.Fatalf("token add printed %q, want the token alone on one line", out)
	}
	return strings.TrimSpace(out)
}

// configStatus is what the server answers GET /v1/config?warehouse=demo with token.
func configStatus(t *testing.T, srv *server.Server, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.Info.RESTURL+"/v1/config?warehouse=demo", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func startTokenServer(t *testing.T) (*server.Server, string) {
	t.Helper()
	dir := t.TempDir()
	srv, err := server.Start(context.Background(), server.Options{Dir: dir, DeleteWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, dir
}

// The README's "try grants" walk-through against a running server, which
// sees every add and revoke at once, without a restart: an unknown token is
// 401, a new principal without grants 403, with a TABLE_READ grant 200, a
// revoked token 401 again; revoking by principal removes all its tokens; the
// last admin token cannot be revoked; revoking the admin token local.json
// names makes local.json name a remaining one.
func TestTokenCommandsAgainstRunningServer(t *testing.T) {
	srv, dir := startTokenServer(t)
	admin := srv.Info.AdminToken

	if got := configStatus(t, srv, "ih_00000000000000000000000000000000"); got != 401 {
		t.Errorf("unknown token: %d, want 401", got)
	}
	alice := addToken(t, dir, "user:alice")
	if got := configStatus(t, srv, alice); got != 403 {
		t.Errorf("new principal without grants: %d, want 403", got)
	}
	req, _ := http.NewRequest("PUT", srv.Info.RESTURL+"/lifecycle/v1/catalogs/demo/grants/user:alice", strings.NewReader(`{"privileges":["TABLE_READ"]}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("grant: %d", res.StatusCode)
	}
	if got := configStatus(t, srv, alice); got != 200 {
		t.Errorf("user:alice with TABLE_READ: %d, want 200", got)
	}

	out, err := tokenCLI(t, dir, "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "user:alice") || !strings.Contains(out, server.MaskToken(alice)) ||
		!strings.Contains(out, "local:admin") || strings.Contains(out, alice) || strings.Contains(out, admin) {
		t.Errorf("list shows no masked tokens of user:alice and local:admin:\n%s", out)
	}

	if out, err := tokenCLI(t, dir, "revoke", alice); err != nil || !strings.Contains(out, "user:alice") {
		t.Fatalf("revoke by token: %q %v", out, err)
	}
	if got := configStatus(t, srv, alice); got != 401 {
		t.Errorf("revoked token: %d, want 401", got)
	}

	bob1, bob2 := addToken(t, dir, "user:bob"), addToken(t, dir, "user:bob")
	carol := addToken(t, dir, "user:carol")
	out, err = tokenCLI(t, dir, "revoke", "user:bob")
	if err != nil || strings.Count(out, "revoked") != 2 {
		t.Fatalf("revoke by principal: %q %v", out, err)
	}
	for _, tok := range []string{bob1, bob2} {
		if got := configStatus(t, srv, tok); got != 401 {
			t.Errorf("token of a revoked principal: %d, want 401", got)
		}
	}
	if got := configStatus(t, srv, carol); got != 403 {
		t.Errorf("another principal's token after a revoke: %d, want 403", got)
	}

	if _, err := tokenCLI(t, dir, "revoke", admin); !errors.Is(err, server.ErrLastAdmin) {
		t.Errorf("revoking the last admin token: %v, want ErrLastAdmin", err)
	}
	if _, err := tokenCLI(t, dir, "revoke", server.AdminPrincipal); !errors.Is(err, server.ErrLastAdmin) {
		t.Errorf("revoking the admin principal: %v, want ErrLastAdmin", err)
	}
	if got := configStatus(t, srv, admin); got != 200 {
		t.Errorf("admin after a refused revoke: %d, want 200", got)
	}

	admin2 := addToken(t, dir, server.AdminPrincipal)
	if _, err := tokenCLI(t, dir, "revoke", admin); err != nil {
		t.Fatalf("revoking an admin token with another left: %v", err)
	}
	if got := configStatus(t, srv, admin); got != 401 {
		t.Errorf("revoked admin token: %d, want 401", got)
	}
	if got := configStatus(t, srv, admin2); got != 200 {
		t.Errorf("remaining admin token: %d, want 200", got)
	}
	var info server.Info
	raw, _ := os.ReadFile(filepath.Join(dir, "local.json"))
	if err := json.Unmarshal(raw, &info); err != nil || info.AdminToken != admin2 || info.RESTURL != srv.Info.RESTURL {
		t.Errorf("local.json after revoking its admin token: admin_token %q (want the remaining one), rest_url %q, %v", info.AdminToken, info.RESTURL, err)
	}

	fi, err := os.Stat(filepath.Join(dir, server.TokensFileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens.json: %v %v, want mode 0600", fi.Mode(), err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(tmp) > 0 {
		t.Errorf("temp files left behind: %v", tmp)
	}
}

// Adds from several goroutines at once (the CLI's path and the server's
// AddToken, as two processes would) lose no token, and the running server
// accepts every one.
func TestTokenAddConcurrent(t *testing.T) {
	srv, dir := startTokenServer(t)
	const workers, each = 6, 5
	var mu sync.Mutex
	made := map[string]string{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				p := fmt.Sprintf("user:w%d-%d", w, i)
				var tok string
				var err error
				if w%2 == 0 {
					var out, errOut bytes.Buffer
					err = execute(context.Background(), []string{"local", "token", "add", p, "--dir", dir}, &out, &errOut)
					tok = strings.TrimSpace(out.String())
				} else {
					tok, err = srv.AddToken(p)
				}
				if err != nil {
					t.Errorf("add %s: %v", p, err)
					return
				}
				mu.Lock()
				made[tok] = p
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(made) != workers*each {
		t.Fatalf("made %d distinct tokens, want %d", len(made), workers*each)
	}
	toks, err := server.ListTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	inFile := map[string]string{}
	for _, tk := range toks {
		inFile[tk.Token] = tk.Principal
	}
	for tok, p := range made {
		if inFile[tok] != p {
			t.Errorf("tokens.json lost the token of %s", p)
		}
		if got := configStatus(t, srv, tok); got != 403 {
			t.Errorf("token of %s: %d, want 403 (known, no grants)", p, got)
		}
	}
	if len(inFile) != workers*each+1 {
		t.Errorf("tokens.json holds %d tokens, want %d and the admin's", len(inFile), workers*each)
	}
}

// The commands' refusals, without a server (tokens.json alone).
func TestTokenCommandErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := server.AddTokenTo(dir, server.AdminPrincipal); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string // "" for success
	}{
		{"no subcommand", nil, "usage"},
		{"unknown subcommand", []string{"frob"}, `unknown command "frob"`},
		{"add without principal", []string{"add"}, "usage"},
		{"add two principals", []string{"add", "a", "b"}, "usage"},
		{"list with an argument", []string{"list", "x"}, "usage"},
		{"revoke without argument", []string{"revoke"}, "usage"},
		{"empty principal", []string{"add", ""}, "empty"},
		{"space", []string{"add", "user alice"}, "whitespace"},
		{"tab", []string{"add", "user:\talice"}, "whitespace"},
		{"newline", []string{"add", "user:alice\n"}, "whitespace"},
		{"control character", []string{"add", "user:\x01alice"}, "control"},
		{"DEL", []string{"add", "user:alice\x7f"}, "control"},
		{"no-break space", []string{"add", "user:\u00a0alice"}, "whitespace"},
		{"not UTF-8", []string{"add", "user:\xffalice"}, "UTF-8"},
		{"2049 bytes", []string{"add", strings.Repeat("a", 2049)}, "at most 2048"},
		{"2048 bytes", []string{"add", strings.Repeat("a", 2048)}, ""},
		{"IAM role ARN", []string{"add", "arn:aws:sts::123456789012:assumed-role/etl/s-1"}, ""},
		{"non-ASCII", []string{"add", "user:zoë"}, ""},
		{"flags first", []string{"add", "--dir", dir, "user:dave"}, ""},
		{"revoke unknown", []string{"revoke", "user:nobody"}, "no token and no principal"},
		{"revoke last admin", []string{"revoke", server.AdminPrincipal}, "last local:admin"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tokenCLI(t, dir, c.args...)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%q: %v", c.args, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%q: %v, want an error with %q", c.args, err, c.want)
			}
		})
	}
	if _, err := tokenCLI(t, t.TempDir(), "list"); err == nil || !strings.Contains(err.Error(), "no tokens in") {
		t.Errorf("list without tokens.json: %v", err)
	}

	// Before the server's first start tokens.json may hold no admin token:
	// revoking another principal's is no revoke of the last admin token.
	fresh := t.TempDir()
	addToken(t, fresh, "user:erin")
	if out, err := tokenCLI(t, fresh, "revoke", "user:erin"); err != nil || !strings.Contains(out, "user:erin") {
		t.Errorf("revoke in a tokens.json without admin: %q %v", out, err)
	}
}

// local token list -o json prints the principals and masked tokens as JSON.
func TestTokenListJSON(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	if _, _, err := cli("local", "token", "add", "user:alice", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	out, _, err := cli("local", "token", "list", "--dir", dir, "-o", "json")
	var got struct {
		Tokens []struct {
			Principal string `json:"principal"`
			Token     string `json:"token"`
		} `json:"tokens"`
	}
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got.Tokens) != 1 || got.Tokens[0].Principal != "user:alice" || !strings.Contains(got.Tokens[0].Token, "...") {
		t.Errorf("token list -o json: %v\n%s", err, out)
	}
}
