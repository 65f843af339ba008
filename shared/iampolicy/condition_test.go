package iampolicy

import "testing"

// Each operator on a key the request carries, on one it lacks (IAM: false,
// but true for a negated operator, an ...IfExists one and Null "true"),
// with several values (positive: any matches; negated: none does), and the
// operators this package does not read (the statement never applies).
func TestConditionOperators(t *testing.T) {
	const role = "arn:aws:iam::111111111111:role/icehold-delete"
	cases := []struct {
		name     string
		op       string
		want     []string
		got      string
		present  bool
		holds    bool
		readable bool
	}{
		{"StringEquals equal", "StringEquals", []string{"a"}, "a", true, true, true},
		{"StringEquals is case-sensitive", "StringEquals", []string{"a"}, "A", true, false, true},
		{"StringEquals takes no wildcard", "StringEquals", []string{"a*"}, "ab", true, false, true},
		{"StringEquals one of several", "StringEquals", []string{"x", "a"}, "a", true, true, true},
		{"StringEquals absent", "StringEquals", []string{"a"}, "", false, false, true},
		{"StringNotEquals other", "StringNotEquals", []string{"a"}, "b", true, true, true},
		{"StringNotEquals equal", "StringNotEquals", []string{"a"}, "a", true, false, true},
		{"StringNotEquals one of several", "StringNotEquals", []string{"x", "a"}, "a", true, false, true},
		{"StringNotEquals absent", "StringNotEquals", []string{"a"}, "", false, true, true},
		{"StringEqualsIgnoreCase", "StringEqualsIgnoreCase", []string{"a"}, "A", true, true, true},
		{"StringNotEqualsIgnoreCase", "StringNotEqualsIgnoreCase", []string{"a"}, "A", true, false, true},
		{"StringLike", "StringLike", []string{"t/*"}, "t/data/x", true, true, true},
		{"StringLike no match", "StringLike", []string{"t/*"}, "u/x", true, false, true},
		{"StringLike absent", "StringLike", []string{"*"}, "", false, false, true},
		{"StringNotLike no match", "StringNotLike", []string{"t/*"}, "u/x", true, true, true},
		{"StringNotLike match", "StringNotLike", []string{"u/*", "t/*"}, "t/x", true, false, true},
		{"StringNotLike absent", "StringNotLike", []string{"t/*"}, "", false, true, true},
		{"ArnLike exact", "ArnLike", []string{role}, role, true, true, true},
		{"ArnLike wildcard in the resource", "ArnLike", []string{"arn:aws:iam::111111111111:role/icehold-*"}, role, true, true, true},
		{"ArnLike wildcard account", "ArnLike", []string{"arn:aws:iam::*:role/icehold-delete"}, role, true, true, true},
		{"ArnLike a wildcard spans no segment", "ArnLike", []string{"arn:aws:iam:*:role/icehold-delete"}, role, true, false, true},
		{"ArnLike needs six segments", "ArnLike", []string{"*"}, role, true, false, true},
		{"ArnLike is case-sensitive", "ArnLike", []string{"arn:aws:iam::111111111111:role/Icehold-delete"}, role, true, false, true},
		{"ArnLike another role", "ArnLike", []string{role}, "arn:aws:iam::111111111111:role/engine", true, false, true},
		{"ArnLike absent", "ArnLike", []string{role}, "", false, false, true},
		{"ArnEquals takes wildcards too", "ArnEquals", []string{"arn:aws:iam::111111111111:role/*"}, role, true, true, true},
		{"ArnNotLike the exempt role", "ArnNotLike", []string{"arn:aws:iam::1:role/break-glass", role}, role, true, false, true},
		{"ArnNotLike another role", "ArnNotLike", []string{role}, "arn:aws:iam::111111111111:role/engine", true, true, true},
		{"ArnNotLike absent", "ArnNotLike", []string{role}, "", false, true, true},
		{"ArnNotEquals", "ArnNotEquals", []string{role}, role, true, false, true},
		{"ArnNotLike a resource holding ':'", "ArnNotLike", []string{"arn:aws:s3:::b/a:*"}, "arn:aws:s3:::b/a:c", true, false, true},
		{"Bool true", "Bool", []string{"true"}, "true", true, true, true},
		{"Bool false", "Bool", []string{"false"}, "true", true, false, true},
		{"Bool case", "Bool", []string{"False"}, "false", true, true, true},
		{"Bool absent", "Bool", []string{"false"}, "", false, false, true},
		{"BoolIfExists absent", "BoolIfExists", []string{"false"}, "", false, true, true},
		{"BoolIfExists present", "BoolIfExists", []string{"false"}, "true", true, false, true},
		{"StringLikeIfExists absent", "StringLikeIfExists", []string{"t/*"}, "", false, true, true},
		{"StringLikeIfExists present", "StringLikeIfExists", []string{"t/*"}, "u/x", true, false, true},
		{"ArnNotLikeIfExists present", "ArnNotLikeIfExists", []string{role}, role, true, false, true},
		{"Null true, absent", "Null", []string{"true"}, "", false, true, true},
		{"Null true, present", "Null", []string{"true"}, "x", true, false, true},
		{"Null false, present", "Null", []string{"false"}, "x", true, true, true},
		{"Null false, absent", "Null", []string{"false"}, "", false, false, true},
		{"NullIfExists is no operator", "NullIfExists", []string{"false"}, "", false, false, false},
		{"NumericLessThan is not read", "NumericLessThan", []string{"10"}, "1", true, false, false},
		{"DateGreaterThan is not read", "DateGreaterThan", []string{"2020-01-01T00:00:00Z"}, "", false, false, false},
		{"IpAddress is not read", "IpAddress", []string{"10.0.0.0/8"}, "10.0.0.1", true, false, false},
		{"ForAllValues is not read", "ForAllValues:StringLike", []string{"*"}, "a", true, false, false},
		{"an unknown operator", "StringSomething", []string{"a"}, "a", true, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			holds, ok := conditionHolds(c.op, c.want, c.got, c.present)
			if ok != c.readable || ok && holds != c.holds {
				t.Errorf("%s %q on %q (present %v): holds %v, readable %v; want %v, %v", c.op, c.want, c.got, c.present, holds, ok, c.holds, c.readable)
			}
		})
	}
}

