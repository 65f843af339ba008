package e2e

// The documentation tests: every command block of README.md,
// docs/operations.md and docs/deploy.md is checked, each by the marker
// comment before it:
//
//	<!-- tour -->, <!-- tour: server -->  run as written, in order, by TestTour
//	<!-- ops: NAME -->                    run as written, in order, by TestOperationsCommandsAsWritten
//	<!-- aws: NAME -->                    commands that need an AWS account, run by
//	                                      TestAWSCommandsAsWritten against stand-ins: the real
//	                                      AWS CLI checks each aws command's arguments (against an
//	                                      endpoint that refuses connections, a valid command fails
//	                                      only to connect) and a stand-in answers the stack's
//	                                      outputs with a local server's values; icehold runs for
//	                                      real against that local server, signed with SigV4 as in
//	                                      AWS; make targets are checked with make -n; cdk's
//	                                      subcommand and every -c key against the stack's context
//	                                      keys; go test's packages with go list
//	<!-- make -->                         make targets: make -n
//	<!-- flags -->                        each command with --help appended (the program parses
//	                                      every flag first)
//	<!-- engine -->                       engines' settings (no Spark, Trino or PyIceberg here):
//	                                      shell passes bash -n, Python its parser, Go go/parser,
//	                                      properties key=value lines
//	<!-- snippet: examples/… -->          Go quoted from an example (examples' tests)
//
// Blocks without a language are output, not commands.

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/icehold/icehold/examples"
	"github.com/icehold/icehold/local/server"
)

// docPages are the pages whose every command is checked.
var docPages = []string{"../README.md", "../docs/operations.md", "../docs/deploy.md", "../docs/engines.md"}

// opsBlocks are the <!-- ops: NAME --> blocks TestOperationsCommandsAsWritten
// runs, in its order.
var opsBlocks = []string{"local setup", "practice", "redrive", "jobs", "inspect"}

// Every command block of the pages carries a marker that says which test
// checks it, and the test exists.
func TestEveryDocumentedCommandIsChecked(t *testing.T) {
	for _, page := range docPages {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range examples.Blocks(string(md)) {
			if b.Lang == "" {
				continue // output
			}
			where := fmt.Sprintf("%s:%d (%s block)", page, b.Line, b.Lang)
			name, isOps := strings.CutPrefix(b.Marker, "ops: ")
			_, isAWS := strings.CutPrefix(b.Marker, "aws: ")
			_, isSnippet := strings.CutPrefix(b.Marker, "snippet: ")
			switch {
			case b.Marker == "tour" || b.Marker == "tour: server":
				if page != "../README.md" {
					t.Errorf("%s: TestTour runs the README's tour only", where)
				}
			case isOps:
				if page != "../docs/operations.md" || !slices.Contains(opsBlocks, name) {
					t.Errorf("%s: TestOperationsCommandsAsWritten runs docs/operations.md's blocks %q only", where, opsBlocks)
				}
			case isAWS, b.Marker == "make", b.Marker == "flags":
				if b.Lang != "sh" {
					t.Errorf("%s: a %q block is shell (```sh)", where, b.Marker)
				}
			case b.Marker == "engine":
			case isSnippet && b.Lang == "go":
			default:
				t.Errorf("%s: marker %q: every command block says how make test checks it (e2e/docs_test.go lists the markers)", where, b.Marker)
			}
		}
	}
}

// blocksMarked are the pages' blocks whose marker is marker or starts with
// it followed by ": ".
func blocksMarked(t *testing.T, marker string) []examples.Block {
	t.Helper()
	var out []examples.Block
	for _, page := range docPages {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range examples.Blocks(string(md)) {
			if b.Marker == marker || strings.HasPrefix(b.Marker, marker+": ") {
				out = append(out, b)
			}
		}
	}
	return out
}

// <!-- make --> blocks: each make command names targets of the Makefile.
func TestDocumentedMakeTargets(t *testing.T) {
	for _, b := range blocksMarked(t, "make") {
		for _, line := range commands(b.Text) {
			args := strings.Fields(withoutComment(line))
			if len(args) < 2 || args[0] != "make" {
				t.Errorf("line %d: %q is not a make command", b.Line, line)
				continue
			}
			if out, err := exec.Command("make", append([]string{"-n", "-C", ".."}, args[1:]...)...).CombinedOutput(); err != nil {
				t.Errorf("%s: make -n: %v\n%s", line, err, out)
			}
		}
	}
}

