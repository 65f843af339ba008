// Package bucketguard is the warehouse bucket's lifecycle guard (SPEC §2,
// the bucket enforces the lifecycle): the bucket keeps versions, and its
// policy lets only icehold's deleting roles (and a break-glass role the
// operator names) remove a version or change what keeps them: versioning,
// lifecycle rules, the policy itself. An engine's delete or overwrite then
// leaves the prior version, which repair restores. The stack writes this
// policy on the bucket it makes (infra), make run on its local bucket,
// and icehold preflight checks a bucket the operator brings against it.
package bucketguard

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/icehold/icehold/shared/iampolicy"
)

// ObjectActions are denied on the bucket's objects, BucketActions on the
// bucket, to every principal but the exempt ones.
var (
	ObjectActions = []string{"s3:DeleteObjectVersion"}
	BucketActions = []string{"s3:PutBucketVersioning", "s3:PutLifecycleConfiguration", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"}
)

// Sids of the two statements.
const (
	SidVersions = "IceholdOnlyIceholdDeletesVersions"
	SidConfig   = "IceholdOnlyIceholdChangesVersioning"
)

// Rule is one Deny of the guard: Actions on Resource to every principal
// whose ARN (aws:PrincipalArn, a role's sessions match their role's ARN)
// is not one of Exempt.
type Rule struct {
	Sid      string
	Actions  []string
	Resource string
	Exempt   []string
}

// BucketARN is a bucket's ARN in a partition (aws, aws-cn, aws-us-gov;
// the stack passes its AWS::Partition).
func BucketARN(partition, bucket string) string { return "arn:" + partition + ":s3:::" + bucket }

// PartitionOf is the partition of a region: aws-cn for China's,
// aws-us-gov for GovCloud's, the isolated partitions for theirs, else aws.
func PartitionOf(region string) string {
	for _, p := range []struct{ prefix, partition string }{
		{"cn-", "aws-cn"}, {"us-gov-", "aws-us-gov"}, {"us-isob-", "aws-iso-b"}, {"us-isof-", "aws-iso-f"},
		{"eu-isoe-", "aws-iso-e"}, {"us-iso-", "aws-iso"},
	} {
		if strings.HasPrefix(region, p.prefix) {
			return p.partition
		}
	}
	return "aws"
}

// Rules are the guard's two Denies for a bucket of a partition: versions
// may be deleted only by the deleters (icehold's delete function's role,
// and the break-glass role), versioning, lifecycle rules and the policy
// changed only by those and the deployers (the role CloudFormation
// deploys the stack with, which writes this policy).
func Rules(partition, bucket string, deleters, deployers []string) []Rule {
	arn := BucketARN(partition, bucket)
	return []Rule{
		{SidVersions, ObjectActions, arn + "/*", slices.Clone(deleters)},
		{SidConfig, BucketActions, arn, append(slices.Clone(deleters), deployers...)},
	}
}

// Statement is a policy statement as JSON carries it.
type Statement map[string]any

// Statements are the rules as bucket policy statements.
func Statements(partition, bucket string, deleters, deployers []string) []Statement {
	var out []Statement
	for _, r := range Rules(partition, bucket, deleters, deployers) {
		out = append(out, Statement{"Sid": r.Sid, "Effect": "Deny", "Principal": "*", "Action": r.Actions, "Resource": r.Resource,
			"Condition": map[string]any{"ArnNotLike": map[string]any{"aws:PrincipalArn": r.Exempt}}})
	}
	return out
}

// Policy is the guard as a bucket policy document.
func Policy(partition, bucket string, deleters, deployers []string) string {
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": Statements(partition, bucket, deleters, deployers)})
	return string(b)
}

// Missing names what the policy of a bucket of a partition lacks of the
// guard: each guarded action that no statement denies to every principal
// (Principal "*") on the bucket (its objects, for ObjectActions), and,
// when deleters are given (role ARNs, or role names), a guard that does
// not exempt one of them (icehold's purge would then fail on its first
// version delete). Empty: the policy guards the bucket. Exemptions other
// than those (a break-glass role) are the operator's to choose.
func Missing(policy, partition, bucket string, deleters []string) []string {
	var doc struct {
		Statement json.RawMessage
	}
	if policy == "" || json.Unmarshal([]byte(policy), &doc) != nil {
		return []string{"a bucket policy (none, or not a policy document)"}
	}
	var stmts []map[string]any
	if json.Unmarshal(doc.Statement, &stmts) != nil {
		var one map[string]any
		if json.Unmarshal(doc.Statement, &one) != nil {
			return []string{"a bucket policy (its Statement is unreadable)"}
		}
		stmts = []map[string]any{one}
	}
	arn := BucketARN(partition, bucket)
	var out []string
	check := func(action, resource string) {
		for _, st := range stmts {
			if st["Effect"] != "Deny" || !everyone(st["Principal"]) || !onPrincipal(st) || !matchesAny(st["Action"], action, true) || !matchesAny(st["Resource"], resource, false) {
				continue
			}
			for _, d := range deleters {
				if !exempts(st, d) && !exemptsName(st, d) {
					out = append(out, fmt.Sprintf("the Deny of %s does not exempt icehold's deleting role %s", action, d))
				}
			}
			return
		}
		out = append(out, fmt.Sprintf("a Deny of %s on %s to every principal but icehold's deleting roles", action, resource))
	}
	for _, a := range ObjectActions {
		check(a, arn+"/*")
	}
	for _, a := range BucketActions {
		check(a, arn)
	}
	return out
}

func everyone(p any) bool {
	switch v := p.(type) {
	case string:
		return v == "*"
	case map[string]any:
		return matchesAny(v["AWS"], "*", false) && len(v) == 1
	}
	return false
}

func list(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case []string:
		return x
	}
	return nil
}

