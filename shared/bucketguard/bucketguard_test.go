package bucketguard

import (
	"strings"
	"testing"
)

// Preflight's reading of a brought bucket's policy: the guard itself
// passes; a policy without it, or whose Deny would stop icehold's own
// purge, is named action by action.
func TestMissing(t *testing.T) {
	const del = "arn:aws:iam::123456789012:role/Icehold-DeleteFnRole"
	cases := []struct {
		name, policy string
		want         []string // substrings, one per missing item
	}{
		{"the guard", Policy("aws", "wh", []string{del, "arn:aws:iam::123456789012:role/break-glass"}, []string{"arn:aws:iam::123456789012:role/cdk-exec"}), nil},
		{"no policy", "", []string{"a bucket policy"}},
		{"only SSL", `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::wh/*","Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`,
			[]string{"s3:DeleteObjectVersion", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"}},
		{"another bucket's guard", Policy("aws", "other", []string{del}, nil), []string{"s3:DeleteObjectVersion", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"}},
		{"the guard without icehold's role", Policy("aws", "wh", []string{"arn:aws:iam::123456789012:role/someone"}, nil), []string{"does not exempt", "does not exempt", "does not exempt", "does not exempt", "does not exempt"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Missing(c.policy, "aws", "wh", []string{del})
			if len(got) != len(c.want) {
				t.Fatalf("Missing = %q, want %d items like %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("item %d %q, want it to name %q", i, got[i], w)
				}
			}
		})
	}
}

// A deleter given by role name (preflight knows the deployed delete role's
// name, not its account) is found among the exempt ARNs.
func TestMissingByRoleName(t *testing.T) {
	policy := Policy("aws", "wh", []string{"arn:aws:iam::123456789012:role/Icehold-DeleteFnRole"}, nil)
	if got := Missing(policy, "aws", "wh", []string{"Icehold-DeleteFnRole"}); len(got) != 0 {
		t.Errorf("Missing = %q, want nothing", got)
	}
	if got := Missing(policy, "aws", "wh", []string{"Other-DeleteFnRole"}); len(got) != 5 {
		t.Errorf("Missing = %q, want the five Denies not exempting the role", got)
	}
}

// The guard names the bucket in its partition: in China's or GovCloud's a
// guard spelled arn:aws:s3::: would name no bucket there and deny nothing.
func TestGuardInItsPartition(t *testing.T) {
	const del = "arn:aws-cn:iam::123456789012:role/Icehold-DeleteFnRole"
	for _, r := range Rules("aws-cn", "wh", []string{del}, nil) {
		if !strings.HasPrefix(r.Resource, "arn:aws-cn:s3:::wh") {
			t.Errorf("%s on %s, want the bucket's aws-cn ARN", r.Sid, r.Resource)
		}
	}
	policy := Policy("aws-cn", "wh", []string{del}, nil)
	if got := Missing(policy, "aws-cn", "wh", []string{del}); len(got) != 0 {
		t.Errorf("Missing in aws-cn = %q, want nothing", got)
	}
	if got := Missing(Policy("aws", "wh", []string{del}, nil), "aws-cn", "wh", []string{del}); len(got) != 5 {
		t.Errorf("an aws-spelled guard on an aws-cn bucket: Missing = %q, want all five Denies", got)
	}
	for region, want := range map[string]string{"us-east-1": "aws", "eu-west-3": "aws", "cn-north-1": "aws-cn", "cn-northwest-1": "aws-cn",
		"us-gov-west-1": "aws-us-gov", "us-iso-east-1": "aws-iso", "us-isob-east-1": "aws-iso-b", "": "aws"} {
		if got := PartitionOf(region); got != want {
			t.Errorf("PartitionOf(%q) = %q, want %q", region, got, want)
		}
	}
}