// <!-- flags --> blocks: each command parses its flags (--help appended).
func TestDocumentedFlags(t *testing.T) {
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "icehold"), "./cmd/icehold")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, b := range blocksMarked(t, "flags") {
		for _, line := range commands(b.Text) {
			args := strings.Fields(strings.TrimSuffix(strings.TrimSpace(withoutComment(line)), "&"))
			if args[0] == "icehold" {
				args[0] = filepath.Join(bin, "icehold")
			} else if _, err := exec.LookPath(args[0]); err != nil {
				t.Logf("%s: %s is not installed here, not checked", line, args[0])
				continue
			}
			if out, err := exec.Command(args[0], append(args[1:], "--help")...).CombinedOutput(); err != nil {
				t.Errorf("%s --help: %v\n%s", line, err, out)
			}
		}
	}
}

// <!-- engine --> blocks: the engines' settings parse.
func TestDocumentedEngineSettings(t *testing.T) {
	property := regexp.MustCompile(`^[\w.-]+=\S.*$`)
	for _, b := range blocksMarked(t, "engine") {
		switch b.Lang {
		case "sh":
			cmd := exec.Command("bash", "-n")
			cmd.Stdin = strings.NewReader(b.Text)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("line %d: bash -n: %v\n%s", b.Line, err, out)
			}
		case "python":
			if _, err := exec.LookPath("python3"); err != nil {
				t.Logf("line %d: no python3 here, not checked", b.Line)
				continue
			}
			cmd := exec.Command("python3", "-c", "import ast, sys; ast.parse(sys.stdin.read())")
			cmd.Stdin = strings.NewReader(b.Text)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("line %d: Python's parser: %v\n%s", b.Line, err, out)
			}
		case "go":
			src := "package p\nfunc _() {\n" + b.Text + "}\n"
			if _, err := parser.ParseFile(token.NewFileSet(), "snippet.go", src, 0); err != nil {
				t.Errorf("line %d: go/parser: %v", b.Line, err)
			}
		case "properties":
			for _, l := range strings.Split(strings.TrimSpace(b.Text), "\n") {
				if !property.MatchString(l) && !strings.HasPrefix(l, "#") {
					t.Errorf("line %d: %q is not key=value", b.Line, l)
				}
			}
		default:
			t.Errorf("line %d: an engine block in %s: no check for it", b.Line, b.Lang)
		}
	}
}

// placeholder is a <value of yours> in a command.
var placeholder = regexp.MustCompile(`<[A-Za-z][A-Za-z0-9_-]*>`)