// The warehouse guard's shape (shared/bucketguard): a Deny to "*" unless
// aws:PrincipalArn is an exempt role. It denies every other caller, a
// request without the key too (IAM: ArnNotLike on an absent key holds),
// and never the exempt role; condition key names fold case; a statement
// with an operator this package does not read never applies.
func TestStatementConditions(t *testing.T) {
	doc, err := Parse(`{"Statement":[
		{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObjectVersion","Resource":"arn:aws:s3:::wh/*",
		 "Condition":{"ArnNotLike":{"aws:PrincipalArn":["arn:aws:iam::1:role/icehold-delete","arn:aws:iam::1:role/break-glass"]}}},
		{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::wh/*",
		 "Condition":{"Bool":{"aws:SecureTransport":"false"},"StringEquals":{"aws:PrincipalAccount":"1"}}},
		{"Effect":"Deny","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::wh/*",
		 "Condition":{"NumericLessThan":{"s3:max-keys":"10"}}}
	]}`)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name   string
		r      Request
		denied bool
	}{
		{"an engine deletes a version", Request{Action: "s3:DeleteObjectVersion", Resource: "arn:aws:s3:::wh/t/x", Keys: keys("aws:PrincipalArn", "arn:aws:iam::1:role/engine")}, true},
		{"the delete role deletes a version", Request{Action: "s3:DeleteObjectVersion", Resource: "arn:aws:s3:::wh/t/x", Keys: keys("aws:PrincipalArn", "arn:aws:iam::1:role/icehold-delete")}, false},
		{"the break-glass role", Request{Action: "s3:DeleteObjectVersion", Resource: "arn:aws:s3:::wh/t/x", Keys: keys("aws:principalarn", "arn:aws:iam::1:role/break-glass")}, false},
		{"a caller without the key", Request{Action: "s3:DeleteObjectVersion", Resource: "arn:aws:s3:::wh/t/x"}, true},
		{"another bucket", Request{Action: "s3:DeleteObjectVersion", Resource: "arn:aws:s3:::other/x", Keys: keys("aws:PrincipalArn", "arn:aws:iam::1:role/engine")}, false},
		{"both conditions of a statement hold", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::wh/x", Keys: keys("aws:SecureTransport", "false", "aws:PrincipalAccount", "1")}, true},
		{"one of them does not", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::wh/x", Keys: keys("aws:SecureTransport", "true", "aws:PrincipalAccount", "1")}, false},
		{"an unread operator never applies", Request{Action: "s3:PutObject", Resource: "arn:aws:s3:::wh/x", Keys: keys("s3:max-keys", "1")}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := doc.Denies(c.r); got != c.denied {
				t.Errorf("Denies = %v, want %v", got, c.denied)
			}
		})
	}
}
