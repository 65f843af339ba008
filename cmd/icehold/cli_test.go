package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// cli runs one command line in-process and returns what it printed.
func cli(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = execute(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// fakeAPI is an icehold API that records what it is asked and answers a
// job for every purge-jobs GET.
type fakeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, r.Clone(context.Background()))
		f.mu.Unlock()
		id := filepath.Base(r.URL.Path)
		_ = json.NewEncoder(w).Encode(job{ID: id, Kind: "purge", Namespace: []string{"ops"}, Table: "t", State: "RUNNING", BatchesTotal: 4, BatchesDone: 1})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) requests() []*http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*http.Request(nil), f.reqs...)
}

// isolate keeps a test from finding a developer's .icehold or environment.
func isolate(t *testing.T) {
	t.Helper()
	for _, k := range []string{"ICEHOLD_URL", "ICEHOLD_TOKEN", "ICEHOLD_CATALOG", "ICEHOLD_DIR", "ICEHOLD_AUTH", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
	}
	t.Chdir(t.TempDir())
}

// Help and usage errors never connect: with a server that records every
// request, no help or usage error of any verb reaches it.
func TestHelpIsOffline(t *testing.T) {
	isolate(t)
	api := newFakeAPI(t)
	t.Setenv("ICEHOLD_URL", api.URL)
	t.Setenv("ICEHOLD_TOKEN", "tok")
	cases := []struct {
		args  []string
		want  string // in stdout
		usage bool   // a usage error (exit status 2)
	}{
		{[]string{"jobs", "-h"}, "Available Commands:", false},
		{[]string{"jobs", "--help"}, "watch", false},
		{[]string{"help", "jobs", "show"}, "icehold jobs show JOB_ID", false},
		{[]string{"jobs", "show", "-h"}, "--dir", false},
		{[]string{"tables", "drop", "-h"}, "--watch", false},
		{[]string{"local", "redrive", "--help"}, "visibility timeout", false},
		{[]string{"local", "token", "-h"}, "tokens.json", false},
		{[]string{"retention", "set", "-h"}, "--keep", false},
		{[]string{"partitions", "drop", "-h"}, "Idempotency-Key", false},
		{[]string{"grants", "set", "-h"}, "PRIVILEGE", false},
		{[]string{"catalogs", "-h"}, "set-properties", false},
		{[]string{"migrate", "ownership", "-h"}, "--table", false},
		{[]string{"invoke", "-h"}, "events/FUNCTION", false},
		{[]string{"jobs"}, "", true},
		{[]string{"jobs", "shw"}, "", true},
		{[]string{"jobs", "show"}, "", true},
		{[]string{"jobs", "show", "a", "b"}, "", true},
		{[]string{"jobs", "list", "--bogus"}, "", true},
		{[]string{"tables", "drop", "ops.t", "--watch"}, "", true},
		{[]string{"tables", "undrop", "nodot"}, "", true},
		{[]string{"retention", "set", "ops.t", "--field", "d"}, "", true},
		{[]string{"tables", "legal-hold", "u"}, "", true},
		{[]string{"jobs", "list", "-o", "yaml"}, "", true},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, _, err := cli(c.args...)
			if c.usage {
				if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--help") {
					t.Errorf("err %v, want a usage error naming the help", err)
				}
			} else if err != nil || !strings.Contains(out, c.want) {
				t.Errorf("err %v, output lacks %q:\n%s", err, c.want, out)
			}
		})
	}
	if n := len(api.requests()); n != 0 {
		t.Errorf("help and usage errors sent %d requests", n)
	}
	for args, want := range map[string]int{"jobs -h": 0, "jobs": 2, "jobs list --bogus": 2} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), strings.Fields(args), &out, &errOut); code != want {
			t.Errorf("icehold %s exits %d, want %d (%s)", args, code, want, errOut.String())
		}
	}
	if n := len(api.requests()); n != 0 {
		t.Errorf("help and usage errors sent %d requests", n)
	}
}

// The global flags work before the verb, between verb and argument and
// after the argument, and from the environment; flags beat the environment.
func TestFlagsAnywhere(t *testing.T) {
	isolate(t)
	api := newFakeAPI(t)
	other := newFakeAPI(t)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		api  *fakeAPI
		auth string
	}{
		{"after the argument", nil, []string{"jobs", "show", "pj-1", "--url", api.URL, "--token", "a", "--catalog", "c"}, api, "Bearer a"},
		{"before the verb", nil, []string{"--url", api.URL, "--token", "a", "--catalog", "c", "jobs", "show", "pj-1"}, api, "Bearer a"},
		{"between", nil, []string{"jobs", "--url", api.URL, "show", "--token=a", "pj-1", "--catalog=c"}, api, "Bearer a"},
		{"Go's single dash", nil, []string{"jobs", "show", "pj-1", "-url", api.URL, "-token=a", "-catalog", "c"}, api, "Bearer a"},
		{"environment", map[string]string{"ICEHOLD_URL": api.URL, "ICEHOLD_TOKEN": "e", "ICEHOLD_CATALOG": "c"}, []string{"jobs", "show", "pj-1"}, api, "Bearer e"},
		{"flags beat the environment", map[string]string{"ICEHOLD_URL": api.URL, "ICEHOLD_TOKEN": "e", "ICEHOLD_CATALOG": "x"},
			[]string{"jobs", "show", "pj-1", "--url", other.URL, "--token", "f", "--catalog", "c"}, other, "Bearer f"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			before := len(c.api.requests())
			out, _, err := cli(c.args...)
			if err != nil || !strings.Contains(out, "pj-1") {
				t.Fatalf("%v\n%s", err, out)
			}
			reqs := c.api.requests()
			if len(reqs) != before+1 {
				t.Fatalf("%d requests, want 1", len(reqs)-before)
			}
			r := reqs[len(reqs)-1]
			if r.URL.Path != "/lifecycle/v1/catalogs/c/purge-jobs/pj-1" || r.Header.Get("Authorization") != c.auth {
				t.Errorf("asked %s with %q, want catalog c's pj-1 with %q", r.URL.Path, r.Header.Get("Authorization"), c.auth)
			}
		})
	}
}