// The <!-- aws: NAME --> blocks, deploy.md's then operations.md's, in one
// bash session against stand-ins for AWS (see the top of this file): the
// deploy guide's first catalog is made for real, on a local server.
func TestAWSCommandsAsWritten(t *testing.T) {
	needAWSCLI(t)
	embeddedAWS(t)
	realAWS, _ := exec.LookPath("aws")
	clone := t.TempDir()
	srv, _ := ownServer(t, server.Options{Dir: filepath.Join(clone, ".icehold"), DeleteWorkers: -1, ReconcileEvery: time.Hour})
	user, err := server.AddUser(filepath.Join(clone, ".icehold"), "deployer") // of account 000000000000: an admin locally
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()

	values := map[string]string{
		"<account>": "000000000000", "<region>": server.Region, "<admin-role>": "admin", "<engine-role>": "engine",
		"<oncall-email>": "oncall@example.com", "<TableName>": srv.Info.Table, "<CatalogUri>": srv.Info.RESTURL,
		"<AccessLogGroup>": "Icehold-ApiAccessLogs", "<EnginePolicyArn>": "arn:aws:iam::000000000000:policy/Icehold-EnginePolicy",
		"<AlarmTopicArn>": "arn:aws:sns:us-east-1:000000000000:Icehold-AlarmTopic",
	}
	outputs := map[string]string{
		"CatalogUri": srv.Info.RESTURL, "RestCatalogUri": srv.Info.RESTURL, "TableName": srv.Info.Table, "WarehouseBuckets": srv.Info.Bucket,
		"EnginePolicyArn": values["<EnginePolicyArn>"], "AlarmTopicArn": values["<AlarmTopicArn>"], "AccessLogGroup": values["<AccessLogGroup>"],
		"InventoryBucket": server.InventoryBucket,
	}

	bin := filepath.Join(t.TempDir(), "bin")
	cli := goRunShim(t, bin, map[string]string{"./cmd/icehold": "icehold"})
	if err := os.Symlink(cli, filepath.Join(bin, "icehold")); err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("..")
	// The stack's outputs, as infra/ makes them: each one answered.
	var stack []byte
	infraFiles, _ := filepath.Glob("../infra/*.go")
	for _, f := range infraFiles {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stack = append(stack, b...)
	}
	var keys []string
	for _, m := range regexp.MustCompile(`NewCfnOutput\(st, jsii\.String\("(\w+)"\)`).FindAllStringSubmatch(string(stack), -1) {
		if _, ok := outputs[m[1]]; !ok {
			t.Errorf("the stack's output %s has no stand-in value in TestAWSCommandsAsWritten", m[1])
		}
		if !slices.Contains(keys, m[1]) {
			keys = append(keys, m[1])
		}
	}
	if !slices.Contains(keys, "CatalogUri") {
		t.Fatalf("found the outputs %v in infra/, no CatalogUri: the reading of them is out of date", keys)
	}
	sort.Strings(keys)
	var answers strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&answers, "    *\"'%s'\"*) echo %q; exit 0;;\n", k, outputs[k])
	}
	shims := map[string]string{
		filepath.Join(bin, "aws"): "#!/usr/bin/env bash\n" +
			"# the documentation test's aws: the real AWS CLI checks the arguments (against an endpoint that\n" +
			"# refuses connections a valid command fails only to connect), then the stack's outputs are answered\n" +
			"out=$(AWS_MAX_ATTEMPTS=1 " + shellQuote(realAWS) + " --endpoint-url " + refused + " --cli-connect-timeout 2 \"$@\" 2>&1 </dev/null)\n" +
			"case \"$out\" in *'Could not connect to the endpoint URL'*) ;; *) echo \"aws $*: the AWS CLI refuses it: $out\" >&2; exit 2;; esac\n" +
			"echo \"(aws $1 $2: arguments checked by the AWS CLI)\" >&2\n" +
			"if [ \"$1 $2\" = 'cloudformation describe-stacks' ]; then\n  case \"$*\" in\n" + answers.String() +
			"    *OutputKey==*) echo \"aws: the stack has no such output: $*\" >&2; exit 2;;\n  esac\n  echo '[]'\nfi\n",
		filepath.Join(bin, "make"): "#!/bin/sh\n# the documentation test's make: the targets exist (make -n)\n" +
			shellQuote(lookPath(t, "make")) + " -n -C " + shellQuote(repo) + " \"$@\" >/dev/null || { echo \"make $*: not a target of the Makefile\" >&2; exit 2; }\n" +
			"echo \"(make $*: checked with make -n)\" >&2\n",
		filepath.Join(bin, "go"): "#!/bin/sh\n# the documentation test's go: go test's packages exist (go list)\n" +
			"[ \"$1\" = test ] || { echo \"documentation test: no stand-in for go $*\" >&2; exit 2; }\nshift\n" +
			"cd " + shellQuote(repo) + " && exec " + shellQuote(lookPath(t, "go")) + " list \"$@\"\n",
		filepath.Join(clone, ".npm", "node_modules", ".bin", "cdk"): cdkShim(t),
	}
	for path, text := range shims {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ICEHOLD_") && !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID="+user.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+user.SecretAccessKey, "AWS_REGION="+server.Region,
		"AWS_DEFAULT_REGION="+server.Region, "AWS_ENDPOINT_URL="+srv.Info.AWSEndpoint)
	sh, err := startShell(clone, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.close)
	d := &docShell{t: t, sh: sh}

	var all strings.Builder
	for _, page := range []string{"../docs/deploy.md", "../docs/operations.md", "../README.md"} {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range examples.Blocks(string(md)) {
			if !strings.HasPrefix(b.Marker, "aws: ") {
				continue
			}
			for _, line := range commands(b.Text) {
				line = placeholder.ReplaceAllStringFunc(line, func(p string) string {
					v, ok := values[p]
					if !ok {
						t.Errorf("%s:%d: placeholder %s: give it a value in TestAWSCommandsAsWritten", page, b.Line, p)
					}
					return v
				})
				all.WriteString(d.expect(line))
			}
		}
	}
	// The deploy guide's first catalog, made as an admin signing with SigV4.
	c, err := srv.Catalog.GetCatalog(t.Context(), "sales")
	if err != nil || c.Properties["soft-delete.enabled"] != "true" {
		t.Errorf("the first catalog: %+v %v, want sales with soft delete", c, err)
	}
	for _, want := range []string{"analytics\n", `"unfinished-jobs": []`, "sales  s3://" + srv.Info.Bucket + "/sales"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the commands printed no %q", want)
		}
	}
}

