package examples_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every "SPEC §N" the code and the docs cite is a section of docs/spec.md,
// the product contract users have: a reference never points outside the
// repository.
func TestSpecReferencesResolve(t *testing.T) {
	spec, err := os.ReadFile("../docs/spec.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## ([0-9]+)\. `).FindAllStringSubmatch(string(spec), -1) {
		sections[m[1]] = true
	}
	if len(sections) == 0 {
		t.Fatal("docs/spec.md has no numbered sections")
	}
	sections["N"] = true // "SPEC §N": a section in general
	ref := regexp.MustCompile(`SPEC §([0-9]+|N)?`)
	cited := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "spec_test.go" {
			return nil // this test's own patterns
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".npm", "node_modules", "cdk.out", "dist", ".icehold":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".yaml", ".json", ".sh", ".asl":
		default:
			if filepath.Base(path) != "Makefile" {
				return nil
			}
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, m := range ref.FindAllStringSubmatch(line, -1) {
				cited++
				if !sections[m[1]] {
					t.Errorf("%s:%d cites %q: docs/spec.md has no section %q", path, i+1, m[0], m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d references to %d sections", cited, len(sections))
}
