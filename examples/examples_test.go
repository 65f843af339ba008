package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/icehold/icehold/examples"
	"github.com/icehold/icehold/local/server"
)

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every Go block of the README is an example's quoted region, byte for
// byte, and every example is quoted: a snippet cannot drift from the code
// make test compiles and runs.
func TestREADMEQuotesTheExamples(t *testing.T) {
	quoted := map[string]bool{}
	for _, b := range examples.Blocks(readme(t)) {
		if b.Lang != "go" {
			continue
		}
		path, ok := strings.CutPrefix(b.Marker, "snippet: ")
		if !ok {
			t.Errorf("README line %d: a go block without <!-- snippet: examples/… --> before it (quote an example, do not write code here)", b.Line)
			continue
		}
		t.Run(path, func(t *testing.T) {
			disk, err := os.ReadFile(filepath.Join("..", path))
			if err != nil {
				t.Fatal(err)
			}
			want, err := examples.Region(string(disk))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if b.Text != want {
				t.Errorf("README line %d is not %s's region:\n--- README\n%s--- %s\n%s", b.Line, path, b.Text, path, want)
			}
			if examples.Files[path] != string(disk) {
				t.Errorf("%s is not in examples.Files (or differs from it)", path)
			}
			quoted[path] = true
		})
	}
	for path := range examples.Files {
		if !quoted[path] {
			t.Errorf("the README does not quote %s", path)
		}
	}
}

// make run's banner shows the iceberg-go example's region as it is.
func TestBannerQuotesTheExample(t *testing.T) {
	banner := server.Info{RESTURL: "http://127.0.0.1:8181", AdminToken: "tok", Catalog: "demo"}.HowTo(".icehold")
	if !strings.Contains(banner, "\n"+examples.IcebergGo+"\n") {
		t.Errorf("the banner does not quote examples/iceberg-go's region:\n%s", banner)
	}
	if !strings.Contains(banner, "ICEHOLD_URL=http://127.0.0.1:8181 ICEHOLD_TOKEN=tok ICEHOLD_CATALOG=demo "+server.ExampleCommand+"\n") {
		t.Errorf("the banner does not show how to run the example:\n%s", banner)
	}
}

// The docs cite only what the repository holds: no contract or emulator
// notes that live outside it, and every relative link resolves.
func TestDocsCiteOnlyRepositoryFiles(t *testing.T) {
	docs := docPages(t)
	outside := regexp.MustCompile(`SPEC\.md|LOCAL-AWS\.md|\.\./shared|/work/`)
	link := regexp.MustCompile(`\]\(([^)#\s]+)`)
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			if m := outside.FindString(line); m != "" {
				t.Errorf("%s:%d cites %s, which is not in the repository", doc, n+1, m)
			}
			for _, l := range link.FindAllStringSubmatch(line, -1) {
				target := l[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
					t.Errorf("%s:%d links %s, which does not exist", doc, n+1, target)
				}
			}
		}
	}
}

// docPages is every page under docs/ and the README.
func docPages(t *testing.T) []string {
	t.Helper()
	docs := []string{"../README.md"}
	err := filepath.WalkDir("../docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			docs = append(docs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// Every page under docs/ is reachable from the README by links, and none is
// longer than about 600 lines (a newcomer reads a page, not a book).
func TestDocsAreReachableAndShort(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)#\s]+)`)
	seen := map[string]bool{}
	queue := []string{filepath.Clean("../README.md")}
	for len(queue) > 0 {
		doc := queue[0]
		queue = queue[1:]
		if seen[doc] {
			continue
		}
		seen[doc] = true
		b, err := os.ReadFile(doc)
		if err != nil {
			continue // a broken link is TestDocsCiteOnlyRepositoryFiles's to report
		}
		if strings.HasSuffix(doc, ".md") && doc != filepath.Clean("../README.md") {
			if n := strings.Count(string(b), "\n"); n > 620 {
				t.Errorf("%s is %d lines: split it (about 600 at most)", doc, n)
			}
		}
		if !strings.HasSuffix(doc, ".md") {
			continue
		}
		for _, l := range link.FindAllStringSubmatch(string(b), -1) {
			if strings.Contains(l[1], "://") {
				continue
			}
			queue = append(queue, filepath.Clean(filepath.Join(filepath.Dir(doc), l[1])))
		}
	}
	for _, doc := range docPages(t) {
		if !seen[filepath.Clean(doc)] {
			t.Errorf("%s is not reachable from README.md by links", doc)
		}
	}
}
