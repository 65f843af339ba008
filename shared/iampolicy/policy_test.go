package iampolicy

import (
	"encoding/json"
	"testing"
)

func TestDocumentDecides(t *testing.T) {
	doc, err := Parse(`{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":["s3:GetObject","S3:PutObject"],"Resource":"arn:aws:s3:::b/t/*"},
		{"Effect":"Allow","Action":"s3:ListBucket","Resource":"arn:aws:s3:::b","Condition":{"StringLike":{"s3:prefix":["t/*"]}}},
		{"Effect":"Allow","Action":"s3:GetBucketLocation","Resource":"arn:aws:s3:::b","Condition":{"StringEquals":{"s3:prefix":"x"}}},
		{"Effect":"Deny","Action":"s3:PutObject","Resource":"arn:aws:s3:::*/*.metadata.json"},
		{"Effect":"Allow","NotAction":"s3:DeleteObject","Resource":"*"},
		{"Effect":"Allow","Action":"s3:DeleteObject","Resource":"*","Condition":{"NumericLessThan":{"s3:max-keys":"10"}}}
	]}`)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		r    Request
		want bool
	}{
		{"read under the prefix", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::b/t/data/x"}, true},
		{"action names fold case", Request{Action: "s3:putobject", Resource: "arn:aws:s3:::b/t/data/x"}, true},
		{"resources do not", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::B/t/data/x"}, false},
		{"a sibling", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::b/t2/x"}, false},
		{"the deny wins", Request{Action: "s3:PutObject", Resource: "arn:aws:s3:::b/t/metadata/1.metadata.json"}, false},
		{"listing the prefix", Request{Action: "s3:ListBucket", Resource: "arn:aws:s3:::b", Keys: map[string]string{"s3:prefix": "t/data/"}}, true},
		{"listing another prefix", Request{Action: "s3:ListBucket", Resource: "arn:aws:s3:::b", Keys: map[string]string{"s3:prefix": "u/"}}, false},
		{"a condition key the request lacks", Request{Action: "s3:ListBucket", Resource: "arn:aws:s3:::b"}, false},
		{"StringEquals", Request{Action: "s3:GetBucketLocation", Resource: "arn:aws:s3:::b", Keys: map[string]string{"s3:prefix": "x"}}, true},
		{"NotAction and unknown operators grant nothing", Request{Action: "s3:DeleteObject", Resource: "arn:aws:s3:::b/t/x", Keys: map[string]string{"s3:max-keys": "1"}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := doc.Allows(c.r); got != c.want {
				t.Errorf("Allows = %v, want %v", got, c.want)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for _, raw := range []string{``, `{}`, `{"Statement":[]}`, `{"Statement":{"Effect":"Maybe","Action":"*","Resource":"*"}}`, `{"Statement":[{"Effect":"Allow","Action":{"x":1}}]}`} {
		if _, err := Parse(raw); err == nil {
			t.Errorf("Parse(%s) took it", raw)
		}
	}
	d, err := Parse(`{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"*","Condition":{"Bool":{"aws:SecureTransport":false}}}}`)
	if err != nil || len(d.Statement) != 1 || d.Statement[0].Condition["Bool"]["aws:SecureTransport"][0] != "false" {
		t.Errorf("one statement with a boolean condition: %+v, %v", d, err)
	}
}

// A Principal names ARNs exactly, or every principal of an account by its
// root or id; a request without a caller is judged without it.
func TestPrincipal(t *testing.T) {
	var p Principal
	if err := json.Unmarshal([]byte(`{"AWS":["arn:aws:iam::111111111111:role/api","222222222222"],"Service":"lambda.amazonaws.com"}`), &p); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		arn  string
		want bool
	}{
		{"arn:aws:iam::111111111111:role/api", true},
		{"arn:aws:iam::111111111111:role/api2", false},
		{"arn:aws:sts::111111111111:assumed-role/api/s", true}, // the role's session
		{"arn:aws:iam::222222222222:user/x", true},
		{"arn:aws:sts::222222222222:assumed-role/r/s", true},
		{"lambda.amazonaws.com", true},
	}
	var role Principal
	if err := json.Unmarshal([]byte(`{"AWS":"arn:aws:iam::111111111111:role/team/api"}`), &role); err != nil {
		t.Fatal(err)
	}
	for arn, want := range map[string]bool{
		"arn:aws:sts::111111111111:assumed-role/api/s1":  true, // a session of the role, named without its path
		"arn:aws:sts::111111111111:assumed-role/api2/s1": false,
		"arn:aws:sts::222222222222:assumed-role/api/s1":  false,
		"arn:aws:iam::111111111111:user/api":             false,
	} {
		if got := role.Names(arn); got != want {
			t.Errorf("a role's ARN names %s: %v, want %v", arn, got, want)
		}
	}
	for _, c := range cases {
		if got := p.Names(c.arn); got != c.want {
			t.Errorf("Names(%s) = %v, want %v", c.arn, got, c.want)
		}
	}
	root := Principal{AWS: StringOrList{"arn:aws:iam::111111111111:root"}}
	if !root.Names("arn:aws:iam::111111111111:user/u") || root.Names("arn:aws:iam::333333333333:user/u") {
		t.Error("an account's root names its principals, and only them")
	}
	trust := Document{Statement: []Statement{{Effect: Allow, Principal: &root, Action: StringOrList{"sts:AssumeRole"}}}}
	if trust.Allows(Request{Action: "sts:AssumeRole", Resource: "r", Principal: "arn:aws:iam::333333333333:user/u"}) {
		t.Error("a trust policy let in a principal it does not name")
	}
	if !trust.Allows(Request{Action: "sts:AssumeRole", Resource: "r", Principal: "arn:aws:iam::111111111111:user/u"}) {
		t.Error("a trust policy without Resource kept out the account it names")
	}
	identity := Document{Statement: []Statement{{Effect: Allow, Action: StringOrList{"*"}}}}
	if identity.Allows(Request{Action: "s3:GetObject", Resource: "r"}) {
		t.Error("an identity statement without Resource allowed something")
	}
	b, _ := json.Marshal(Statement{Effect: Deny, Principal: &Principal{Any: true}, Action: StringOrList{"s3:DeleteObject"}, Resource: StringOrList{"a", "b"}})
	if string(b) != `{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":["a","b"]}` {
		t.Errorf("marshalled as %s", b)
	}
}
