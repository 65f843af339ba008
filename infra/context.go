package infra

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// The context values of the stack (`cdk deploy -c key=value`, or cdk.json's
// "context"): docs/operations.md, Deploy.
const (
	CtxStackName      = "icehold:stack-name"
	CtxAssets         = "icehold:assets"
	CtxAdmins         = "icehold:admins"
	CtxDefaultCatalog = "icehold:default-catalog"
	// CtxDeleteReserved reserves concurrency for the delete function
	// (default: none; docs/design/infra.md, Delete function concurrency).
	CtxDeleteReserved = "icehold:delete-reserved-concurrency"
	// CtxWarehouseBuckets: existing buckets (names or ARNs, comma-separated)
	// the catalogs' warehouses lie in; default: the stack makes one.
	CtxWarehouseBuckets = "icehold:warehouse-buckets"
	// CtxKMSKey: a customer managed KMS key (its key ARN) for the buckets'
	// SSE-KMS, the table and the queues; default: AWS-owned keys.
	CtxKMSKey = "icehold:kms-key"
	// CtxAPIRate, CtxAPIBurst: the API stage's throttling (requests/s, burst).
	CtxAPIRate  = "icehold:api-rate"
	CtxAPIBurst = "icehold:api-burst"
	// CtxAccessLogDays: how long the API's access log group keeps entries.
	CtxAccessLogDays = "icehold:access-log-days"
	// CtxAPI: the front door: http (default; an HTTP API), rest (a REST
	// API: WAF, a private endpoint, a resource policy), or both (the
	// switch from one to the other: docs/operations.md, Upgrade notes).
	CtxAPI = "icehold:api"
	// CtxArch: the functions' architecture, arm64 (default) or x86_64; it
	// must match make lambdas' LAMBDA_ARCH (LocalStack on an x86 host runs
	// x86_64 functions natively, arm64 ones only under emulation).
	CtxArch = "icehold:arch"
	// CtxBreakGlassRole: a role ARN the warehouse bucket's guard policy
	// exempts beside icehold's delete role (docs/design/infra.md, the
	// warehouse bucket); default none.
	CtxBreakGlassRole = "icehold:break-glass-role"
)

// Defaults of the API's edge: a stage-wide steady rate and burst that keep a
// runaway client from taking the account's Lambda concurrency (each request
// is one invocation of a function answering in well under a second), and a
// year of access logs.
const (
	DefaultAPIRate       = 100
	DefaultAPIBurst      = 200
	DefaultAccessLogDays = 365
)

// The front doors CtxAPI chooses between.
const (
	APIHTTP = "http"
	APIREST = "rest"
	APIBoth = "both"
)

// minDeleteReserved: a reservation leaves room for the state machine's
// finalize invocations (finalizeHeadroom) and at least the event source
// mapping's smallest maximum concurrency (2).
const minDeleteReserved = finalizeHeadroom + 2

var (
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
	bucketARN  = regexp.MustCompile(`^arn:aws[a-z-]*:s3:::([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])$`)
	// IAM authorizes a KMS action on the key's ARN: an alias ARN never matches.
	keyARN = regexp.MustCompile(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$`)
	// aws:PrincipalArn names a role by its role ARN (path included).
	roleARN = regexp.MustCompile(`^arn:aws[a-z-]*:iam::[0-9]{12}:role/[\w+=,.@/-]+$`)
)

// StackName is the stack's name from the context (default Icehold).
func StackName(node constructs.Node) string { return ctxString(node, CtxStackName, "Icehold") }

// FromContext reads the stack's settings from the CDK context; a malformed
// value is an error naming its key, so a synth fails before a deploy does.
func FromContext(node constructs.Node) (Props, error) {
	p := Props{
		AssetsDir:      ctxString(node, CtxAssets, "dist"),
		DefaultCatalog: ctxString(node, CtxDefaultCatalog, ""),
		Admins:         splitList(ctxString(node, CtxAdmins, os.Getenv("ICEHOLD_ADMINS"))),
		KMSKeyARN:      ctxString(node, CtxKMSKey, ""),
		API:            ctxString(node, CtxAPI, APIHTTP),
		BreakGlassRole: ctxString(node, CtxBreakGlassRole, ""),
	}
	var err error
	if p.DeleteReservedConcurrency, err = ctxInt(node, CtxDeleteReserved, 0); err != nil {
		return p, err
	}
	if p.APIRate, err = ctxInt(node, CtxAPIRate, DefaultAPIRate); err != nil {
		return p, err
	}
	if p.APIBurst, err = ctxInt(node, CtxAPIBurst, DefaultAPIBurst); err != nil {
		return p, err
	}
	if p.AccessLogDays, err = ctxInt(node, CtxAccessLogDays, DefaultAccessLogDays); err != nil {
		return p, err
	}
	p.WarehouseBuckets = splitList(ctxString(node, CtxWarehouseBuckets, ""))
	return p, p.Validate()
}

// Validate checks the settings NewStack reads.
func (p Props) Validate() error {
	if p.DeleteReservedConcurrency < 0 {
		return fmt.Errorf("%s: %d is negative", CtxDeleteReserved, p.DeleteReservedConcurrency)
	}
	if r := p.DeleteReservedConcurrency; r != 0 && r < minDeleteReserved {
		return fmt.Errorf("%s: %d leaves the delete function no room: at least %d (%d for the state machine's finalize steps, 2 for the queue), or 0 for no reservation",
			CtxDeleteReserved, r, minDeleteReserved, finalizeHeadroom)
	}
	for _, b := range p.WarehouseBuckets {
		if _, err := BucketName(b); err != nil {
			return err
		}
	}
	if p.KMSKeyARN != "" && !keyARN.MatchString(p.KMSKeyARN) {
		return fmt.Errorf("%s: %q is not a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>; IAM does not authorize by alias)", CtxKMSKey, p.KMSKeyARN)
	}
	if p.BreakGlassRole != "" && !roleARN.MatchString(p.BreakGlassRole) {
		return fmt.Errorf("%s: %q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", CtxBreakGlassRole, p.BreakGlassRole)
	}
	if p.APIRate < 1 || p.APIBurst < 1 {
		return fmt.Errorf("%s and %s must be positive, got %d and %d", CtxAPIRate, CtxAPIBurst, p.APIRate, p.APIBurst)
	}
	if p.API != APIHTTP && p.API != APIREST && p.API != APIBoth {
		return fmt.Errorf("%s: %q is none of %s, %s, %s", CtxAPI, p.API, APIHTTP, APIREST, APIBoth)
	}
	if p.AccessLogDays < 1 {
		return fmt.Errorf("%s must be positive, got %d", CtxAccessLogDays, p.AccessLogDays)
	}
	return nil
}

// BucketName is the name of a bucket given by name or by ARN.
func BucketName(b string) (string, error) {
	if m := bucketARN.FindStringSubmatch(b); m != nil {
		return m[1], nil
	}
	if bucketName.MatchString(b) {
		return b, nil
	}
	return "", fmt.Errorf("%s: %q is neither a bucket name nor an S3 bucket ARN", CtxWarehouseBuckets, b)
}

// ctxString is a context value as text (cdk.json may hold numbers).
func ctxString(node constructs.Node, key, def string) string {
	switch v := node.TryGetContext(jsii.String(key)).(type) {
	case string:
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return def
}

func ctxInt(node constructs.Node, key string, def int) (int, error) {
	s := ctxString(node, key, "")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a whole number", key, s)
	}
	return n, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
