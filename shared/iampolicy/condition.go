package iampolicy

import (
	"slices"
	"strings"
)

// Conditions, as IAM evaluates them (IAM JSON policy elements: Condition
// operators): a statement applies when every operator's test of every key
// it names holds. A test of a key the request does not carry is false,
// except that a negated operator (StringNotEquals, StringNotLike,
// ArnNotEquals, ArnNotLike) holds then, an ...IfExists operator holds
// then whatever it tests, and Null tests presence itself ("true": the key
// is absent). Several values for one key: a positive operator holds when
// one of them matches, a negated one when none does. Condition key names
// are case-insensitive.
//
// The operators read: StringEquals, StringNotEquals, their IgnoreCase
// forms, StringLike, StringNotLike, ArnEquals, ArnLike, ArnNotEquals,
// ArnNotLike (ARNs matched segment by segment: a wildcard never spans a
// ':' of the first five), Bool, and Null; each with IfExists but Null.
// Any other (Numeric*, Date*, IpAddress, ForAllValues:..., ForAnyValue:...)
// makes the statement unreadable: it never applies.

// operator is a condition operator read: its test of one request value
// against one policy value, and whether it is negated.
type operator struct {
	match   func(want, got string) bool
	negated bool
}

var operators = map[string]operator{
	"StringEquals":              {match: func(w, g string) bool { return w == g }},
	"StringNotEquals":           {match: func(w, g string) bool { return w == g }, negated: true},
	"StringEqualsIgnoreCase":    {match: strings.EqualFold},
	"StringNotEqualsIgnoreCase": {match: strings.EqualFold, negated: true},
	"StringLike":                {match: Match},
	"StringNotLike":             {match: Match, negated: true},
	"ArnEquals":                 {match: arnMatch},
	"ArnLike":                   {match: arnMatch},
	"ArnNotEquals":              {match: arnMatch, negated: true},
	"ArnNotLike":                {match: arnMatch, negated: true},
	"Bool":                      {match: strings.EqualFold},
}

// conditionHolds is one operator's test of one key: want are the policy's
// values, got the request's (present false: the request lacks the key).
// ok is false for an operator this package does not read.
func conditionHolds(op string, want []string, got string, present bool) (holds, ok bool) {
	if op == "Null" {
		// "true": the key is absent; "false": present.
		return slices.ContainsFunc(want, func(w string) bool { return strings.EqualFold(w, "true") != present }), true
	}
	base, ifExists := strings.CutSuffix(op, "IfExists")
	o, ok := operators[base]
	if !ok {
		return false, false
	}
	if !present {
		return ifExists || o.negated, true
	}
	matched := slices.ContainsFunc(want, func(w string) bool { return o.match(w, got) })
	return matched != o.negated, true
}

// arnMatch matches an ARN against an ARN pattern as ArnLike does: both
// have six ':'-separated segments (the sixth, the resource, may hold ':'),
// each matched by its pattern segment with IAM's wildcards, so a '*'
// never spans a segment.
func arnMatch(pattern, arn string) bool {
	p, a := strings.SplitN(pattern, ":", 6), strings.SplitN(arn, ":", 6)
	if len(p) != 6 || len(a) != 6 {
		return false
	}
	for i := range p {
		if !Match(p[i], a[i]) {
			return false
		}
	}
	return true
}

// conditionsHold reports whether every condition of a statement holds for
// the request's keys; ok is false when one is not readable.
func conditionsHold(conds map[string]map[string]StringOrList, keys map[string]string) (holds, ok bool) {
	holds = true
	for op, tests := range conds {
		for k, want := range tests {
			got, present := lookupKey(keys, k)
			h, ok := conditionHolds(op, want, got, present)
			if !ok {
				return false, false
			}
			holds = holds && h
		}
	}
	return holds, true
}

// lookupKey finds a condition key; key names are case-insensitive.
func lookupKey(keys map[string]string, k string) (string, bool) {
	if v, ok := keys[k]; ok {
		return v, true
	}
	for name, v := range keys {
		if strings.EqualFold(name, k) {
			return v, true
		}
	}
	return "", false
}
