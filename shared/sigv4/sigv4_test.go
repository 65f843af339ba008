package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var keys Lookup = func(id, token string) (Key, error) {
	switch {
	case id == "AKIDUSER" && token == "":
		return Key{AccessKeyID: id, Secret: "user-secret", Principal: "arn:aws:iam::000000000000:user/alice"}, nil
	case id == "ASIASESSION" && token == "tok":
		return Key{AccessKeyID: id, Secret: "session-secret", Principal: "arn:aws:sts::000000000000:assumed-role/r/s", Expires: now.Add(time.Minute)}, nil
	case id == "ASIAOLD" && token == "tok":
		return Key{AccessKeyID: id, Secret: "old-secret", Expires: now.Add(-time.Second)}, nil
	}
	return Key{}, ErrUnknownKey
}

// sign signs a request as the AWS SDK does (the clients icehold serves).
func sign(t *testing.T, r *http.Request, body []byte, creds aws.Credentials, service string, at time.Time, s3 bool) {
	t.Helper()
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if s3 {
		hash = "UNSIGNED-PAYLOAD"
		r.Header.Set("X-Amz-Content-Sha256", hash)
	}
	err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hash, service, "us-east-1", at, func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = s3
	})
	if err != nil {
		t.Fatal(err)
	}
}

// What the SDK signs verifies; a changed request, a wrong key, a skewed
// clock and expired credentials do not, each with AWS's refusal.
func TestVerify(t *testing.T) {
	user := aws.Credentials{AccessKeyID: "AKIDUSER", SecretAccessKey: "user-secret"}
	session := aws.Credentials{AccessKeyID: "ASIASESSION", SecretAccessKey: "session-secret", SessionToken: "tok"}
	cases := []struct {
		name    string
		creds   aws.Credentials
		service string
		s3      bool
		at      time.Time
		path    string
		body    string
		tamper  func(r *http.Request)
		want    error
	}{
		{name: "user", creds: user, path: "/v1/demo/namespaces?pageSize=10&parent=a%1Fb", want: nil},
		{name: "escaped path", creds: user, path: "/v1/demo/namespaces/a%1Fb/tables/t%20x", want: nil},
		{name: "body", creds: user, path: "/v1/demo/namespaces", body: `{"namespace":["a"]}`, want: nil},
		{name: "session", creds: session, path: "/v1/config", want: nil},
		{name: "s3 object", creds: user, service: "s3", s3: true, path: "/bucket/a%3Db/x.parquet?partNumber=1&uploadId=u", want: nil},
		{name: "another body", creds: user, path: "/v1/demo/namespaces", body: `{"namespace":["a"]}`,
			tamper: func(r *http.Request) { r.Body = nil }, want: ErrSignature},
		{name: "another path", creds: user, path: "/v1/demo/namespaces", tamper: func(r *http.Request) { r.URL.Path, r.RequestURI = "/v1/other/namespaces", "/v1/other/namespaces" }, want: ErrSignature},
		{name: "a signed header changed", creds: user, path: "/v1/config", tamper: func(r *http.Request) { r.Header.Set("X-Iceberg-Access-Delegation", "none") }, want: ErrSignature},
		{name: "an unsigned header added", creds: user, path: "/v1/config", tamper: func(r *http.Request) { r.Header.Set("Accept-Encoding", "gzip") }, want: nil},
		{name: "wrong secret", creds: aws.Credentials{AccessKeyID: "AKIDUSER", SecretAccessKey: "guess"}, path: "/v1/config", want: ErrSignature},
		{name: "unknown key", creds: aws.Credentials{AccessKeyID: "AKIDNOBODY", SecretAccessKey: "x"}, path: "/v1/config", want: ErrUnknownKey},
		{name: "session token of another key", creds: aws.Credentials{AccessKeyID: "ASIASESSION", SecretAccessKey: "session-secret", SessionToken: "forged"}, path: "/v1/config", want: ErrUnknownKey},
		{name: "expired session", creds: aws.Credentials{AccessKeyID: "ASIAOLD", SecretAccessKey: "old-secret", SessionToken: "tok"}, path: "/v1/config", want: ErrExpired},
		{name: "clock 6 minutes behind", creds: user, at: now.Add(-6 * time.Minute), path: "/v1/config", want: ErrSkew},
		{name: "clock 6 minutes ahead", creds: user, at: now.Add(6 * time.Minute), path: "/v1/config", want: ErrSkew},
		{name: "clock 4 minutes behind", creds: user, at: now.Add(-4 * time.Minute), path: "/v1/config", want: nil},
		{name: "other service", creds: user, service: "s3", path: "/v1/config", want: ErrMalformed},
		{name: "no signature", path: "/v1/config", tamper: func(r *http.Request) { r.Header.Del("Authorization") }, want: ErrNotSigned},
		{name: "no date", creds: user, path: "/v1/config", tamper: func(r *http.Request) { r.Header.Del("X-Amz-Date") }, want: ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			service := c.service
			if service == "" {
				service = "execute-api"
			}
			at := c.at
			if at.IsZero() {
				at = now
			}
			r := httptest.NewRequest("GET", "http://127.0.0.1:8181"+c.path, bytes.NewReader([]byte(c.body)))
			r.Header.Set("X-Iceberg-Access-Delegation", "vended-credentials")
			if c.creds.AccessKeyID != "" {
				sign(t, r, []byte(c.body), c.creds, service, at, c.s3)
			}
			if c.tamper != nil {
				c.tamper(r)
			}
			body := []byte(c.body)
			if r.Body == nil {
				body = []byte("{}")
			}
			v := Verifier{Service: "execute-api", Region: "us-east-1", MaxSkew: 5 * time.Minute, Keys: keys, Now: func() time.Time { return now }}
			if c.s3 {
				v.Service, v.S3 = "s3", true
			}
			_, err := v.Verify(r, body)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Errorf("Verify: %v, want %v", err, c.want)
			}
		})
	}
}
