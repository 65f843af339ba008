package emulators

import (
	"errors"
	"net/http"
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
