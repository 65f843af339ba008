package iampolicy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Policies, as far as icehold evaluates them: identity policies (a user's,
// a role's, a session's), resource policies' Deny statements (a bucket
// policy) and trust policies (who may assume a role). A statement has an
// Effect, Action and Resource patterns, an optional Principal, and
// conditions on the request's keys (condition.go: the operators read and
// IAM's rules for a key the request lacks). A statement this package
// cannot read in full (NotAction, NotResource, NotPrincipal, an operator
// it does not read) never applies: an Allow it cannot read grants
// nothing, and neither does a Deny it cannot read deny.

// Document is a policy document.
type Document struct {
	Version   string      `json:"Version,omitempty"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a policy.
type Statement struct {
	Sid       string                             `json:"Sid,omitempty"`
	Effect    string                             `json:"Effect"`
	Principal *Principal                         `json:"Principal,omitempty"`
	Action    StringOrList                       `json:"Action,omitempty"`
	Resource  StringOrList                       `json:"Resource,omitempty"`
	Condition map[string]map[string]StringOrList `json:"Condition,omitempty"`
	// What this package does not evaluate: such a statement never applies.
	NotAction    json.RawMessage `json:"NotAction,omitempty"`
	NotResource  json.RawMessage `json:"NotResource,omitempty"`
	NotPrincipal json.RawMessage `json:"NotPrincipal,omitempty"`
}

// The effects.
const (
	Allow = "Allow"
	Deny  = "Deny"
)

// Request is one access a caller asks for.
type Request struct {
	Action, Resource string
	// Principal is the caller's ARN, what Principal elements name. ""
	// judges the request without them: a bucket policy's Deny of an
	// unknown caller applies to every caller, the cautious reading.
	Principal string
	// Keys are the request's condition keys (aws:PrincipalArn, s3:prefix,
	// …): a key the request lacks is absent from the map.
	Keys map[string]string
}

// Parse reads a policy document; a document without statements is an
// error (IAM's MalformedPolicyDocument).
func Parse(raw string) (Document, error) {
	var d Document
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return Document{}, err
	}
	if len(d.Statement) == 0 {
		return Document{}, fmt.Errorf("policy has no statement")
	}
	for _, s := range d.Statement {
		if s.Effect != Allow && s.Effect != Deny {
			return Document{}, fmt.Errorf("statement effect %q is neither Allow nor Deny", s.Effect)
		}
	}
	return d, nil
}

// UnmarshalJSON accepts a single statement where a list is expected.
func (d *Document) UnmarshalJSON(b []byte) error {
	var raw struct {
		Version   string          `json:"Version"`
		Statement json.RawMessage `json:"Statement"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	d.Version = raw.Version
	if len(raw.Statement) > 0 && raw.Statement[0] == '{' {
		var one Statement
		if err := json.Unmarshal(raw.Statement, &one); err != nil {
			return err
		}
		d.Statement = []Statement{one}
		return nil
	}
	return json.Unmarshal(raw.Statement, &d.Statement)
}

// Allows reports whether the document allows the request: a statement
// allows it and none denies it (IAM's evaluation within one policy).
func (d Document) Allows(r Request) bool {
	allowed := false
	for _, s := range d.Statement {
		switch s.Decide(r) {
		case Deny:
			return false
		case Allow:
			allowed = true
		}
	}
	return allowed
}

// Denies reports whether a statement of the document denies the request.
func (d Document) Denies(r Request) bool {
	return slices.ContainsFunc(d.Statement, func(s Statement) bool { return s.Decide(r) == Deny })
}

// Decide is the statement's say on a request: Allow, Deny, or "" when it
// does not apply (or cannot be read in full).
func (s Statement) Decide(r Request) string {
	if s.NotAction != nil || s.NotResource != nil || s.NotPrincipal != nil {
		return ""
	}
	if s.Principal != nil && r.Principal != "" && !s.Principal.Names(r.Principal) {
		return ""
	}
	// Action names are case-insensitive; resources are not. A statement of
	// a resource's own policy (a trust policy) may name no Resource: it is
	// about the resource it is attached to. One without a Principal may not.
	if !anyMatch(s.Action, strings.ToLower(r.Action), strings.ToLower) {
		return ""
	}
	if len(s.Resource) > 0 && !anyMatch(s.Resource, r.Resource, nil) || len(s.Resource) == 0 && s.Principal == nil {
		return ""
	}
	if holds, ok := conditionsHold(s.Condition, r.Keys); !holds || !ok {
		return ""
	}
	return s.Effect
}

func anyMatch(patterns []string, s string, fold func(string) string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool {
		if fold != nil {
			p = fold(p)
		}
		return Match(p, s)
	})
}

