package emulators

import (
	"encoding/json"
	"strings"
)

// Identity policies, as far as the embedded S3 evaluates them for temporary
// credentials (a role's policy and a session's): Allow and Deny statements
// on Action and Resource, with IAM's wildcards (* any run, ? one character)
// and literal forms (${*}, ${?}, ${$}), and the condition operators
// StringEquals and StringLike on request keys (s3:prefix). A statement
// with NotAction, NotResource or another operator never matches: an Allow
// the emulator cannot read grants nothing.

// iamDocument is a policy document.
type iamDocument struct {
	Statement []iamStatement `json:"Statement"`
}

type iamStatement struct {
	Effect      string                             `json:"Effect"`
	Action      stringOrList                       `json:"Action"`
	Resource    stringOrList                       `json:"Resource"`
	Condition   map[string]map[string]stringOrList `json:"Condition,omitempty"`
	NotAction   json.RawMessage                    `json:"NotAction,omitempty"`
	NotResource json.RawMessage                    `json:"NotResource,omitempty"`
	unreadable  bool
}

// UnmarshalJSON accepts a single statement where a list is expected.
func (d *iamDocument) UnmarshalJSON(b []byte) error {
	var raw struct {
		Statement json.RawMessage `json:"Statement"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw.Statement) > 0 && raw.Statement[0] == '{' {
		var one iamStatement
		if err := json.Unmarshal(raw.Statement, &one); err != nil {
			return err
		}
		d.Statement = []iamStatement{one}
		return nil
	}
	return json.Unmarshal(raw.Statement, &d.Statement)
}

// access is one permission a request needs.
type access struct {
	action, resource string
	keys             map[string]string // condition keys of the request
}

// decide is the statement's say on an access: "Allow", "Deny" or "".
func (s iamStatement) decide(a access) string {
	if s.NotAction != nil || s.NotResource != nil {
		return ""
	}
	if !anyIAMMatch(s.Action, strings.ToLower(a.action), true) || !anyIAMMatch(s.Resource, a.resource, false) {
		return ""
	}
	for op, conds := range s.Condition {
		for k, want := range conds {
			got, ok := a.keys[k]
			if !ok {
				return ""
			}
			switch op {
			case "StringEquals":
				if !contains(want, got) {
					return ""
				}
			case "StringLike":
				if !anyIAMMatch(want, got, false) {
					return ""
				}
			default:
				return ""
			}
		}
	}
	return s.Effect
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// allows: some statement allows the access and none denies it.
func (d iamDocument) allows(a access) bool {
	allowed := false
	for _, s := range d.Statement {
		switch s.decide(a) {
		case "Deny":
			return false
		case "Allow":
			allowed = true
		}
	}
	return allowed
}

func anyIAMMatch(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			p = strings.ToLower(p)
		}
		if iamMatch(iamTokens(p), s) {
			return true
		}
	}
	return false
}

// iamTokens splits a pattern into literal runes and the wildcards '*' and
// '?' (0 and 1 below); ${*}, ${?} and ${$} are literal characters.
func iamTokens(p string) []rune {
	var out []rune
	for i := 0; i < len(p); {
		switch {
		case strings.HasPrefix(p[i:], "${*}"), strings.HasPrefix(p[i:], "${?}"), strings.HasPrefix(p[i:], "${$}"):
			out = append(out, rune(p[i+2])|litFlag)
			i += 4
		case p[i] == '*':
			out = append(out, anyRun)
			i++
		case p[i] == '?':
			out = append(out, oneChar)
			i++
		default:
			out = append(out, rune(p[i])|litFlag)
			i++
		}
	}
	return out
}

const (
	anyRun  rune = 1
	oneChar rune = 2
	litFlag rune = 1 << 16 // bytes are matched as bytes: keys are the exact text
)

func iamMatch(pat []rune, s string) bool {
	if len(pat) == 0 {
		return s == ""
	}
	switch pat[0] {
	case anyRun:
		for i := 0; i <= len(s); i++ {
			if iamMatch(pat[1:], s[i:]) {
				return true
			}
		}
		return false
	case oneChar:
		return s != "" && iamMatch(pat[1:], s[1:])
	default:
		return s != "" && rune(s[0]) == pat[0]&^litFlag && iamMatch(pat[1:], s[1:])
	}
}
