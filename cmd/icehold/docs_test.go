package main

import (
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every icehold command the docs name in running text (the README's
// command rows among them) is a verb of this CLI, with flags it takes; the
// docs' command blocks run in e2e's documentation tests.
func TestDocumentedCommandsExist(t *testing.T) {
	for _, bad := range [][]string{{"tables", "frop", "x"}, {"jobs", "list", "--bogus"}, {"nope"}} {
		if checkCommand(bad) == "" {
			t.Errorf("icehold %s passes the check", strings.Join(bad, " "))
		}
	}
	span := regexp.MustCompile("`(icehold [^`]+)`")
	for _, page := range []string{"../../README.md", "../../docs/operations.md", "../../docs/deploy.md"} {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(md), `\|`, "|")
		text = strings.ReplaceAll(text, "\n", " ") // spans wrapped over lines
		for _, m := range span.FindAllStringSubmatch(text, -1) {
			for _, line := range expand(strings.Fields(m[1])[1:]) {
				if err := checkCommand(line); err != "" {
					t.Errorf("%s: `%s`: %s", page, m[1], err)
				}
			}
		}
	}
}

// expand turns the words before the first argument or flag into every
// command path their a|b alternatives name.
func expand(words []string) [][]string {
	out := [][]string{nil}
	for _, w := range words {
		if strings.HasPrefix(w, "-") || !strings.Contains(w, "|") {
			for j := range out {
				out[j] = append(out[j], w)
			}
			continue
		}
		var next [][]string
		for _, alt := range strings.Split(w, "|") {
			for _, o := range out {
				next = append(next, append(append([]string(nil), o...), alt))
			}
		}
		out = next
	}
	return out
}

// checkCommand finds a command line's verb and checks its flags; "" when
// both are the CLI's.
func checkCommand(args []string) string {
	root := newRoot(io.Discard, io.Discard)
	root.InitDefaultCompletionCmd()
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err.Error()
	}
	if cmd.HasSubCommands() && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		return "no verb " + rest[0] + " of " + cmd.CommandPath()
	}
	for _, a := range rest {
		for _, f := range strings.Split(a, "|") {
			name, ok := strings.CutPrefix(f, "--")
			if !ok {
				continue
			}
			name, _, _ = strings.Cut(name, "=")
			name = strings.Trim(name, ".,;:)]")
			if name == "" || strings.ContainsAny(name, "…<[") {
				continue
			}
			if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil {
				return cmd.CommandPath() + " has no flag --" + name
			}
		}
	}
	return ""
}
