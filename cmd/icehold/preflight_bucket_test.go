package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/shared/bucketguard"
)

// fakeBucket answers a brought bucket's versioning and policy.
type fakeBucket struct {
	status s3types.BucketVersioningStatus
	policy string // "": none
}

func (f fakeBucket) GetBucketVersioning(context.Context, *s3.GetBucketVersioningInput, ...func(*s3.Options)) (*s3.GetBucketVersioningOutput, error) {
	return &s3.GetBucketVersioningOutput{Status: f.status}, nil
}

func (f fakeBucket) GetBucketPolicy(context.Context, *s3.GetBucketPolicyInput, ...func(*s3.Options)) (*s3.GetBucketPolicyOutput, error) {
	if f.policy == "" {
		return nil, &smithy.GenericAPIError{Code: "NoSuchBucketPolicy", Message: "The bucket policy does not exist"}
	}
	return &s3.GetBucketPolicyOutput{Policy: aws.String(f.policy)}, nil
}

// Preflight of a brought bucket names what it lacks of the lifecycle's
// enforcement (versioning, each guarded action, the delete role's
// exemption) and passes a bucket that has it all.
func TestPreflightBroughtBucket(t *testing.T) {
	const role = "Icehold-DeleteFnServiceRole1234"
	guard := bucketguard.Policy("aws", "lake", []string{"arn:aws:iam::123456789012:role/" + role}, nil)
	cases := []struct {
		name   string
		bucket fakeBucket
		want   []string // "" : passes
	}{
		{"guarded", fakeBucket{status: s3types.BucketVersioningStatusEnabled, policy: guard}, nil},
		{"bare", fakeBucket{}, []string{"versioning", "s3:DeleteObjectVersion", "s3:PutBucketVersioning", "s3:PutLifecycleConfiguration", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"}},
		{"suspended", fakeBucket{status: s3types.BucketVersioningStatusSuspended, policy: guard}, []string{`versioning (it is "Suspended")`}},
		{"guard without the delete role", fakeBucket{status: s3types.BucketVersioningStatusEnabled, policy: bucketguard.Policy("aws", "lake", []string{"arn:aws:iam::123456789012:role/other"}, nil)}, []string{"does not exempt icehold's deleting role " + role}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := preflightBuckets(context.Background(), &out, c.bucket, "aws", []string{"lake"}, role)
			if c.want == nil {
				if err != nil {
					t.Errorf("%v\n%s", err, out.String())
				}
				return
			}
			if !errors.Is(err, errBucketUnguarded) {
				t.Errorf("err %v, want errBucketUnguarded\n%s", err, out.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output does not name %q:\n%s", w, out.String())
				}
			}
		})
	}
}

// Brought buckets are those a template's WarehouseBuckets output lists as
// text; a bucket the stack makes is a reference there.
func TestBroughtBuckets(t *testing.T) {
	made := `{"Resources":{"DeleteFnServiceRoleAB12":{"Type":"AWS::IAM::Role"}},"Outputs":{"WarehouseBuckets":{"Value":{"Ref":"Warehouse"}}}}`
	brought := `{"Resources":{"DeleteFnServiceRoleAB12":{"Type":"AWS::IAM::Role"}},"Outputs":{"WarehouseBuckets":{"Value":"lake, team-lake"}}}`
	if b, _, err := broughtBuckets([]byte(made)); err != nil || len(b) != 0 {
		t.Errorf("made: %v %v", b, err)
	}
	b, role, err := broughtBuckets([]byte(brought))
	if err != nil || strings.Join(b, ",") != "lake,team-lake" || role != "DeleteFnServiceRoleAB12" {
		t.Errorf("brought: %v %q %v", b, role, err)
	}
}
