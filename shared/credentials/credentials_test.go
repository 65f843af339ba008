package credentials

import (
	"errors"
	"strings"
	"testing"

	"github.com/icehold/icehold/shared/objects"
)

// A session policy fits STS's 2,048 characters for table locations of
// ordinary length (the old-location read-only prefixes included), and one
// that would not is refused by name, not sent to STS to fail there: S3
// keys reach 1,024 bytes, which no session policy of two mentions fits.
func TestPolicySize(t *testing.T) {
	loc := func(n int) objects.Location {
		return objects.Location{Bucket: "icehold-warehouse-123456789012-us-east-1", Key: strings.Repeat("k", n)}
	}
	cases := []struct {
		name  string
		scope Scope
		fits  bool
	}{
		{"a typical table", Scope{Write: []objects.Location{{Bucket: "icehold-warehouse", Key: "demo/sales/orders-6d6c2171-1a81-4147-a503-6b1c88da5519"}}}, true},
		{"600-byte location", Scope{Write: []objects.Location{loc(600)}}, true},
		{"two 250-byte locations", Scope{Write: []objects.Location{loc(250)}, Read: []objects.Location{loc(250)}}, true},
		{"the longest S3 key", Scope{Write: []objects.Location{loc(1024)}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Policy(c.scope)
			if c.fits && (err != nil || len(p) > MaxPolicyChars) {
				t.Fatalf("%d characters, %v; want a policy STS takes", len(p), err)
			}
			if !c.fits && !errors.Is(err, ErrTooLong) {
				t.Fatalf("%d characters, %v; want ErrTooLong", len(p), err)
			}
		})
	}
}

// IAM's wildcards in a key are literal in the policy: a table whose key
// holds '*' reaches no sibling.
func TestPolicyEscapesWildcards(t *testing.T) {
	p, err := Policy(Scope{Write: []objects.Location{{Bucket: "b", Key: "ns/t*"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p, `arn:aws:s3:::b/ns/t${*}/*`) || strings.Contains(p, `ns/t*/`) {
		t.Errorf("policy %s: want the key's * as ${*}", p)
	}
	if strings.Contains(p, "DeleteObject") && !strings.Contains(p, `"Deny"`) {
		t.Errorf("policy %s allows a delete", p)
	}
}