// matchesAny: some pattern of v (IAM's wildcards) matches s.
func matchesAny(v any, s string, fold bool) bool {
	for _, p := range list(v) {
		if fold {
			p, s = strings.ToLower(p), strings.ToLower(s)
		}
		if iampolicy.Match(p, s) {
			return true
		}
	}
	return false
}

// exemptsName: a deleter given by role name (no "arn:"; the deployed
// stack's delete role, its account unknown) is exempted by an ARN that
// ends in role/<name> or role/<path>/<name>.
func exemptsName(st map[string]any, name string) bool {
	if strings.HasPrefix(name, "arn:") {
		return false
	}
	cond, _ := st["Condition"].(map[string]any)
	for _, keys := range cond {
		m, _ := keys.(map[string]any)
		for k, v := range m {
			if !strings.EqualFold(k, "aws:PrincipalArn") {
				continue
			}
			for _, arn := range list(v) {
				if strings.HasSuffix(arn, "/"+name) && strings.Contains(arn, ":role/") {
					return true
				}
			}
		}
	}
	return false
}

// onPrincipal: the statement's condition is on aws:PrincipalArn alone (a
// Deny conditioned on anything else, like aws:SecureTransport, guards
// nothing of this).
func onPrincipal(st map[string]any) bool {
	cond, _ := st["Condition"].(map[string]any)
	for _, keys := range cond {
		m, _ := keys.(map[string]any)
		for k := range m {
			if !strings.EqualFold(k, "aws:PrincipalArn") {
				return false
			}
		}
	}
	return true
}

// exempts: the statement's condition leaves the role out (ArnNotLike or
// ArnNotEquals or StringNotLike or StringNotEquals on aws:PrincipalArn).
func exempts(st map[string]any, role string) bool {
	cond, _ := st["Condition"].(map[string]any)
	for _, op := range []string{"ArnNotLike", "ArnNotEquals", "StringNotLike", "StringNotEquals"} {
		keys, _ := cond[op].(map[string]any)
		for k, v := range keys {
			if strings.EqualFold(k, "aws:PrincipalArn") && matchesAny(v, role, false) {
				return true
			}
		}
	}
	return false
}
