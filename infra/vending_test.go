package infra_test

import (
	"encoding/json"
	"testing"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/objects"
)

// vendingRole is the synthesized vending role's resource and its policy.
func vendingRole(t *testing.T) (map[string]any, []map[string]any) {
	t.Helper()
	id := logicalID(t, "AWS::IAM::Role", "VendingRole")
	var stmts []map[string]any
	for _, p := range resources("AWS::IAM::Policy") {
		props := p["Properties"].(map[string]any)
		for _, r := range props["Roles"].([]any) {
			if r.(map[string]any)["Ref"] == id {
				for _, st := range props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					stmts = append(stmts, st.(map[string]any))
				}
			}
		}
	}
	if len(stmts) == 0 {
		t.Fatal("the vending role has no policy")
	}
	return resources("AWS::IAM::Role")[id]["Properties"].(map[string]any), stmts
}

// The vending role trusts the api function's role alone, allows 1-hour
// sessions (role chaining's cap), and (evaluated by the IAM oracle, together with the session
// policy icehold sends) lets a session read and write its table's data and
// nothing else: no delete, no metadata file, no sibling table.
func TestVendingRole(t *testing.T) {
	props, stmts := vendingRole(t)
	trust := props["AssumeRolePolicyDocument"].(map[string]any)["Statement"].([]any)
	if len(trust) != 1 {
		t.Fatalf("trust policy %v: want one statement", trust)
	}
	principal, _ := json.Marshal(trust[0].(map[string]any)["Principal"])
	apiRole := resources("AWS::Lambda::Function")[logicalID(t, "AWS::Lambda::Function", "ApiFn")]["Properties"].(map[string]any)["Role"]
	want, _ := json.Marshal(map[string]any{"AWS": apiRole})
	if string(principal) != string(want) {
		t.Errorf("the vending role trusts %s; want the api function's role only (%s)", principal, want)
	}
	if props["MaxSessionDuration"] != float64(3600) {
		t.Errorf("MaxSessionDuration %v, want 3600 (1 hour: role chaining's cap, vended-credentials.duration's bound)", props["MaxSessionDuration"])
	}

	table := objects.Location{Bucket: server.DefaultBucket, Key: "demo/ns/t-1"}
	doc, err := credentials.Policy(credentials.Scope{Write: []objects.Location{table}})
	if err != nil {
		t.Fatal(err)
	}
	var session struct{ Statement []map[string]any }
	if err := json.Unmarshal([]byte(doc), &session); err != nil {
		t.Fatal(err)
	}
	// The oracle reads Resource as a list.
	for _, st := range session.Statement {
		if r, ok := st["Resource"].(string); ok {
			st["Resource"] = []any{r}
		}
	}
	role, sess := localPolicy(t, stmts), localPolicy(t, session.Statement)
	obj := func(k string) string { return "arn:aws:s3:::" + server.DefaultBucket + "/" + k }
	cases := []struct {
		action, resource string
		allow            bool
	}{
		{"s3:GetObject", obj("demo/ns/t-1/data/x.parquet"), true},
		{"s3:PutObject", obj("demo/ns/t-1/data/x.parquet"), true},
		{"s3:PutObject", obj("demo/ns/t-1/metadata/snap-1.avro"), true},
		{"s3:GetObject", obj("demo/ns/t-1/metadata/00001-a.metadata.json"), true},
		{"s3:PutObject", obj("demo/ns/t-1/metadata/00002-a.metadata.json"), false},
		{"s3:PutObject", obj("demo/ns/t-1/metadata/00002-a.gz.metadata.json"), false},
		{"s3:PutObject", obj("demo/ns/t-1/metadata/00002-a.metadata.json.gz"), false},
		{"s3:DeleteObject", obj("demo/ns/t-1/data/x.parquet"), false},
		{"s3:DeleteObjectVersion", obj("demo/ns/t-1/data/x.parquet"), false},
		{"s3:GetObject", obj("demo/ns/t-10/data/x.parquet"), false}, // a sibling sharing the prefix's text
		{"s3:GetObject", obj("demo/ns/u-2/data/x.parquet"), false},
		{"s3:PutObject", obj("demo/ns/u-2/data/x.parquet"), false},
	}
	for _, c := range cases {
		r := iamRequest{Action: c.action, Resource: c.resource}
		a, err1 := role.allows(r)
		b, err2 := sess.allows(r)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", r, err1, err2)
		}
		if a && b != c.allow {
			t.Errorf("%s: role %v, session %v; want allowed %v", r, a, b, c.allow)
		}
		if c.allow && !a {
			t.Errorf("%s: the role refuses what a session needs", r)
		}
	}
}
