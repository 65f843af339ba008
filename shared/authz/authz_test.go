package authz

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPrincipalPatterns(t *testing.T) {
	cases := []struct {
		pattern, principal string
		want               bool
	}{
		{"arn:aws:iam::1:user/alice", "arn:aws:iam::1:user/alice", true},
		{"arn:aws:iam::1:user/alice", "arn:aws:iam::1:user/alicia", false},
		{"arn:aws:sts::1:assumed-role/etl-*", "arn:aws:sts::1:assumed-role/etl-nightly/session-9", true},
		{"arn:aws:sts::1:assumed-role/etl-*", "arn:aws:sts::1:assumed-role/bi-nightly/s", false},
		{"arn:aws:iam::000000000000:*", "arn:aws:iam::000000000000:user/icehold-admin", true},
		{"arn:aws:iam::000000000000:*", "arn:aws:iam::000000000001:user/x", false},
		{"user:?ob", "user:bob", true},
		// A '*' or '?' in the principal is a character like any other (the
		// rune-based glob answered these false).
		{"*", "*a", true},
		{"user:a*", "user:a*b", true},
		{"*b", "*ab", true},
		{"a.b", "axb", false}, // regexp metacharacters are literal
		// A role ARN covers its sessions (API Gateway's userArn for an assumed role).
		{"arn:aws:iam::123456789012:role/admin", "arn:aws:sts::123456789012:assumed-role/admin/alice", true},
		{"arn:aws:iam::123456789012:role/admin", "arn:aws:sts::123456789012:assumed-role/admin2/alice", false},
		{"arn:aws:iam::123456789012:role/admin", "arn:aws:sts::210987654321:assumed-role/admin/alice", false},
		{"arn:aws:iam::123456789012:role/admin", "arn:aws:iam::123456789012:role/admin", true},
		{"arn:aws:iam::123456789012:role/ops/admin", "arn:aws:sts::123456789012:assumed-role/admin/s", true},
		{"arn:aws:iam::123456789012:role/etl-*", "arn:aws:sts::123456789012:assumed-role/etl-nightly/s", true},
		{"arn:aws:iam::123456789012:role/etl-*", "arn:aws:sts::123456789012:assumed-role/bi/s", false},
		{"arn:aws:iam::123456789012:role/team/*", "arn:aws:sts::123456789012:assumed-role/other/s", false},
		{"arn:aws-us-gov:iam::123456789012:role/admin", "arn:aws-us-gov:sts::123456789012:assumed-role/admin/s", true},
		{"arn:aws:iam::123456789012:role/admin", "arn:aws:iam::123456789012:user/admin", false},
	}
	for _, c := range cases {
		t.Run(c.pattern+" "+c.principal, func(t *testing.T) {
			if got := matches(c.pattern, c.principal); got != c.want {
				t.Errorf("matches = %v, want %v", got, c.want)
			}
		})
	}
}

func TestValidatePrincipal(t *testing.T) {
	good := []string{"user:alice", "arn:aws:sts::123456789012:assumed-role/etl/s", "user:a*", "user:é", "user:${*}", strings.Repeat("a", MaxPrincipalBytes)}
	bad := []string{"", "user:a\x00b", "user:a\nb", "user:a\x7fb", "user:a\u0085b", "user:a b", "user:a\tb", "user:a\u2028b",
		"user:\xfe", "user:\xff", "user:\xc0", "user:\ufffd", strings.Repeat("a", MaxPrincipalBytes+1)}
	for _, p := range good {
		if err := ValidatePrincipal(p); err != nil {
			t.Errorf("ValidatePrincipal(%q): %v", p, err)
		}
	}
	for _, p := range bad {
		if err := ValidatePrincipal(p); !errors.Is(err, ErrBadPrincipal) {
			t.Errorf("ValidatePrincipal(%q) = %v, want ErrBadPrincipal", p, err)
		}
	}
}

// A name is stored as the pattern that matches only it; a pattern as given.
func TestGranteeKey(t *testing.T) {
	cases := []struct {
		who    Grantee
		caller string
		want   bool
	}{
		{Grantee{Principal: "user:a*"}, "user:a*", true},
		{Grantee{Principal: "user:a*"}, "user:a.b", false},
		{Grantee{Principal: "user:a*", Pattern: true}, "user:a.b", true},
		{Grantee{Principal: "user:a$b"}, "user:a$b", true},
		{Grantee{Principal: "user:${*}"}, "user:${*}", true},
		{Grantee{Principal: "user:${*}"}, "user:*", false},
	}
	for _, c := range cases {
		if got := matches(c.who.Key(), c.caller); got != c.want {
			t.Errorf("%+v (key %q) matches %q = %v, want %v", c.who, c.who.Key(), c.caller, got, c.want)
		}
		if got := slices.Contains(lookupKeys(c.caller), c.who.Key()); got != (c.want && !Indexed(c.who.Key())) {
			t.Errorf("%+v: found by key for %q = %v", c.who, c.caller, got)
		}
	}
}
