package main

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The patch applies to the iceberg-go go.mod requires, and what it writes
// is Go that builds the collection on first use; applied to a file it has
// already changed (as to a new iceberg-go whose init differs) it refuses
// rather than build something else.
func TestPatchMakesTheSubstraitCollectionLazy(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", IcebergGo).Output()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), substraitFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, substraitFile)
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Patch(dir); err != nil {
		t.Fatalf("the patch does not apply to the iceberg-go go.mod requires: %v", err)
	}
	patched, _ := os.ReadFile(path)
	f, err := parser.ParseFile(token.NewFileSet(), path, patched, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("patched file: %v", err)
	}
	imports := map[string]bool{}
	for _, i := range f.Imports {
		imports[i.Path.Value] = true
	}
	if !imports[`"sync"`] || !strings.Contains(string(patched), "sync.OnceValue") || strings.Contains(string(patched), "func init()") {
		t.Errorf("patched file still builds the collection at init:\n%s", patched)
	}
	if err := Patch(dir); err == nil {
		t.Error("the patch applied twice: it would not notice an iceberg-go whose init changed")
	}
}
