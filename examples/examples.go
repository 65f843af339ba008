// Package examples holds programs that use icehold as a user would; the
// README and make run's banner quote their marked regions, so that what a
// user copies is code make test compiles and runs.
package examples

import (
	_ "embed"
	"fmt"
	"strings"
)

// The marker lines around the quoted part of an example (not quoted).
const (
	beginMarker = "// snippet begin\n"
	endMarker   = "// snippet end\n"
)

var (
	//go:embed iceberg-go/main.go
	icebergGo string
	//go:embed iceberg-go-sigv4/main.go
	icebergGoSigV4 string
)

// Files are the examples the README quotes, by path from the repository root.
var Files = map[string]string{
	"examples/iceberg-go/main.go":       icebergGo,
	"examples/iceberg-go-sigv4/main.go": icebergGoSigV4,
}

// IcebergGo is the quoted part of examples/iceberg-go (bearer token).
var IcebergGo = mustRegion(icebergGo)

// Region returns the text between an example's snippet markers.
func Region(src string) (string, error) {
	_, after, ok := strings.Cut(src, beginMarker)
	if !ok {
		return "", fmt.Errorf("no %q line", strings.TrimSpace(beginMarker))
	}
	region, _, ok := strings.Cut(after, endMarker)
	if !ok {
		return "", fmt.Errorf("no %q line", strings.TrimSpace(endMarker))
	}
	return strings.TrimRight(region, "\n") + "\n", nil
}

func mustRegion(src string) string {
	r, err := Region(src)
	if err != nil {
		panic(err)
	}
	return r
}

// Block is a fenced code block of a Markdown file.
type Block struct {
	// Marker is the HTML comment on the line before the fence, without
	// "<!--" and "-->" ("snippet: examples/…", "tour"), or "".
	Marker string
	Lang   string // the fence's info string: go, sh, python
	Text   string // the lines between the fences, each ending in "\n"
	Line   int    // the opening fence's line number, from 1
}

// Blocks returns the fenced (```) code blocks of a Markdown text, those
// indented in a list item too.
func Blocks(md string) []Block {
	var (
		out    []Block
		cur    *Block
		marker string
		indent string // a block in a list item is indented as the item's text
	)
	for n, line := range strings.Split(md, "\n") {
		fence := strings.TrimLeft(line, " ")
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.Text += strings.TrimPrefix(line, indent) + "\n"
		case strings.HasPrefix(fence, "```"):
			indent = line[:len(line)-len(fence)]
			cur = &Block{Marker: marker, Lang: strings.TrimSpace(fence[3:]), Line: n + 1}
		}
		marker = ""
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "<!--"); ok && strings.HasSuffix(m, "-->") {
			marker = strings.TrimSpace(strings.TrimSuffix(m, "-->"))
		}
	}
	return out
}
