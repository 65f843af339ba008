package credentials

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	ststypes "github.com/aws/aws-sdk-go-v2/service/sts/types"

	"github.com/icehold/icehold/shared/iampolicy"
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

type captureSTS struct{ policy string }

func (c *captureSTS) AssumeRole(_ context.Context, in *sts.AssumeRoleInput, _ ...func(*sts.Options)) (*sts.AssumeRoleOutput, error) {
	c.policy = aws.ToString(in.Policy)
	exp := time.Now().Add(time.Hour)
	return &sts.AssumeRoleOutput{Credentials: &ststypes.Credentials{AccessKeyId: aws.String("k"), SecretAccessKey: aws.String("s"),
		SessionToken: aws.String("t"), Expiration: &exp}}, nil
}

// A session policy names the bucket in the vending role's partition: in
// China's or GovCloud's, one spelled arn:aws:s3::: names no bucket, so
// every vended session there reached nothing (and its metadata-file Deny
// denied nothing).
func TestPolicyInTheRolesPartition(t *testing.T) {
	for _, partition := range []string{"aws", "aws-cn", "aws-us-gov"} {
		t.Run(partition, func(t *testing.T) {
			f := &captureSTS{}
			v := &Vendor{STS: f, RoleARN: "arn:" + partition + ":iam::123456789012:role/icehold-vending"}
			scope := Scope{Write: []objects.Location{{Bucket: "wh", Key: "cat/ns/t"}}, Read: []objects.Location{{Bucket: "wh", Key: "cat/ns/old"}}}
			if _, err := v.Vend(context.Background(), scope, "s", time.Hour); err != nil {
				t.Fatal(err)
			}
			doc, err := iampolicy.Parse(f.policy)
			if err != nil {
				t.Fatal(err)
			}
			arn := "arn:" + partition + ":s3:::"
			for _, c := range []struct {
				action, resource string
				allowed          bool
			}{
				{"s3:PutObject", arn + "wh/cat/ns/t/data/x.parquet", true},
				{"s3:GetObject", arn + "wh/cat/ns/old/data/x.parquet", true},
				{"s3:ListBucket", arn + "wh", true},
				{"s3:PutObject", arn + "wh/cat/ns/t/metadata/00001-x.metadata.json", false},
				{"s3:PutObject", arn + "wh/cat/ns/old/data/x.parquet", false},
			} {
				r := iampolicy.Request{Action: c.action, Resource: c.resource, Keys: map[string]string{"s3:prefix": "cat/ns/t/"}}
				if got := doc.Allows(r) && !doc.Denies(r); got != c.allowed {
					t.Errorf("%s on %s: allowed %v, want %v (policy %s)", c.action, c.resource, got, c.allowed, f.policy)
				}
			}
		})
	}
}
