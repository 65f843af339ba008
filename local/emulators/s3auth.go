package emulators

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/sigv4"
)

// SigV4 on the embedded S3 (with SetIAM): a request signed with a key the
// local account knows (its own, a user's, an STS session's) must carry a
// valid signature, as S3 requires (unsigned requests and unknown long-term
// keys stay the emulator's convenience, for curl and LocalStack-style
// test/test tools), and a session's requests are authorized as IAM would: what both its
// role's policy and its session policy allow (vended credentials read and
// write their table and nothing else). Refusals are S3's.

// SetIAM turns signature checks on (and serves the STS emulation on this
// port); nil turns them off.
func (s *S3) SetIAM(m *IAM) { s.iam.Store(m) }

// authenticate verifies a request's signature; false when it answered.
func (s *S3) authenticate(w http.ResponseWriter, r *http.Request, m *IAM) (sigv4.Key, bool) {
	v := sigv4.Verifier{Service: "s3", Region: m.Region, MaxSkew: 15 * time.Minute, Keys: m.Lookup, Expiry: m.now, S3: true}
	k, err := v.Verify(r, nil)
	if err == nil {
		return k, true
	}
	// A long-term key the account does not know passes as the root, as
	// LocalStack takes any key (operators' tools sign with test/test); a
	// session's token, and every key it knows, are checked.
	if errors.Is(err, sigv4.ErrUnknownKey) && r.Header.Get("X-Amz-Security-Token") == "" {
		return sigv4.Key{Principal: RootPrincipal}, true
	}
	status, code, msg := http.StatusForbidden, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method."
	switch {
	case errors.Is(err, sigv4.ErrNotSigned):
		code, msg = "AccessDenied", "Access Denied"
	case errors.Is(err, sigv4.ErrUnknownKey):
		code, msg = "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records."
	case errors.Is(err, sigv4.ErrSkew):
		code, msg = "RequestTimeTooSkewed", "The difference between the request time and the current time is too large."
	case errors.Is(err, sigv4.ErrExpired):
		status, code, msg = http.StatusBadRequest, "ExpiredToken", "The provided token has expired."
	case errors.Is(err, sigv4.ErrMalformed):
		status, code, msg = http.StatusBadRequest, "AuthorizationHeaderMalformed", err.Error()
	}
	writeS3Error(w, status, code, msg)
	return sigv4.Key{}, false
}

// accessOf is what IAM authorizes a request as (DeleteObjects is
// authorized key by key, by its handler).
func accessOf(r *http.Request) []access {
	bucket, key := splitPath(r)
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	bucketARN := "arn:aws:s3:::" + bucket
	object := bucketARN + "/" + key
	one := func(action, res string) []access { return []access{{action: action, resource: res}} }
	if key == "" {
		switch {
		case has("policy"):
			return one(map[string]string{"GET": "s3:GetBucketPolicy", "PUT": "s3:PutBucketPolicy", "DELETE": "s3:DeleteBucketPolicy"}[r.Method], bucketARN)
		case has("location"):
			return one("s3:GetBucketLocation", bucketARN)
		case has("uploads"):
			return one("s3:ListBucketMultipartUploads", bucketARN)
		case has("versions"):
			return one("s3:ListBucketVersions", bucketARN)
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			return []access{{action: "s3:ListBucket", resource: bucketARN, keys: map[string]string{"s3:prefix": q.Get("prefix")}}}
		case r.Method == http.MethodPut:
			return one("s3:CreateBucket", bucketARN)
		case r.Method == http.MethodDelete:
			return one("s3:DeleteBucket", bucketARN)
		}
		return one("s3:"+r.Method+"Bucket", bucketARN)
	}
	switch {
	case r.Method == http.MethodGet && has("uploadId"):
		return one("s3:ListMultipartUploadParts", object)
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && has("tagging"):
		return one("s3:GetObjectTagging", object)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return one("s3:GetObject", object)
	case r.Method == http.MethodDelete && has("uploadId"):
		return one("s3:AbortMultipartUpload", object)
	case r.Method == http.MethodDelete:
		return one("s3:DeleteObject", object)
	case r.Method == http.MethodPut && has("tagging"):
		return one("s3:PutObjectTagging", object)
	case r.Method == http.MethodPut && has("acl"):
		return one("s3:PutObjectAcl", object)
	case r.Method == http.MethodPut || r.Method == http.MethodPost:
		out := one("s3:PutObject", object) // uploads, parts and completions too
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			src, _ = url.PathUnescape(strings.TrimPrefix(strings.SplitN(src, "?", 2)[0], "/"))
			out = append(out, access{action: "s3:GetObject", resource: "arn:aws:s3:::" + src})
		}
		return out
	}
	return one("s3:"+r.Method+"Object", object)
}

// permits: the caller may make every access the request needs.
func permits(m *IAM, k sigv4.Key, r *http.Request) bool {
	for _, a := range accessOf(r) {
		if !m.allows(k, a) {
			return false
		}
	}
	return true
}
