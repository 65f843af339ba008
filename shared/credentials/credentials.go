// Package credentials vends engines short-lived S3 credentials scoped to one
// table (the Iceberg REST spec's vended-credentials): STS AssumeRole of a
// vending role with a session policy that allows reading, writing and
// listing the table's own prefixes and nothing else. Never s3:DeleteObject
// (the catalog's pipeline is the only deleter: soft delete and legal hold
// mean nothing if an engine can delete files), never s3:PutObject of a
// metadata file (the catalog writes those under its compare-and-swap), and
// no write at all while the table is legal-held (the router vends those
// sessions read-only).
package credentials

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/icehold/icehold/shared/objects"
)

// STS is the part of the STS client the vendor uses.
type STS interface {
	AssumeRole(ctx context.Context, in *sts.AssumeRoleInput, optFns ...func(*sts.Options)) (*sts.AssumeRoleOutput, error)
}

// Bounds of a session's duration: AssumeRole takes 900 s at least, and the
// api function assumes the vending role with its own temporary credentials
// (a Lambda execution role's session), which is role chaining: STS caps
// such sessions at 1 hour whatever the role's maximum (the stack sets the
// vending role's to 1 hour to match). A session vended before a legal
// hold, a soft drop or a revoke writes until it expires: at most
// MaxDuration (the table's files keep their prior versions: repair).
const (
	MinDuration     = 15 * time.Minute
	MaxDuration     = time.Hour
	DefaultDuration = time.Hour
)

// MetadataSuffixes are the file names icehold reads as table or view
// metadata (Iceberg's NNNNN-uuid.metadata.json and .gz.metadata.json, and
// the older .metadata.json.gz): register refuses any other name, and no
// vended session or engine may write a key ending in one, so an engine can
// write no file icehold would take for metadata. S3 keys are
// case-sensitive: X.METADATA.JSON is not one of them, and register
// refuses it.
var MetadataSuffixes = []string{".metadata.json", ".metadata.json.gz"}

// IsMetadataName reports whether a location names a metadata file by
// icehold's rule (MetadataSuffixes).
func IsMetadataName(loc string) bool {
	for _, s := range MetadataSuffixes {
		if strings.HasSuffix(loc, s) {
			return true
		}
	}
	return false
}

// metadataResources are the keys of a bucket ("*" for any) of a
// partition no session writes: every name IsMetadataName accepts.
func metadataResources(partition, bucket string) []string {
	var out []string
	for _, s := range MetadataSuffixes {
		out = append(out, s3ARN(partition, bucket+"/*"+s))
	}
	return out
}

// s3ARN is an S3 resource's ARN in a partition (aws, aws-cn, aws-us-gov):
// one spelled in another partition names nothing.
func s3ARN(partition, resource string) string { return "arn:" + partition + ":s3:::" + resource }

// partitionOf is the partition an ARN names (arn:aws-cn:iam::...), aws
// when it names none.
func partitionOf(arn string) string {
	if p := strings.SplitN(arn, ":", 3); len(p) == 3 && p[0] == "arn" && p[1] != "" {
		return p[1]
	}
	return "aws"
}

// MaxPolicyChars is STS's limit on a session policy's plaintext (AssumeRole
// Policy: 2,048 characters). STS also packs the policy into a binary form
// with a limit of its own (PackedPolicyTooLarge); icehold sends no session
// tags and keeps the policy small (each prefix twice) to stay inside it.
const MaxPolicyChars = 2048

// ErrTooLong: the table's prefixes make a session policy STS refuses.
var ErrTooLong = errors.New("table location too long for a vended-credentials session policy")

// Scope is what a session may reach: Write holds the prefixes it reads and
// writes (the table's location), Read those it only reads (old locations
// that retained snapshots still reach; and every prefix of a reader).
type Scope struct {
	Write, Read []objects.Location
	// Partition is the partition the buckets lie in (empty: aws); Vend
	// takes the vending role's.
	Partition string
}

// Prefixes are the scope's prefixes as storage-credentials name them.
func (s Scope) Prefixes() []string {
	var out []string
	for _, l := range append(append([]objects.Location{}, s.Write...), s.Read...) {
		out = append(out, l.URI())
	}
	return out
}

type statement struct {
	Effect    string         `json:"Effect"`
	Action    any            `json:"Action"`
	Resource  any            `json:"Resource"`
	Condition map[string]any `json:"Condition,omitempty"`
}

type document struct {
	Version   string      `json:"Version"`
	Statement []statement `json:"Statement"`
}

// iamLiteral escapes the characters IAM reads as wildcards or variables in
// a Resource or a StringLike value (${*}, ${?} and ${$} are their literal
// forms): a key holding '*' must not widen the grant to its siblings.
var iamLiteral = strings.NewReplacer("$", "${$}", "*", "${*}", "?", "${?}")

func objectsUnder(partition string, l objects.Location) string {
	return s3ARN(partition, l.Bucket+"/"+iamLiteral.Replace(l.Key)+"/*")
}

