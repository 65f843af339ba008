//go:build ignore

// apply applies one mutation (sim/mutations/*.mut) to a source tree:
//
//	go run sim/mutations/apply.go DIR FILE.mut
//
// A mutation is one or more blocks; each names a file, an exact text that
// must occur once in it (the anchor), and its replacement:
//
//	# what the bug is (comment lines start with #)
//	file: shared/purge/sweep.go
//	find:
//	<the exact lines>
//	replace:
//	<the lines instead>
//
// It exits 3, naming the file and the anchor, when an anchor is missing or
// ambiguous: the code moved on, and the mutation must be written again.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type block struct {
	file, find, replace string
}

func parse(raw string) ([]block, error) {
	var out []block
	var cur *block
	mode := ""
	var buf []string
	flush := func() {
		if cur == nil {
			return
		}
		text := strings.Join(buf, "\n")
		switch mode {
		case "find":
			cur.find = text
		case "replace":
			cur.replace = text
		}
		buf = nil
	}
	for _, l := range strings.Split(strings.TrimRight(raw, "\n"), "\n") {
		switch {
		case mode != "find" && mode != "replace" && strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "file: "):
			flush()
			if cur != nil {
				out = append(out, *cur)
			}
			cur, mode = &block{file: strings.TrimSpace(strings.TrimPrefix(l, "file: "))}, ""
		case l == "find:" && cur != nil:
			flush()
			mode = "find"
		case l == "replace:" && cur != nil:
			flush()
			mode = "replace"
		case mode != "":
			buf = append(buf, l)
		}
	}
	flush()
	if cur != nil {
		out = append(out, *cur)
	}
	for _, b := range out {
		if b.find == "" {
			return nil, fmt.Errorf("%s: a block without find:", b.file)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no blocks")
	}
	return out, nil
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run sim/mutations/apply.go DIR FILE.mut")
		os.Exit(2)
	}
	dir, mut := os.Args[1], os.Args[2]
	raw, err := os.ReadFile(mut)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	blocks, err := parse(string(raw))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", mut, err)
		os.Exit(2)
	}
	for _, b := range blocks {
		path := filepath.Join(dir, b.file)
		src, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "NO LONGER APPLIES: %s: %v\n", b.file, err)
			os.Exit(3)
		}
		switch n := strings.Count(string(src), b.find); n {
		case 1:
		case 0:
			fmt.Fprintf(os.Stderr, "NO LONGER APPLIES: %s no longer holds the anchor:\n%s\n", b.file, b.find)
			os.Exit(3)
		default:
			fmt.Fprintf(os.Stderr, "NO LONGER APPLIES: %s holds the anchor %d times:\n%s\n", b.file, n, b.find)
			os.Exit(3)
		}
		out := strings.Replace(string(src), b.find, b.replace, 1)
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}
