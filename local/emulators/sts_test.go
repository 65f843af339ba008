package emulators_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/objects"
)

func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// The STS emulation refuses what STS refuses (unknown role, durations out
// of bounds, a bad session name), and its sessions reach on the embedded S3
// what role and session policy both allow, with S3's refusals.
func TestSTSSessionsOnS3(t *testing.T) {
	ctx := context.Background()
	emu, err := emulators.NewS3("", "bkt")
	if err != nil {
		t.Fatal(err)
	}
	iam := emulators.NewIAM("us-east-1", "root", "root-secret", emulators.NewSessionKey())
	if err := iam.AddRole("vending", emulators.TrustPolicy(emulators.RootPrincipal), credentials.RolePolicy("bkt")); err != nil {
		t.Fatal(err)
	}
	emu.SetIAM(iam)
	srv := httptest.NewServer(emu)
	defer srv.Close()
	static := func(id, secret, token string) aws.CredentialsProvider {
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: token}, nil
		})
	}
	stsc := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: static("root", "root-secret", "")})
	s3c := func(p aws.CredentialsProvider) *s3.Client {
		return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, Credentials: p})
	}
	policy, err := credentials.Policy(credentials.Scope{Write: []objects.Location{{Bucket: "bkt", Key: "cat/ns/t"}}})
	if err != nil {
		t.Fatal(err)
	}
	refusals := []struct {
		name string
		in   sts.AssumeRoleInput
		code string
	}{
		{"unknown role", sts.AssumeRoleInput{RoleArn: aws.String(emulators.RoleARN("nope")), RoleSessionName: aws.String("s1")}, "AccessDenied"},
		{"too short", sts.AssumeRoleInput{RoleArn: aws.String(emulators.RoleARN("vending")), RoleSessionName: aws.String("s1"), DurationSeconds: aws.Int32(600)}, "ValidationError"},
		{"too long", sts.AssumeRoleInput{RoleArn: aws.String(emulators.RoleARN("vending")), RoleSessionName: aws.String("s1"), DurationSeconds: aws.Int32(13 * 3600)}, "ValidationError"},
		{"bad session name", sts.AssumeRoleInput{RoleArn: aws.String(emulators.RoleARN("vending")), RoleSessionName: aws.String("a b")}, "ValidationError"},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			if _, err := stsc.AssumeRole(ctx, &r.in); apiCode(err) != r.code {
				t.Errorf("AssumeRole: %v, want %s", err, r.code)
			}
		})
	}
	out, err := stsc.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(emulators.RoleARN("vending")), RoleSessionName: aws.String("s1"), Policy: aws.String(policy)})
	if err != nil {
		t.Fatal(err)
	}
	c := out.Credentials
	session := s3c(static(*c.AccessKeyId, *c.SecretAccessKey, *c.SessionToken))
	root := s3c(static("root", "root-secret", ""))
	put := func(cl *s3.Client, key string) error {
		_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("x")})
		return err
	}
	if err := put(root, "cat/ns/u/data/a"); err != nil {
		t.Fatal(err)
	}
	if err := put(session, "cat/ns/t/data/a"); err != nil {
		t.Fatalf("the session writes its prefix: %v", err)
	}
	checks := []struct {
		name string
		err  error
		code string
	}{
		{"delete", func() error {
			_, err := session.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("cat/ns/t/data/a")})
			return err
		}(), "AccessDenied"},
		{"metadata file", put(session, "cat/ns/t/metadata/00001-x.metadata.json"), "AccessDenied"},
		{"sibling prefix", put(session, "cat/ns/tt/data/a"), "AccessDenied"},
		{"other table", func() error {
			_, err := session.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("cat/ns/u/data/a")})
			return err
		}(), "AccessDenied"},
		{"wrong secret", put(s3c(static(*c.AccessKeyId, "x", *c.SessionToken)), "cat/ns/t/data/b"), "SignatureDoesNotMatch"},
		{"forged session token", put(s3c(static(*c.AccessKeyId, *c.SecretAccessKey, "forged")), "cat/ns/t/data/b"), "InvalidAccessKeyId"},
		{"an unknown long-term key passes, as LocalStack's test/test", put(s3c(static("test", "test", "")), "cat/ns/t/data/b"), ""},
	}
	for _, ch := range checks {
		if apiCode(ch.err) != ch.code {
			t.Errorf("%s: %v, want %s", ch.name, ch.err, ch.code)
		}
	}
}