// Principal is a statement's Principal element: "*" (anyone), or AWS
// principals by ARN (an account's root ARN, or its 12-digit id, names every
// principal of the account, as IAM reads it) and service principals.
type Principal struct {
	Any     bool
	AWS     StringOrList
	Service StringOrList
}

// UnmarshalJSON reads "*" or {"AWS": …, "Service": …}.
func (p *Principal) UnmarshalJSON(b []byte) error {
	var star string
	if json.Unmarshal(b, &star) == nil {
		if star != "*" {
			return fmt.Errorf("principal %q: only \"*\" is a principal string", star)
		}
		p.Any = true
		return nil
	}
	var m struct {
		AWS     StringOrList `json:"AWS"`
		Service StringOrList `json:"Service"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	p.AWS, p.Service = m.AWS, m.Service
	return nil
}

// MarshalJSON writes the element back as it reads.
func (p Principal) MarshalJSON() ([]byte, error) {
	if p.Any {
		return json.Marshal("*")
	}
	m := map[string]StringOrList{}
	if len(p.AWS) > 0 {
		m["AWS"] = p.AWS
	}
	if len(p.Service) > 0 {
		m["Service"] = p.Service
	}
	return json.Marshal(m)
}

// Names reports whether the element covers the caller's ARN: exactly (no
// wildcards in a Principal, as in IAM), through its account's root, or,
// for a role's session (arn:aws:sts::A:assumed-role/NAME/SESSION), by the
// role's ARN (arn:aws:iam::A:role/PATH/NAME: a role's name is unique in
// its account whatever its path).
func (p Principal) Names(arn string) bool {
	if p.Any || slices.Contains(p.AWS, "*") {
		return true
	}
	account := AccountOf(arn)
	role, isSession := sessionRole(arn)
	for _, a := range p.AWS {
		switch {
		case a == arn:
			return true
		case account != "" && (a == account || a == "arn:"+partitionOf(arn)+":iam::"+account+":root"):
			return true
		case isSession && strings.HasPrefix(a, role.prefix) && a[strings.LastIndexByte(a, '/')+1:] == role.name:
			return true
		}
	}
	return slices.Contains(p.Service, arn)
}

type roleOf struct{ prefix, name string }

// sessionRole reads a session's ARN: the prefix of its role's ARN
// (arn:P:iam::A:role/) and the role's name.
func sessionRole(arn string) (roleOf, bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 || parts[2] != "sts" {
		return roleOf{}, false
	}
	rest, ok := strings.CutPrefix(parts[5], "assumed-role/")
	name, _, found := strings.Cut(rest, "/")
	if !ok || !found || name == "" {
		return roleOf{}, false
	}
	return roleOf{prefix: "arn:" + parts[1] + ":iam::" + parts[4] + ":role/", name: name}, true
}

// AccountOf is the account id of an IAM or STS ARN ("" if none).
func AccountOf(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" {
		return ""
	}
	return parts[4]
}

func partitionOf(arn string) string { return strings.SplitN(arn, ":", 3)[1] }

// StringOrList is IAM's "a string or a list of strings". Condition values
// may also be booleans or numbers, which IAM compares as their text.
type StringOrList []string

// UnmarshalJSON reads a scalar or a list of scalars.
func (s *StringOrList) UnmarshalJSON(b []byte) error {
	var many []json.RawMessage
	if err := json.Unmarshal(b, &many); err != nil {
		many = []json.RawMessage{b}
	}
	out := make([]string, 0, len(many))
	for _, v := range many {
		var str string
		if err := json.Unmarshal(v, &str); err == nil {
			out = append(out, str)
			continue
		}
		var scalar any
		if err := json.Unmarshal(v, &scalar); err != nil {
			return err
		}
		switch scalar.(type) {
		case bool, float64:
			out = append(out, string(v))
		default:
			return fmt.Errorf("%s is not a string, a boolean or a number", v)
		}
	}
	*s = out
	return nil
}

// MarshalJSON writes one value as a string, several as a list.
func (s StringOrList) MarshalJSON() ([]byte, error) {
	if len(s) == 1 {
		return json.Marshal(s[0])
	}
	return json.Marshal([]string(s))
}
