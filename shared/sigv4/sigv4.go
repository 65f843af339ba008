// Package sigv4 verifies AWS Signature Version 4 on incoming requests, as
// API Gateway's IAM auth (service execute-api) and S3 do: the local server
// and the embedded S3 check what clients configured for AWS send, so those
// clients are tested end to end without AWS. It knows no identity itself:
// the caller looks access keys up.
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/smithy-go/encoding/httpbinding"
)

const (
	algorithm  = "AWS4-HMAC-SHA256"
	timeFormat = "20060102T150405Z"
	// EmptyHash is the SHA-256 of no bytes, the payload hash of a bodyless request.
	EmptyHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// Refusals. Each error's message is what AWS answers (API Gateway's
// $context.error.message, S3's Message), wrapped around one of these.
var (
	// ErrNotSigned: the request carries no SigV4 signature at all.
	ErrNotSigned = errors.New("not signed with SigV4")
	// ErrMalformed: an Authorization that is not a well-formed SigV4 one.
	ErrMalformed = errors.New("malformed SigV4 authorization")
	// ErrUnknownKey: no identity holds the access key (or the session
	// token does not belong to it).
	ErrUnknownKey = errors.New("unknown access key")
	// ErrSignature: the signature does not match the request.
	ErrSignature = errors.New("signature does not match")
	// ErrSkew: the request's time is too far from the server's.
	ErrSkew = errors.New("request time too skewed")
	// ErrExpired: temporary credentials past their expiry.
	ErrExpired = errors.New("credentials expired")
)

// refusal is AWS's message for a refusal, which errors.Is matches to its kind.
type refusal struct {
	kind error
	msg  string
}

func (r refusal) Error() string { return r.msg }
func (r refusal) Unwrap() error { return r.kind }

// Refuse makes an error of kind with AWS's message.
func Refuse(kind error, format string, args ...any) error {
	return refusal{kind, fmt.Sprintf(format, args...)}
}

// Key is what an access key stands for.
type Key struct {
	AccessKeyID string
	Secret      string
	// Principal is the caller's ARN: arn:aws:iam::<acct>:user/<name>, or
	// for a role session arn:aws:sts::<acct>:assumed-role/<role>/<session>.
	Principal string
	// Expires: when temporary credentials stop working; zero for long-term keys.
	Expires time.Time
	// Policy is a session policy (JSON) that limits temporary credentials;
	// "" for none.
	Policy string
	// Role is the ARN of the role a session assumed ("" for users).
	Role string
}

// Lookup finds the key of an access key id and, for temporary credentials,
// checks their session token (""); ErrUnknownKey when nothing matches.
type Lookup func(accessKeyID, sessionToken string) (Key, error)

// Verifier checks requests signed for one service and region.
type Verifier struct {
	Service, Region string
	// MaxSkew: how far the request's X-Amz-Date may be from now (API
	// Gateway: 5 minutes; S3: 15).
	MaxSkew time.Duration
	Keys    Lookup
	// Now is the server's clock (nil: time.Now).
	Now func() time.Time
	// Expiry is the clock temporary credentials expire by (nil: Now): a
	// test advances it past an expiry while signers keep real time.
	Expiry func() time.Time
	// S3 signs its path escaped once (every other service twice) and
	// states the payload hash in x-amz-content-sha256 (UNSIGNED-PAYLOAD
	// or streaming forms included), which the signature then covers.
	S3 bool
}

// authorization is a parsed SigV4 Authorization header.
type authorization struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

// Signed reports whether a request carries a SigV4 Authorization header.
func Signed(r *http.Request) bool {
	return strings.HasPrefix(strings.TrimSpace(r.Header.Get("Authorization")), algorithm+" ")
}

// Service is the service a SigV4 request was signed for ("" if unsigned or
// malformed), to route requests for several services served on one port.
func Service(r *http.Request) string {
	a, err := parse(r.Header.Get("Authorization"))
	if err != nil {
		return ""
	}
	return a.service
}

func parse(h string) (authorization, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(h), algorithm+" ")
	if !ok {
		return authorization{}, Refuse(ErrNotSigned, "Missing Authentication Token")
	}
	var a authorization
	var credential, signed string
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			a.signature = v
		}
	}
	var missing []string
	for _, p := range []struct{ name, v string }{{"Credential", credential}, {"Signature", a.signature}, {"SignedHeaders", signed}} {
		if p.v == "" {
			missing = append(missing, "Authorization header requires '"+p.name+"' parameter.")
		}
	}
	if len(missing) > 0 {
		return a, Refuse(ErrMalformed, "%s", strings.Join(missing, " "))
	}
	scope := strings.Split(credential, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return a, Refuse(ErrMalformed, "Credential should be scoped to a valid region, not %q.", credential)
	}
	a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	a.signedHeaders = strings.Split(signed, ";")
	return a, nil
}

