package iampolicy

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference is the pattern's regular-expression translation, the
// specification Match must equal: ^…$, '*' as .*, '?' as one character
// (. with s: a newline too), the literal forms and everything else quoted.
func reference(pattern string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i := 0; i < len(pattern); {
		if lit, ok := literalAt(pattern, i); ok {
			b.WriteString(regexp.QuoteMeta(lit))
			i += 4
			continue
		}
		switch c := pattern[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		default:
			_, w := utf8.DecodeRuneInString(pattern[i:])
			b.WriteString(regexp.QuoteMeta(pattern[i : i+w]))
			i += w
			continue
		}
		i++
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// words are every sequence of up to n items of alphabet, joined.
func words(alphabet []string, n int) []string {
	out := []string{""}
	level := []string{""}
	for range n {
		var next []string
		for _, w := range level {
			for _, a := range alphabet {
				next = append(next, w+a)
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// Every pattern and subject over small alphabets, up to length 5: Match
// says what the regular expression says. Each set takes the alphabets
// that exercise one thing: the wildcards against subjects holding the
// wildcard characters themselves (the rune-based matcher this replaced
// answered glob("*", "*a") false), the literal forms, malformed literal
// forms ("${", "$*", "{*}"), and characters of two bytes.
func TestMatchEqualsItsRegexp(t *testing.T) {
	sets := []struct {
		name               string
		patterns, subjects []string
	}{
		{"wildcards", words([]string{"a", "*", "?"}, 5), words([]string{"a", "b", "*"}, 5)},
		{"literal forms", words([]string{"*", "${*}", "${?}", "${$}"}, 5), words([]string{"*", "?", "$"}, 5)},
		{"malformed literal forms", words([]string{"$", "{", "}", "*"}, 5), words([]string{"$", "{", "}", "*"}, 3)},
		{"two-byte characters", words([]string{"é", "?", "*"}, 5), words([]string{"é", "a"}, 5)},
	}
	pairs := 0
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			failures := 0
			for _, p := range set.patterns {
				re, m := reference(p), Compile(p)
				for _, s := range set.subjects {
					pairs++
					if got, want := m.Match(s), re.MatchString(s); got != want && failures < 20 {
						failures++
						t.Errorf("Match(%q, %q) = %v, its regexp %s says %v", p, s, got, re, want)
					}
				}
			}
		})
	}
	t.Logf("%d pattern/subject pairs", pairs)
}

func TestMatchExamples(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "*a", true}, // the old glob's false negative
		{"a*", "a*b", true},
		{"arn:aws:sts::1:assumed-role/etl-*", "arn:aws:sts::1:assumed-role/etl-nightly/s", true},
		{"arn:aws:sts::1:assumed-role/etl-*", "arn:aws:sts::1:assumed-role/bi/s", false},
		{"user:?ob", "user:bob", true},
		{"user:?ob", "user:éob", true}, // one character, two bytes
		{"a.b", "axb", false},
		{"a${*}", "a*", true},
		{"a${*}", "ab", false},
		{"a${?}", "ab", false},
		{"${$}{*}", "${*}", true}, // $, {, any run, }
		{"${$}{*}", "${x}", true},
		{"${", "${", true},
		{"a\xfe", "a\xfe", true},      // an invalid byte is one character, itself
		{"a?", "a\xfe", true},         // ... that ? takes
		{"a\xc3", "a\xc3\xa9", false}, // a lone lead byte is not the start of é
		{"a*", "a\xc3\xa9\xfe", true},
		{"", "", true},
		{"", "a", false},
		{"?", "", false},
	}
	for _, c := range cases {
		if got := Match(c.pattern, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.s, got, c.want)
		}
	}
}

// Escape makes the one pattern that matches exactly its string.
func TestEscape(t *testing.T) {
	for _, s := range []string{"", "a", "user:a*", "a?b", "${*}", "${$}", "$${?}", "a$", "é*\xfe"} {
		p := Compile(Escape(s))
		if lit, ok := p.Literal(); !ok || lit != s {
			t.Errorf("Escape(%q) = %q reads as %q, %v", s, Escape(s), lit, ok)
		}
		for _, other := range []string{s + "x", "x" + s, strings.ReplaceAll(s, "*", "x")} {
			if other != s && p.Match(other) {
				t.Errorf("Escape(%q) = %q matches %q", s, Escape(s), other)
			}
		}
	}
	if HasWildcard(Escape("a*?")) || !HasWildcard("a*") || !HasWildcard("a${*}?") {
		t.Error("HasWildcard reads the literal forms wrong")
	}
}

func FuzzMatch(f *testing.F) {
	for _, seed := range [][2]string{{"*", "*a"}, {"a*b?c", "aXXbYc"}, {"${*}*", "**"}, {"?é", "xé"}, {"${$}{?}", "${?}"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 64 {
			return // the regexp's cost, not the matcher's
		}
		got := Match(pattern, s)
		if utf8.ValidString(pattern) && utf8.ValidString(s) {
			if want := reference(pattern).MatchString(s); got != want {
				t.Fatalf("Match(%q, %q) = %v, its regexp says %v", pattern, s, got, want)
			}
		}
		if !Match(Escape(s), s) || Match(Escape(s), s+"x") {
			t.Fatalf("Escape(%q) = %q does not match exactly its string", s, Escape(s))
		}
		if lit, ok := Compile(pattern).Literal(); ok && (!got) != (lit != s) {
			t.Fatalf("the literal pattern %q (%q) and Match(%q) disagree: %v", pattern, lit, s, got)
		}
	})
}