// cdkShim is the documentation test's cdk: a subcommand of cdk's, and
// every -c key one the stack reads (infra/'s "icehold:…" literals).
func cdkShim(t *testing.T) string {
	t.Helper()
	var keys []string
	files, _ := filepath.Glob("../infra/*.go")
	lit := regexp.MustCompile(`"(icehold:[A-Za-z-]+)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range lit.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(keys, m[1]) {
				keys = append(keys, m[1])
			}
		}
	}
	if len(keys) < 5 {
		t.Fatalf("found the context keys %v in infra/: the shim's reading of them is out of date", keys)
	}
	return "#!/usr/bin/env bash\n# the documentation test's cdk: a subcommand of cdk's, each -c key one the stack reads\n" +
		"case \"$1\" in bootstrap|deploy|diff|destroy|synth) ;; *) echo \"cdk $1: not a cdk subcommand here\" >&2; exit 2;; esac\n" +
		"keys=' " + strings.Join(keys, " ") + " '\nprev=\nfor a in \"$@\"; do\n" +
		"  if [ \"$prev\" = -c ] || [ \"$prev\" = --context ]; then k=${a%%=*}; case \"$keys\" in *\" $k \"*) ;; *) echo \"cdk: -c $k: not a context key of the stack\" >&2; exit 2;; esac; fi\n" +
		"  prev=$a\ndone\necho \"(cdk $1: subcommand and context keys checked)\" >&2\n"
}

// lookPath is the program name names on the test's PATH (a stand-in of the
// same name may come first on the shell's).
func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// The README's LocalStack row describes localstack/'s scripts, which need a
// Docker engine this machine lacks: the claims are checked against the
// scripts' text, and the scripts parse (bash -n).
func TestLocalStackScriptsMatchTheREADME(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := ""
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.Contains(line, "`make localstack-up`") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("the README has no make localstack-up row")
	}
	scripts := map[string]string{}
	for _, name := range []string{"up.sh", "deploy.sh"} {
		path := filepath.Join("..", "localstack", name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		scripts[name] = string(b)
		if out, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", path, err, out)
		}
	}
	image := regexp.MustCompile("`(localstack/localstack:[0-9][^`]*)`").FindStringSubmatch(row)
	for _, c := range []struct {
		claim, script, text string
	}{
		{"a pinned image", "up.sh", func() string {
			if image == nil {
				t.Errorf("the README's row names no pinned localstack/localstack:<version> image:\n%s", row)
				return "(none)"
			}
			return image[1]
		}()},
		{"functions for the Docker host's architecture", "deploy.sh", "docker info --format '{{.Architecture}}'"},
		{"built with make lambdas LAMBDA_ARCH", "deploy.sh", "make lambdas LAMBDA_ARCH="},
		{"deployed with -c icehold:arch", "deploy.sh", "-c icehold:arch="},
		{"a catalog demo created", "deploy.sh", "catalogs create demo"},
		{"the e2e line printed", "deploy.sh", "echo \"make e2e E2E_ENDPOINT="},
	} {
		if !strings.Contains(scripts[c.script], c.text) {
			t.Errorf("the README says %s, but localstack/%s has no %q", c.claim, c.script, c.text)
		}
	}
	for _, claim := range []string{"LAMBDA_ARCH=amd64", "icehold:arch=x86_64", "a catalog `demo` created", "make e2e E2E_ENDPOINT="} {
		if !strings.Contains(row, claim) {
			t.Errorf("the README's LocalStack row no longer says %q: update this test with it", claim)
		}
	}
	// A bounded wait: a loop over a fixed count, never an until loop.
	if strings.Contains(scripts["up.sh"], "until ") || !regexp.MustCompile(`for _ in \$\(seq \d+\)`).MatchString(scripts["up.sh"]) {
		t.Errorf("localstack/up.sh waits without a bound:\n%s", scripts["up.sh"])
	}
	if strings.Contains(scripts["up.sh"], ":latest") {
		t.Errorf("localstack/up.sh runs an unpinned image")
	}
	var mk bytes.Buffer
	if b, err := os.ReadFile("../Makefile"); err == nil {
		mk.Write(b)
	}
	for _, target := range []string{"localstack-up:\n\tbash localstack/up.sh", "localstack-deploy: $(NPM_TOOLS)/cdk\n\tbash localstack/deploy.sh"} {
		if !strings.Contains(mk.String(), target) {
			t.Errorf("the Makefile has no %q", target)
		}
	}
}
