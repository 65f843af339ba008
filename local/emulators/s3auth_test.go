package emulators_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/bucketguard"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/objects"
)

// authEnv is the embedded S3 with IAM on: the root's client, and a
// session vended as icehold vends a table's write keys (cat/ns/t).
type authEnv struct {
	emu           *emulators.S3
	url           string
	root, session *s3.Client
	sessionCreds  aws.Credentials
}

func newAuthEnv(t *testing.T) authEnv {
	t.Helper()
	ctx := context.Background()
	emu, err := emulators.NewS3("", "bkt")
	if err != nil {
		t.Fatal(err)
	}
	iam := emulators.NewIAM("us-east-1", "root", "root-secret", emulators.NewSessionKey())
	iam.AddRole("vending", emulators.TrustPolicy(emulators.RootPrincipal), credentials.RolePolicy("bkt"))
	emu.SetIAM(iam)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	static := func(c aws.Credentials) aws.CredentialsProvider {
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return c, nil })
	}
	client := func(c aws.Credentials) *s3.Client {
		return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, Credentials: static(c)})
	}
	rootCreds := aws.Credentials{AccessKeyID: "root", SecretAccessKey: "root-secret"}
	stsc := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: static(rootCreds)})
	policy, err := credentials.Policy(credentials.Scope{Write: []objects.Location{{Bucket: "bkt", Key: "cat/ns/t"}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := stsc.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(emulators.RoleARN("vending")), RoleSessionName: aws.String("s1"), Policy: aws.String(policy)})
	if err != nil {
		t.Fatal(err)
	}
	c := out.Credentials
	sc := aws.Credentials{AccessKeyID: *c.AccessKeyId, SecretAccessKey: *c.SecretAccessKey, SessionToken: *c.SessionToken}
	return authEnv{emu: emu, url: srv.URL, root: client(rootCreds), session: client(sc), sessionCreds: sc}
}

