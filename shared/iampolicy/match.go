// Package iampolicy is IAM's pattern language and the part of its policy
// language icehold evaluates: the one matcher behind the catalog's pattern
// grants (shared/authz) and every local stand-in's policy evaluation
// (local/emulators), so that what decides access is one specification.
//
// A pattern is IAM's: '*' matches any run of characters ('/' included, the
// empty run too), '?' exactly one character, and ${*}, ${?} and ${$} are
// the literal characters '*', '?' and '$'; every other character stands
// for itself. Characters are Unicode code points of UTF-8 text; a byte that
// is not part of valid UTF-8 counts as one character and matches only
// itself.
package iampolicy

import (
	"strings"
	"unicode/utf8"
)

// Pattern is a compiled IAM pattern.
type Pattern struct {
	toks []token
	wild bool
}

type tokenKind uint8

const (
	literal tokenKind = iota // one character, lit
	anyRun                   // *
	oneChar                  // ?
)

type token struct {
	kind tokenKind
	lit  string
}

// literalForms are IAM's spellings of the characters that are otherwise
// wildcards or the start of a variable.
var literalForms = []string{"${*}", "${?}", "${$}"}

// Compile reads an IAM pattern (see the package comment); every string is
// one.
func Compile(p string) Pattern {
	var out Pattern
	for i := 0; i < len(p); {
		if lit, ok := literalAt(p, i); ok {
			out.toks = append(out.toks, token{kind: literal, lit: lit})
			i += len("${*}")
			continue
		}
		switch p[i] {
		case '*':
			out.toks = append(out.toks, token{kind: anyRun})
			out.wild = true
			i++
		case '?':
			out.toks = append(out.toks, token{kind: oneChar})
			out.wild = true
			i++
		default:
			w := charWidth(p[i:])
			out.toks = append(out.toks, token{kind: literal, lit: p[i : i+w]})
			i += w
		}
	}
	return out
}

// literalAt: p holds one of the literal forms at i; lit is its character.
func literalAt(p string, i int) (string, bool) {
	for _, f := range literalForms {
		if strings.HasPrefix(p[i:], f) {
			return f[2:3], true
		}
	}
	return "", false
}

// charWidth is the length in bytes of the character s starts with: a code
// point's encoding, or 1 for a byte that is not valid UTF-8.
func charWidth(s string) int {
	_, w := utf8.DecodeRuneInString(s)
	return w
}

// Wild reports whether the pattern holds a wildcard: without one it
// matches exactly one string.
func (p Pattern) Wild() bool { return p.wild }

// Match reports whether s is one of the strings the pattern stands for.
// It walks s once, going back only to the last '*' (the classic wildcard
// match, exact because every other token takes exactly one character):
// O(len(p)·len(s)) at worst, no backtracking blow-up, nothing to compile.
func (p Pattern) Match(s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0 // the last '*' seen, and where in s its run ends now
	for si < len(s) {
		if pi < len(p.toks) {
			t := p.toks[pi]
			switch t.kind {
			case anyRun:
				star, mark = pi, si
				pi++
				continue
			case oneChar:
				pi++
				si += charWidth(s[si:])
				continue
			case literal:
				if w := charWidth(s[si:]); s[si:si+w] == t.lit {
					pi++
					si += w
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the last '*' take one more character and try again from there.
		mark += charWidth(s[mark:])
		pi, si = star+1, mark
	}
	for pi < len(p.toks) && p.toks[pi].kind == anyRun {
		pi++
	}
	return pi == len(p.toks)
}

// Literal is the one string a pattern without wildcards matches (false
// when it has a wildcard).
func (p Pattern) Literal() (string, bool) {
	if p.wild {
		return "", false
	}
	var b strings.Builder
	for _, t := range p.toks {
		b.WriteString(t.lit)
	}
	return b.String(), true
}

// Match reports whether s fits the IAM pattern.
func Match(pattern, s string) bool { return Compile(pattern).Match(s) }

// HasWildcard reports whether the IAM pattern holds a '*' or '?' that is
// not one of the literal forms.
func HasWildcard(pattern string) bool { return Compile(pattern).Wild() }

var escaper = strings.NewReplacer("$", "${$}", "*", "${*}", "?", "${?}")

// Escape is the pattern that matches s and nothing else: '*', '?' and '$'
// written in their literal forms (a key or a name holding a '*' must not
// widen a policy or a grant to its siblings).
func Escape(s string) string { return escaper.Replace(s) }
