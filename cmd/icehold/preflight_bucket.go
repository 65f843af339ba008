package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/bucketguard"
)

// A bucket the operator brings (icehold:warehouse-buckets) keeps its own
// settings: the stack cannot version it nor write its policy. Preflight
// checks what the warehouse needs of it (SPEC §2, the bucket enforces the
// lifecycle): versioning on, and the guard policy (shared/bucketguard)
// exempting the deployed stack's delete role.

// bucketAPI is what the preflight asks S3 of a brought bucket.
type bucketAPI interface {
	GetBucketVersioning(context.Context, *s3.GetBucketVersioningInput, ...func(*s3.Options)) (*s3.GetBucketVersioningOutput, error)
	GetBucketPolicy(context.Context, *s3.GetBucketPolicyInput, ...func(*s3.Options)) (*s3.GetBucketPolicyOutput, error)
}

// bucketClient builds the S3 client and names the partition of its
// region (tests replace it).
var bucketClient = func(ctx context.Context, region, profile, endpoint string) (bucketAPI, string, error) {
	cfg, err := awsconfig.Load(ctx, awsconfig.Endpoints{Region: region, Profile: profile})
	if err != nil {
		return nil, "", err
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint, o.UsePathStyle = aws.String(endpoint), true
		}
	}), bucketguard.PartitionOf(cfg.Region), nil
}

// broughtBuckets are the buckets a template names but does not make (its
// WarehouseBuckets output is then a plain list), and the logical id of
// the delete function's role.
func broughtBuckets(template []byte) (buckets []string, deleteRole string, err error) {
	var t struct {
		Resources map[string]struct{ Type string }
		Outputs   map[string]struct{ Value any }
	}
	if err := json.Unmarshal(template, &t); err != nil {
		return nil, "", err
	}
	if v, ok := t.Outputs["WarehouseBuckets"].Value.(string); ok {
		for _, b := range strings.Split(v, ",") {
			if b = strings.TrimSpace(b); b != "" {
				buckets = append(buckets, b)
			}
		}
	}
	for id, r := range t.Resources {
		if r.Type == "AWS::IAM::Role" && strings.HasPrefix(id, "DeleteFnServiceRole") {
			deleteRole = id
		}
	}
	return buckets, deleteRole, nil
}

// deployedRoleName is the physical name of a role of the deployed stack
// ("" when the stack or the role is not deployed yet).
func deployedRoleName(ctx context.Context, sc stackAPI, stack, logicalID string) (string, error) {
	if logicalID == "" {
		return "", nil
	}
	res, err := sc.DescribeStackResource(ctx, &cloudformation.DescribeStackResourceInput{StackName: aws.String(stack), LogicalResourceId: aws.String(logicalID)})
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationError" {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cloudformation DescribeStackResource %s %s: %w", stack, logicalID, err)
	}
	return aws.ToString(res.StackResourceDetail.PhysicalResourceId), nil
}

// errBucketUnguarded: a brought bucket lacks versioning or the guard.
var errBucketUnguarded = errors.New("a warehouse bucket does not enforce the lifecycle")

// preflightBuckets writes, for each brought bucket (of a partition: aws,
// aws-cn, ...), what it lacks; the statements to add are printed with the
// deployed delete role's name.
func preflightBuckets(ctx context.Context, w io.Writer, api bucketAPI, partition string, buckets []string, deleteRole string) error {
	bad := false
	for _, b := range buckets {
		var missing []string
		v, err := api.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(b)})
		if err != nil {
			return fmt.Errorf("s3 GetBucketVersioning %s: %w", b, err)
		}
		if v.Status != "Enabled" {
			missing = append(missing, fmt.Sprintf("versioning (it is %q): aws s3api put-bucket-versioning --bucket %s --versioning-configuration Status=Enabled", cmpOr(string(v.Status), "off"), b))
		}
		policy := ""
		out, err := api.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String(b)})
		var ae smithy.APIError
		switch {
		case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucketPolicy":
		case err != nil:
			return fmt.Errorf("s3 GetBucketPolicy %s: %w", b, err)
		default:
			policy = aws.ToString(out.Policy)
		}
		var deleters []string
		if deleteRole != "" {
			deleters = []string{deleteRole}
		}
		missing = append(missing, bucketguard.Missing(policy, partition, b, deleters)...)
		if len(missing) == 0 {
			fmt.Fprintf(w, "bucket %s: versioned, and its policy lets only icehold's deleting roles remove versions or change versioning, lifecycle or the policy\n", b)
			continue
		}
		bad = true
		fmt.Fprintf(w, "bucket %s does not enforce the lifecycle (an engine's delete or overwrite could destroy a committed file); it lacks:\n", b)
		for _, m := range missing {
			fmt.Fprintf(w, "  - %s\n", m)
		}
		role := "arn:" + partition + ":iam::<account>:role/" + cmpOr(deleteRole, "<the stack's DeleteFnServiceRole, once deployed>")
		fmt.Fprintf(w, "  the statements to add to its policy (name your break-glass role beside the delete role):\n  %s\n", bucketguard.Policy(partition, b, []string{role}, nil))
	}
	if bad {
		return errBucketUnguarded
	}
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