// raw sends a request signed with creds, path and query as written.
func (e authEnv) raw(t *testing.T, creds aws.Credentials, method, pathAndQuery string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+pathAndQuery, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	if creds.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", creds.SessionToken)
	}
	if err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).SignHTTP(context.Background(), creds, req,
		req.Header.Get("X-Amz-Content-Sha256"), "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (e authEnv) put(t *testing.T, c *s3.Client, key, body string) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func (e authEnv) body(t *testing.T, key string) string {
	t.Helper()
	_, rc, err := e.emu.Store.GetObject("bkt", key, "")
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

// Write keys allow s3:AbortMultipartUpload, never s3:DeleteObject: a
// DELETE with an empty uploadId was authorized as the abort and then run
// as a delete of the object.
func TestS3EmptyUploadIDDeletesNothing(t *testing.T) {
	e := newAuthEnv(t)
	e.put(t, e.session, "cat/ns/t/data/f.parquet", "data")
	status, body := e.raw(t, e.sessionCreds, "DELETE", "/bkt/cat/ns/t/data/f.parquet?uploadId=", nil)
	if status != http.StatusNotFound || !strings.Contains(body, "NoSuchUpload") {
		t.Errorf("DELETE ?uploadId= with write keys: %d %s, want 404 NoSuchUpload", status, body)
	}
	if got := e.body(t, "cat/ns/t/data/f.parquet"); got != "data" {
		t.Errorf("the object after: %q, want it kept", got)
	}
}

// A bucket policy's denies apply to every request shape: a DELETE with
// any query parameter skipped them.
func TestS3BucketPolicyDeniesEveryShape(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":["s3:DeleteObject","s3:DeleteObjectVersion","s3:PutBucketVersioning","s3:PutLifecycleConfiguration"],"Resource":["arn:aws:s3:::bkt","arn:aws:s3:::bkt/*"]}]}`
	if _, err := e.root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("bkt"), Policy: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	e.put(t, e.root, "k", "data")
	cases := []struct{ method, path string }{
		{"DELETE", "/bkt/k"},
		{"DELETE", "/bkt/k?x-id=DeleteObject"},
		{"DELETE", "/bkt/k?foo=bar"},
		{"DELETE", "/bkt/k?versionId=null"},
		{"DELETE", "/bkt/k?tagging"}, // DeleteObjectTagging: not denied, but never a delete
		{"PUT", "/bkt?versioning"},
		{"PUT", "/bkt?lifecycle"},
	}
	for _, c := range cases {
		status, body := e.raw(t, aws.Credentials{AccessKeyID: "root", SecretAccessKey: "root-secret"}, c.method, c.path,
			[]byte(`<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>`))
		denied := status == http.StatusForbidden && strings.Contains(body, "AccessDenied")
		if want := !strings.Contains(c.path, "tagging"); denied != want {
			t.Errorf("%s %s: %d %s; denied %v, want %v", c.method, c.path, status, body, denied, want)
		}
	}
	if got := e.body(t, "k"); got != "data" {
		t.Errorf("the object after: %q, want it kept", got)
	}
	if v, _ := e.emu.Store.Versioning("bkt"); v != "" {
		t.Errorf("versioning after a denied PutBucketVersioning: %q", v)
	}
	// DeleteObjects: per-key AccessDenied, with or without a version id.
	out, err := e.root.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{
		{Key: aws.String("k")}, {Key: aws.String("k"), VersionId: aws.String("null")}}}})
	if err != nil || len(out.Errors) != 2 || len(out.Deleted) != 0 {
		t.Errorf("DeleteObjects under the deny: %+v, %v; want 2 AccessDenied", out, err)
	}
}

// Bucket subresources on an object's path are the object operation, and
// authorized as it: write keys of one table sent ?versions, ?uploads and
// ?versioning on a key of theirs, were authorized as GetObject/PutObject
// of it, and the backend ran the bucket's ListObjectVersions,
// ListMultipartUploads and PutBucketVersioning.
func TestS3ObjectPathSubresourcesAreObjectOperations(t *testing.T) {
	e := newAuthEnv(t)
	e.put(t, e.root, "cat/ns/other/data/secret.parquet", "theirs")
	e.put(t, e.session, "cat/ns/t/data/f.parquet", "mine")
	for _, sub := range []string{"versions", "uploads", "versioning", "location", "policy"} {
		status, body := e.raw(t, e.sessionCreds, "GET", "/bkt/cat/ns/t/data/f.parquet?"+sub, nil)
		if status != http.StatusOK || body != "mine" {
			t.Errorf("GET key?%s: %d %.200s, want the object", sub, status, body)
		}
	}
	status, body := e.raw(t, e.sessionCreds, "PUT", "/bkt/cat/ns/t/data/f.parquet?versioning",
		[]byte(`<VersioningConfiguration><Status>Suspended</Status></VersioningConfiguration>`))
	if status != http.StatusOK {
		t.Errorf("PUT key?versioning: %d %s", status, body)
	}
	if v, _ := e.emu.Store.Versioning("bkt"); v != "" {
		t.Errorf("the bucket's versioning after PUT key?versioning: %q, want untouched", v)
	}
	if got := e.body(t, "cat/ns/t/data/f.parquet"); !strings.Contains(got, "Suspended") {
		t.Errorf("PUT key?versioning wrote %q, want the body as the object", got)
	}
	// The bucket operations themselves are refused to write keys.
	for _, path := range []string{"/bkt?versions", "/bkt?uploads", "/bkt?versioning"} {
		if status, body := e.raw(t, e.sessionCreds, "GET", path, nil); status != http.StatusForbidden {
			t.Errorf("GET %s with write keys: %d %.200s, want 403", path, status, body)
		}
	}
}

// Versions need their own actions: write keys (s3:GetObject, never
// s3:GetObjectVersion or s3:DeleteObjectVersion) read the current object
// only, and delete no version.
func TestS3VersionActions(t *testing.T) {
	e := newAuthEnv(t)
	ctx := context.Background()
	if _, err := e.root.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("bkt"),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	first, err := e.root.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("cat/ns/t/data/f"), Body: strings.NewReader("v1")})
	if err != nil {
		t.Fatal(err)
	}
	e.put(t, e.session, "cat/ns/t/data/f", "v2")
	v1 := aws.ToString(first.VersionId)
	if _, err := e.session.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("cat/ns/t/data/f")}); err != nil {
		t.Errorf("the current object with write keys: %v", err)
	}
	if _, err := e.session.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("cat/ns/t/data/f"), VersionId: aws.String(v1)}); apiCode(err) != "AccessDenied" {
		t.Errorf("a version with write keys: %v, want AccessDenied", err)
	}
	if _, err := e.session.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("cat/ns/t/data/f"), VersionId: aws.String(v1)}); apiCode(err) != "AccessDenied" {
		t.Errorf("deleting a version with write keys: %v, want AccessDenied", err)
	}
	if _, err := e.session.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("bkt"), Prefix: aws.String("cat/ns/t/")}); apiCode(err) != "AccessDenied" {
		t.Errorf("listing versions with write keys: %v, want AccessDenied", err)
	}
	out, err := e.session.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &s3types.Delete{Objects: []s3types.ObjectIdentifier{
		{Key: aws.String("cat/ns/t/data/f"), VersionId: aws.String(v1)}}}})
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
		t.Errorf("DeleteObjects of a version with write keys: %+v, %v; want AccessDenied", out, err)
	}
	if _, _, err := e.emu.Store.GetObject("bkt", "cat/ns/t/data/f", v1); err != nil {
		t.Errorf("version %s after: %v, want it kept", v1, err)
	}
}

// The warehouse guard (shared/bucketguard) is a Deny to every principal
// but the exempt roles, by aws:PrincipalArn (ArnNotLike): the embedded S3
// read no such condition and kept the statement from applying, so any
// identity allowed s3:* deleted versions and suspended versioning. Now a
// session of another role (allowed everything) and the root are refused
// what the guard denies, the exempt role's session is not, and the root
// still replaces the policy (as in AWS).
func TestS3WarehouseGuardExemptsOnlyItsRoles(t *testing.T) {
	ctx := context.Background()
	emu, err := emulators.NewS3("", "bkt")
	if err != nil {
		t.Fatal(err)
	}
	iam := emulators.NewIAM("us-east-1", "root", "root-secret", emulators.NewSessionKey())
	const everything = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`
	for _, r := range []string{"deleter", "engine"} {
		if err := iam.AddRole(r, emulators.TrustPolicy(emulators.RootPrincipal), everything); err != nil {
			t.Fatal(err)
		}
	}
	emu.SetIAM(iam)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	client := func(c aws.Credentials) *s3.Client {
		return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), UsePathStyle: true,
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return c, nil })})
	}
	rootCreds := aws.Credentials{AccessKeyID: "root", SecretAccessKey: "root-secret"}
	stsc := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return rootCreds, nil })})
	session := func(role string) *s3.Client {
		out, err := stsc.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(emulators.RoleARN(role)), RoleSessionName: aws.String(role)})
		if err != nil {
			t.Fatal(err)
		}
		c := out.Credentials
		return client(aws.Credentials{AccessKeyID: *c.AccessKeyId, SecretAccessKey: *c.SecretAccessKey, SessionToken: *c.SessionToken})
	}
	root, deleter, engine := client(rootCreds), session("deleter"), session("engine")
	bkt := aws.String("bkt")
	enabled := &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}
	if _, err := root.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: bkt, VersioningConfiguration: enabled}); err != nil {
		t.Fatal(err)
	}
	policy := bucketguard.Policy("aws", "bkt", []string{emulators.RoleARN("deleter")}, nil)
	if _, err := root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: bkt, Policy: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	put := func(c *s3.Client, body string) string {
		out, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bkt, Key: aws.String("t/data/f"), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatalf("put: %v", err)
		}
		return aws.ToString(out.VersionId)
	}
	first := put(engine, "v1")
	put(engine, "v2") // an overwrite: allowed, the prior version stays
	suspended := &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusSuspended}
	guarded := []struct {
		name string
		call func(*s3.Client) error
	}{
		{"DeleteObjectVersion", func(c *s3.Client) error {
			_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bkt, Key: aws.String("t/data/f"), VersionId: aws.String(first)})
			return err
		}},
		{"PutBucketVersioning", func(c *s3.Client) error {
			_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: bkt, VersioningConfiguration: suspended})
			return err
		}},
		{"DeleteBucketPolicy", func(c *s3.Client) error {
			_, err := c.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: bkt})
			return err
		}},
	}
	for _, g := range guarded {
		t.Run(g.name, func(t *testing.T) {
			if err := g.call(engine); apiCode(err) != "AccessDenied" {
				t.Errorf("another role's session: %v, want AccessDenied", err)
			}
			if g.name == "DeleteObjectVersion" {
				if err := g.call(root); apiCode(err) != "AccessDenied" {
					t.Errorf("the root: %v, want AccessDenied", err)
				}
			}
		})
	}
	if _, _, err := emu.Store.GetObject("bkt", "t/data/f", first); err != nil {
		t.Errorf("version %s after the refused deletes: %v, want it kept", first, err)
	}
	if v, _ := emu.Store.Versioning("bkt"); v != "Enabled" {
		t.Errorf("versioning after a refused suspension: %q", v)
	}
	if err := guarded[0].call(deleter); err != nil {
		t.Errorf("the exempt role deletes a version: %v", err)
	}
	if _, _, err := emu.Store.GetObject("bkt", "t/data/f", first); err == nil {
		t.Errorf("version %s is still there after the exempt role deleted it", first)
	}
	if _, err := root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: bkt, Policy: aws.String(policy)}); err != nil {
		t.Errorf("the root replaces the policy: %v", err)
	}
}
