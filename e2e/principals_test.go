package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// Defect: the grants API stored principals with control bytes, decoded
// invalid UTF-8 lossily (user:%FE was stored as user:\ufffd, and %FF, %C0
// and %EF%BF%BD all reached that grant), and a principal literally named
// user:a* became a pattern once granted (user:a.b gained access). A
// principal is validated once (authz.ValidatePrincipal) and is a pattern
// only where its grant says so (?pattern=true).
func TestGrantPrincipalsAreExact(t *testing.T) {
	srv := localOnly(t)
	grants := "/lifecycle/v1/catalogs/" + shared.Catalog + "/grants/"
	read := map[string]any{"privileges": []string{"TABLE_READ"}}
	// No such grant is made; a read or a revoke finds none (they take what
	// an older grant may hold, so that it can be cleaned up), and bytes
	// that are not UTF-8 name no grant at all.
	for _, bad := range []string{"user:a%00b", "user:a%0Ab", "user:a%7Fb", "user:a%09b", "user:a%C2%85b", "user:%FE", "user:%FF", "user:%C0", "user:%EF%BF%BD", "user:a%20b"} {
		if status, out := call(t, "PUT", grants+bad, shared.Token, read); status != 400 {
			t.Errorf("PUT grant of %s: %d %s, want 400", bad, status, out)
		}
		want := 404
		if strings.Contains("%FE %FF %C0", bad[len("user:"):]) {
			want = 400
		}
		for _, method := range []string{"GET", "DELETE"} {
			if status, out := call(t, method, grants+bad, shared.Token, nil); status != want {
				t.Errorf("%s grant of %s: %d %s, want %d", method, bad, status, out, want)
			}
		}
	}
	if status, _ := call(t, "GET", grants+"user:%EF%BF%BD", shared.Token, nil); status != 404 {
		t.Errorf("user:%%FE and its kin reached a grant of user:\ufffd: %d", status)
	}

	// A literal name, '*' and all.
	star, other := "user:"+uniq("a")+"*", ""
	other = strings.TrimSuffix(star, "*") + ".b"
	starTok, err := srv.AddToken(star)
	if err != nil {
		t.Fatal(err)
	}
	otherTok, err := srv.AddToken(other)
	if err != nil {
		t.Fatal(err)
	}
	config := "/v1/config?warehouse=" + shared.Catalog
	var g struct {
		Principal  string   `json:"principal"`
		Privileges []string `json:"privileges"`
		Pattern    bool     `json:"pattern"`
	}
	mustDecode(t, mustCall(t, 200, "PUT", grants+star, shared.Token, read), &g)
	if g.Principal != star || g.Pattern {
		t.Errorf("the grant of %s answered %+v", star, g)
	}
	if status, _ := call(t, "GET", config, starTok, nil); status != 200 {
		t.Errorf("%s granted by name: %d, want 200", star, status)
	}
	if status, _ := call(t, "GET", config, otherTok, nil); status != 403 {
		t.Errorf("%s through the grant of the name %s: %d, want 403", other, star, status)
	}
	if status, _ := call(t, "GET", grants+star+"?pattern=true", shared.Token, nil); status != 404 {
		t.Errorf("the pattern %s exists: %d", star, status)
	}

	// The same text as a pattern covers both, and goes with its revoke.
	mustDecode(t, mustCall(t, 200, "PUT", grants+star+"?pattern=true", shared.Token, read), &g)
	if !g.Pattern {
		t.Errorf("the pattern grant answered %+v", g)
	}
	if status, _ := call(t, "GET", config, otherTok, nil); status != 200 {
		t.Errorf("%s through the pattern %s: %d, want 200", other, star, status)
	}
	mustCall(t, 204, "DELETE", grants+star+"?pattern=true", shared.Token, nil)
	if status, _ := call(t, "GET", config, otherTok, nil); status != 403 {
		t.Errorf("%s after the pattern's revoke: %d, want 403", other, status)
	}
	out := mustCall(t, 200, "GET", grants+star, shared.Token, nil)
	if err := json.Unmarshal(out, &g); err != nil || g.Pattern || g.Principal != star {
		t.Errorf("the grant of the name after the pattern's revoke: %s", out)
	}
	for _, q := range []string{"?pattern=yes", "?pattern=", "?pattern=true&pattern=false"} {
		if status, out := call(t, "GET", grants+star+q, shared.Token, nil); status != 400 {
			t.Errorf("GET %s: %d %s, want 400", q, status, out)
		}
	}
}