// Verify checks a request's signature and returns the key that signed it.
// body is the request's body (the router has read it already); it is
// hashed unless the service states its hash in a header (S3).
func (v Verifier) Verify(r *http.Request, body []byte) (Key, error) {
	a, err := parse(r.Header.Get("Authorization"))
	if err != nil {
		return Key{}, err
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	when, err := time.Parse(timeFormat, r.Header.Get("X-Amz-Date"))
	if err != nil {
		return Key{}, Refuse(ErrMalformed, "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	switch {
	case a.date != when.Format("20060102"):
		return Key{}, Refuse(ErrMalformed, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.", a.date, when.Format("20060102"), r.Header.Get("X-Amz-Date"))
	case a.service != v.Service:
		return Key{}, Refuse(ErrMalformed, "Credential should be scoped to correct service: '%s'.", v.Service)
	case a.region != v.Region:
		return Key{}, Refuse(ErrMalformed, "Credential should be scoped to a valid region (this endpoint's is %s, the request's %q: set AWS_REGION).", v.Region, a.region)
	case when.Before(now.Add(-v.MaxSkew)):
		return Key{}, Refuse(ErrSkew, "Signature expired: %s is now earlier than %s (%s - %s.)",
			when.Format(timeFormat), now.Add(-v.MaxSkew).Format(timeFormat), now.Format(timeFormat), skew(v.MaxSkew))
	case when.After(now.Add(v.MaxSkew)):
		return Key{}, Refuse(ErrSkew, "Signature not yet current: %s is still later than %s (%s + %s.)",
			when.Format(timeFormat), now.Add(v.MaxSkew).Format(timeFormat), now.Format(timeFormat), skew(v.MaxSkew))
	}
	key, err := v.Keys(a.accessKey, r.Header.Get("X-Amz-Security-Token"))
	if err != nil {
		return Key{}, err
	}
	expiry := now
	if v.Expiry != nil {
		expiry = v.Expiry()
	}
	if !key.Expires.IsZero() && !expiry.Before(key.Expires) {
		return Key{}, Refuse(ErrExpired, "The security token included in the request is expired")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if !v.S3 || payload == "" {
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	}
	canonical := strings.Join([]string{
		r.Method,
		v.canonicalURI(r),
		canonicalQuery(r.URL.RawQuery),
		canonicalHeaders(r, a.signedHeaders),
		strings.Join(a.signedHeaders, ";"),
		payload,
	}, "\n")
	scope := strings.Join([]string{a.date, a.region, a.service, "aws4_request"}, "/")
	sum := sha256.Sum256([]byte(canonical))
	toSign := strings.Join([]string{algorithm, r.Header.Get("X-Amz-Date"), scope, hex.EncodeToString(sum[:])}, "\n")
	want := hex.EncodeToString(hmacSHA256(signingKey(key.Secret, a.date, a.region, a.service), toSign))
	if !hmac.Equal([]byte(want), []byte(a.signature)) {
		return Key{}, Refuse(ErrSignature, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
	}
	return key, nil
}

func skew(d time.Duration) string {
	return strconv.Itoa(int(d/time.Minute)) + " min"
}

// canonicalURI is the path as the client sent it (escaped), escaped once
// more for every service but S3.
func (v Verifier) canonicalURI(r *http.Request) string {
	p := r.URL.EscapedPath()
	if r.RequestURI != "" && !strings.HasPrefix(r.RequestURI, "http") {
		p, _, _ = strings.Cut(r.RequestURI, "?")
	}
	if p == "" {
		p = "/"
	}
	if v.S3 {
		return p
	}
	return httpbinding.EscapePath(p, false)
}

// canonicalQuery encodes every name and value (RFC 3986, space as %20)
// and sorts the pairs after encoding, as SigV4 says.
func canonicalQuery(raw string) string {
	q, _ := url.ParseQuery(raw)
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, escape(k)+"="+escape(v))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

func escape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}

func canonicalHeaders(r *http.Request, names []string) string {
	var b strings.Builder
	for _, n := range names {
		var vals []string
		switch n {
		case "host":
			vals = []string{r.Host}
		case "content-length":
			vals = r.Header.Values("Content-Length")
			if len(vals) == 0 {
				vals = []string{strconv.FormatInt(r.ContentLength, 10)}
			}
		default:
			vals = r.Header.Values(n)
		}
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(n + ":" + strings.Join(vals, ",") + "\n")
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func signingKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}