// A local server is found through --dir, ICEHOLD_DIR, or a .icehold folder
// here or in a parent folder, and its admin token goes only to its URL.
func TestLocalServerFound(t *testing.T) {
	isolate(t)
	api := newFakeAPI(t)
	root := t.TempDir()
	state := filepath.Join(root, ".icehold")
	if err := os.MkdirAll(filepath.Join(root, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]string{"rest_url": api.URL, "admin_token": "adm", "catalog": "demo"})
	if err := os.WriteFile(filepath.Join(state, "local.json"), info, 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	cases := []struct {
		name string
		cwd  string
		env  map[string]string
		args []string
	}{
		{"parent folder", filepath.Join(root, "a", "b"), nil, nil},
		{"--dir", elsewhere, nil, []string{"--dir", state}},
		{"ICEHOLD_DIR", elsewhere, map[string]string{"ICEHOLD_DIR": state}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(c.cwd)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			before := len(api.requests())
			if _, _, err := cli(append([]string{"jobs", "show", "pj-1"}, c.args...)...); err != nil {
				t.Fatal(err)
			}
			reqs := api.requests()
			if len(reqs) != before+1 || reqs[len(reqs)-1].Header.Get("Authorization") != "Bearer adm" {
				t.Errorf("the local server was not asked with its admin token")
			}
		})
	}
}

// What a user reads when the connection cannot work.
func TestConnectionErrors(t *testing.T) {
	isolate(t)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no server anywhere", []string{"jobs", "list"}, "pass --url (or set ICEHOLD_URL)"},
		{"--url without --token", []string{"jobs", "list", "--url", "https://icehold.example.com"}, "--url https://icehold.example.com needs credentials: pass --token (or set ICEHOLD_TOKEN), or sign with SigV4"},
		{"server down", []string{"jobs", "list", "--url", downURL, "--token", "t"}, "cannot reach icehold at " + downURL + ": is `make run` running?"},
		{"redrive without a local server", []string{"local", "redrive"}, "no local server in"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := cli(c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want %q", err, c.want)
			}
		})
	}
}

// --profile and ICEHOLD_AUTH=sigv4 sign with SigV4 for execute-api in the
// region given, with the profile's keys or the default chain's.
func TestSigV4(t *testing.T) {
	isolate(t)
	api := newFakeAPI(t)
	cfgDir := t.TempDir()
	creds := filepath.Join(cfgDir, "credentials")
	if err := os.WriteFile(creds, []byte("[ops]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(cfgDir, "config"))
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"--profile", nil, []string{"--profile", "ops", "--region", "eu-west-1"}, "Credential=AKIDPROFILE/"},
		{"ICEHOLD_AUTH", map[string]string{"ICEHOLD_AUTH": "sigv4", "AWS_REGION": "eu-west-1"}, nil, "Credential=AKIDENV/"},
		{"--sigv4", map[string]string{"AWS_REGION": "eu-west-1"}, []string{"--sigv4"}, "Credential=AKIDENV/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if _, _, err := cli(append([]string{"jobs", "show", "pj-1", "--url", api.URL}, c.args...)...); err != nil {
				t.Fatal(err)
			}
			reqs := api.requests()
			auth := reqs[len(reqs)-1].Header.Get("Authorization")
			if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, c.want) || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") {
				t.Errorf("Authorization %q, want SigV4 with %s for execute-api in eu-west-1", auth, c.want)
			}
		})
	}
	if r := executeAPIRegion("https://abc123.execute-api.ap-south-1.amazonaws.com/prod"); r != "ap-south-1" {
		t.Errorf("region of an execute-api URL: %q", r)
	}
}

// Shell completion for bash, zsh and fish, and of flag values and verbs.
func TestCompletion(t *testing.T) {
	isolate(t)
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, _, err := cli("completion", sh)
		if err != nil || !strings.Contains(out, "icehold") || len(out) < 1000 {
			t.Errorf("completion %s: %v (%d bytes)", sh, err, len(out))
		}
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "jobs", "list", "--kind", ""}, []string{"purge", "orphans"}},
		{[]string{"__complete", "jobs", ""}, []string{"list", "show", "watch"}},
		{[]string{"__complete", "tables", ""}, []string{"list", "drop", "soft-deleted", "undrop", "purge-now", "legal-hold", "verify", "repair"}},
		{[]string{"__complete", "--output", ""}, []string{"table", "json"}},
		{[]string{"__complete", "invoke", ""}, []string{"api", "delete", "purge-plan"}},
	} {
		out, _, err := cli(c.args...)
		for _, w := range c.want {
			if err != nil || !strings.Contains(out, w+"\n") && !strings.Contains(out, w+"\t") {
				t.Errorf("%v: %v, lacks %q:\n%s", c.args, err, w, out)
			}
		}
	}
}

// --output json prints the API's answer as JSON.
func TestOutputJSON(t *testing.T) {
	isolate(t)
	api := newFakeAPI(t)
	out, _, err := cli("jobs", "show", "pj-9", "--url", api.URL, "--token", "t", "-o", "json")
	var j job
	if err != nil || json.Unmarshal([]byte(out), &j) != nil || j.ID != "pj-9" || j.BatchesTotal != 4 {
		t.Errorf("%v: %s", err, out)
	}
}
