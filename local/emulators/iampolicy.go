package emulators

import (
	"maps"
	"net/http"
	"strconv"

	"github.com/icehold/icehold/shared/iampolicy"
	"github.com/icehold/icehold/shared/sigv4"
)

// The emulators evaluate policies with shared/iampolicy, the matcher and
// statement type the catalog's grants use too: identity policies (a role's
// and a session's, for temporary credentials), bucket policies' Deny
// statements and roles' trust policies.

// access is one permission a request needs.
type access struct {
	action, resource string
	keys             map[string]string // condition keys of the request
}

func (a access) request(principal string) iampolicy.Request {
	return iampolicy.Request{Action: a.action, Resource: a.resource, Principal: principal, Keys: a.keys}
}

// withKeys is the access with the request's own keys added (its own win).
func (a access) withKeys(keys map[string]string) access {
	merged := maps.Clone(keys)
	maps.Copy(merged, a.keys)
	a.keys = merged
	return a
}

// requestKeys are the condition keys the embedded S3 knows of every
// request, as AWS sets them: aws:PrincipalArn (a role session's is its
// role's ARN, path included, as IAM sets it), aws:PrincipalAccount,
// aws:SecureTransport, and S3's s3:x-amz-copy-source and s3:VersionId when
// the request carries them. Keys it cannot know (aws:SourceIp behind a
// proxy, aws:CurrentTime, tags) are absent, which a negated operator reads
// as a match: a Deny on them applies, the cautious reading.
func requestKeys(r *http.Request, caller sigv4.Key) map[string]string {
	arn := caller.Principal
	if caller.Role != "" {
		arn = caller.Role
	}
	keys := map[string]string{
		"aws:PrincipalArn":     arn,
		"aws:PrincipalAccount": iampolicy.AccountOf(arn),
		"aws:SecureTransport":  strconv.FormatBool(r.TLS != nil),
	}
	if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
		keys["s3:x-amz-copy-source"] = src
	}
	if v, ok := r.URL.Query()["versionId"]; ok {
		keys["s3:VersionId"] = v[0]
	}
	return keys
}
