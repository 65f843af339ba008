// Command lambdabuild builds functions' bootstraps as they are deployed
// (make lambdas; make bench builds them the same way for this machine):
// CGO off, -trimpath, stripped (-ldflags=-s -w), tags lambda.norpc (no RPC
// shim in aws-lambda-go) and grpcnotrace, against iceberg-go with its
// Substrait registry built on first use (patch.go). Why each:
// docs/design/infra.md, Lean functions.
//
//	go run ./tools/lambdabuild [-goos linux] [-arch arm64] [-o dist] ./functions/api ...
//
// writes <o>/<name>/bootstrap for each main package, <name> its folder's
// name.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Tags: lambda.norpc drops aws-lambda-go's net/rpc shim (provided.al2023
// speaks the Runtime API); grpcnotrace keeps gRPC-Go (linked through
// iceberg-go's Arrow dependency) from importing golang.org/x/net/trace,
// whose html/template calls methods by name and so keeps every exported
// method of every type in the binary.
const Tags = "lambda.norpc,grpcnotrace"

func main() {
	goos := flag.String("goos", "linux", "GOOS")
	arch := flag.String("arch", "arm64", "GOARCH")
	out := flag.String("o", "dist", "output folder: <o>/<name>/bootstrap")
	flag.Parse()
	if err := run(*goos, *arch, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "lambdabuild:", err)
		os.Exit(1)
	}
}

func run(goos, arch, out string, pkgs []string) error {
	if len(pkgs) == 0 {
		return fmt.Errorf("no packages to build")
	}
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	modfile, err := LeanModule(filepath.Join(out, ".lean"))
	if err != nil {
		return err
	}
	for _, p := range pkgs {
		name := filepath.Base(p)
		fmt.Println("build", name)
		cmd := exec.Command("go", "build", "-modfile", modfile, "-tags", Tags, "-trimpath", "-ldflags=-s -w",
			"-o", filepath.Join(out, name, "bootstrap"), p)
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+arch, "CGO_ENABLED=0")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// LeanModule writes, under dir, a copy of the main module's go.mod and
// go.sum that replace iceberg-go with a patched copy of the version
// go.mod requires (Patch), and returns the go.mod's path (go build
// -modfile). The repository's own go.mod is untouched: tests and local
// builds use iceberg-go as released.
func LeanModule(dir string) (string, error) {
	gomod, err := goOutput("env", "GOMOD")
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not in a module (go env GOMOD: %q, %v)", gomod, err)
	}
	// A clean module cache has no copy yet: download the version go.mod
	// requires (a no-op when it is there).
	if _, err := goOutput("mod", "download", IcebergGo); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", IcebergGo, err)
	}
	src, err := goOutput("list", "-m", "-f", "{{.Dir}}", IcebergGo)
	if err != nil || src == "" {
		return "", fmt.Errorf("%s: no module directory (%v)", IcebergGo, err)
	}
	copyDir := filepath.Join(dir, "iceberg-go")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := copyTree(src, copyDir); err != nil {
		return "", err
	}
	if err := Patch(copyDir); err != nil {
		return "", err
	}
	mod, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	if strings.Contains(string(mod), "replace "+IcebergGo) {
		return "", fmt.Errorf("go.mod already replaces %s", IcebergGo)
	}
	mod = append(mod, []byte("\nreplace "+IcebergGo+" => "+copyDir+"\n")...)
	sum, err := os.ReadFile(strings.TrimSuffix(gomod, ".mod") + ".sum")
	if err != nil {
		return "", err
	}
	modfile := filepath.Join(dir, "go.mod")
	if err := os.WriteFile(modfile, mod, 0o644); err != nil {
		return "", err
	}
	return modfile, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644)
}

func goOutput(args ...string) (string, error) {
	out, err := exec.Command("go", args...).Output()
	return strings.TrimSpace(string(out)), err
}

// copyTree copies a module's files (the module cache's are read-only:
// the copies are writable, so the next build can remove them).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
}