// Policy is the session policy of a scope, as compact JSON.
func Policy(s Scope) (string, error) {
	if len(s.Write)+len(s.Read) == 0 {
		return "", errors.New("a session needs at least one prefix")
	}
	var doc document
	doc.Version = "2012-10-17"
	partition := cmp.Or(s.Partition, "aws")
	var rw, ro []string
	for _, l := range s.Write {
		rw = append(rw, objectsUnder(partition, l))
	}
	for _, l := range s.Read {
		ro = append(ro, objectsUnder(partition, l))
	}
	if len(rw) > 0 {
		doc.Statement = append(doc.Statement, statement{Effect: "Allow", Action: []string{"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"}, Resource: rw})
	}
	if len(ro) > 0 {
		doc.Statement = append(doc.Statement, statement{Effect: "Allow", Action: "s3:GetObject", Resource: ro})
	}
	// Listing is by bucket, narrowed to the prefixes by s3:prefix.
	byBucket := map[string][]string{}
	var buckets []string
	for _, l := range append(append([]objects.Location{}, s.Write...), s.Read...) {
		if _, ok := byBucket[l.Bucket]; !ok {
			buckets = append(buckets, l.Bucket)
		}
		byBucket[l.Bucket] = append(byBucket[l.Bucket], iamLiteral.Replace(l.Key)+"/*")
	}
	for _, b := range buckets {
		doc.Statement = append(doc.Statement, statement{Effect: "Allow", Action: "s3:ListBucket", Resource: s3ARN(partition, b),
			Condition: map[string]any{"StringLike": map[string]any{"s3:prefix": byBucket[b]}}})
	}
	// Belt and braces: the vending role denies these too.
	doc.Statement = append(doc.Statement, statement{Effect: "Deny", Action: "s3:PutObject", Resource: metadataResources(partition, "*")})
	b, err := marshal(doc)
	if err != nil {
		return "", err
	}
	if n := len([]rune(b)); n > MaxPolicyChars {
		return "", fmt.Errorf("%w: its session policy is %d characters, STS takes at most %d (use the engine policy for this table)", ErrTooLong, n, MaxPolicyChars)
	}
	return b, nil
}

// marshal writes JSON without HTML escaping (a '&' or '<' in a key stays one
// character of the policy, as IAM reads it).
func marshal(v any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// RoleStatements are the vending role's own policy on a warehouse bucket
// (its sessions are the intersection with each session policy): read and
// write objects and list the bucket; delete nothing, write no metadata
// file. The stack grants these (infra, with the bucket's ARN in its
// partition) and the local STS emulation gives the local vending role the
// same document (the local account's partition is aws).
func RoleStatements(bucket string) []map[string]any {
	return []map[string]any{
		{"Effect": "Allow", "Action": []string{"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"}, "Resource": "arn:aws:s3:::" + bucket + "/*"},
		{"Effect": "Allow", "Action": []string{"s3:ListBucket", "s3:GetBucketLocation"}, "Resource": "arn:aws:s3:::" + bucket},
		{"Effect": "Deny", "Action": []string{"s3:DeleteObject", "s3:DeleteObjectVersion"}, "Resource": "arn:aws:s3:::" + bucket + "/*"},
		{"Effect": "Deny", "Action": "s3:PutObject", "Resource": metadataResources("aws", bucket)},
	}
}

// RolePolicy is RoleStatements as a policy document.
func RolePolicy(bucket string) string {
	b, _ := marshal(map[string]any{"Version": "2012-10-17", "Statement": RoleStatements(bucket)})
	return b
}

// Vended is one session's credentials, as the Iceberg REST spec's
// storage-credentials carry them (one entry per prefix, same config).
type Vended struct {
	Prefixes []string
	Config   map[string]string
	Expires  time.Time
	// Write: the session may write (the caller holds TABLE_WRITE).
	Write bool
}

// Vendor assumes the vending role for table-scoped sessions.
type Vendor struct {
	STS     STS
	RoleARN string
	// Region goes to engines as client.region.
	Region string
}

// sessionName is STS's RoleSessionName: [\w+=,.@-], 2 to 64 characters,
// shown in CloudTrail and in the session's ARN.
var unsafeName = regexp.MustCompile(`[^\w+=,.@-]`)

// SessionName names a session after the table and the caller.
func SessionName(tableUUID, principal string) string {
	p := principal
	if i := strings.LastIndexAny(p, "/:"); i >= 0 {
		p = p[i+1:]
	}
	n := "icehold." + strings.SplitN(tableUUID, "-", 2)[0] + "." + unsafeName.ReplaceAllString(p, "_")
	return n[:min(len(n), 64)]
}

// Vend assumes the vending role with the scope's session policy, in the
// role's partition.
func (v *Vendor) Vend(ctx context.Context, scope Scope, sessionName string, d time.Duration) (Vended, error) {
	scope.Partition = cmp.Or(scope.Partition, partitionOf(v.RoleARN))
	policy, err := Policy(scope)
	if err != nil {
		return Vended{}, err
	}
	d = min(max(d, MinDuration), MaxDuration)
	out, err := v.STS.AssumeRole(ctx, &sts.AssumeRoleInput{
		RoleArn: aws.String(v.RoleARN), RoleSessionName: aws.String(sessionName),
		Policy: aws.String(policy), DurationSeconds: aws.Int32(int32(d / time.Second)),
	})
	if err != nil {
		return Vended{}, fmt.Errorf("assume the vending role %s: %w", v.RoleARN, err)
	}
	c := out.Credentials
	if c == nil || c.Expiration == nil {
		return Vended{}, fmt.Errorf("assume the vending role %s: no credentials in the answer", v.RoleARN)
	}
	cfg := map[string]string{
		"s3.access-key-id":               aws.ToString(c.AccessKeyId),
		"s3.secret-access-key":           aws.ToString(c.SecretAccessKey),
		"s3.session-token":               aws.ToString(c.SessionToken),
		"s3.session-token-expires-at-ms": strconv.FormatInt(c.Expiration.UnixMilli(), 10),
	}
	if v.Region != "" {
		cfg["client.region"] = v.Region
	}
	return Vended{Prefixes: scope.Prefixes(), Config: cfg, Expires: *c.Expiration, Write: len(scope.Write) > 0}, nil
}
