package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
)

// Defect: the local STS let any session assume the vending role again (no
// trust policy, no sts:AssumeRole check): a reader's read-only session for
// one table re-assumed it without a session policy and wrote into another
// table. The vending role trusts the functions' role alone, and a vended
// session holds no sts:AssumeRole, as in AWS.
func TestVendedSessionCannotAssumeTheVendingRole(t *testing.T) {
	srv := localOnly(t)
	embeddedAWS(t)
	ctx := context.Background()
	name, cat := softCatalog(t, map[string]string{"vended-credentials": "allowed"})
	ns := uniq("sts")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{"mine", "theirs"} {
		if _, err := cat.CreateTable(ctx, table.Identifier{ns, tbl}, eventSchema); err != nil {
			t.Fatal(err)
		}
	}
	reader := grantTo(t, shared.Token, name, []authz.Privilege{authz.TableRead})
	status, _, body := callHeaders(t, "GET", "/v1/"+name+"/namespaces/"+ns+"/tables/mine", reader, nil,
		"X-Iceberg-Access-Delegation", "vended-credentials")
	if status != http.StatusOK {
		t.Fatalf("load: %d %s", status, body)
	}
	var res struct {
		Creds []storageCredential `json:"storage-credentials"`
	}
	mustDecode(t, body, &res)
	if len(res.Creds) != 1 {
		t.Fatalf("storage-credentials %+v", res.Creds)
	}
	c := res.Creds[0].Config
	stsc := sts.New(sts.Options{Region: server.Region, BaseEndpoint: aws.String(srv.Info.S3Endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: c["s3.access-key-id"], SecretAccessKey: c["s3.secret-access-key"], SessionToken: c["s3.session-token"]}, nil
		})})
	out, err := stsc.AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: aws.String(emulators.RoleARN(server.VendingRole)), RoleSessionName: aws.String("escape")})
	if code := s3Code(err); code != "AccessDenied" {
		t.Errorf("a vended session assumed the vending role again: %v, want AccessDenied", err)
	}
	if err != nil {
		return
	}
	// What the defect allowed: a write into another table with the new keys.
	k := out.Credentials
	escaped := vendedS3(srv, map[string]string{"s3.access-key-id": *k.AccessKeyId, "s3.secret-access-key": *k.SecretAccessKey, "s3.session-token": *k.SessionToken})
	loc := strings.TrimPrefix(res.Creds[0].Prefix, "s3://")
	bucket, key, _ := strings.Cut(loc, "/")
	theirs := strings.TrimSuffix(key, "/")
	theirs = theirs[:strings.LastIndex(theirs, "/")+1] + "theirs/data/x.parquet"
	if _, err := escaped.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(theirs), Body: bytes.NewReader([]byte("x"))}); err == nil {
		t.Errorf("the escaped session wrote %s", theirs)
	}
}

// Defect: /v1/config handed every principal the emulators' root keys
// (icehold / icehold-local-secret) when a catalog's vended-credentials was
// not required, and a SigV4-signed catalog request with them ran as the
// account's root: a TABLE_READ principal granted itself CATALOG_MANAGE.
// A client's configuration carries a session of the engine role, which
// holds the documented engine policy: it reads and writes data files,
// deletes nothing, writes no metadata file, and signs no admin request.
func TestClientConfigurationIsTheEngineIdentity(t *testing.T) {
	srv := localOnly(t)
	embeddedAWS(t)
	ctx := context.Background()
	reader := grantTo(t, shared.Token, shared.Catalog, []authz.Privilege{authz.TableRead})
	var cfg struct {
		Defaults map[string]string `json:"defaults"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/config?warehouse="+shared.Catalog, reader, nil), &cfg)
	d := cfg.Defaults
	if d["s3.access-key-id"] == "" || d["s3.access-key-id"] == server.AccessKey || d["s3.session-token"] == "" {
		t.Fatalf("the client configuration's keys: %q (token %t), want an engine session", d["s3.access-key-id"], d["s3.session-token"] != "")
	}
	keys := aws.Credentials{AccessKeyID: d["s3.access-key-id"], SecretAccessKey: d["s3.secret-access-key"], SessionToken: d["s3.session-token"]}

	// A catalog request signed with them is the engine role's session's:
	// no admin, and no grant of its own.
	self := principalOf(t, reader)
	req, _ := http.NewRequest("PUT", shared.URL+"/lifecycle/v1/catalogs/"+shared.Catalog+"/grants/"+self,
		strings.NewReader(`{"privileges":["CATALOG_MANAGE","TABLE_READ"]}`))
	signAs(t, req, keys)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("a grant signed with the client configuration's keys: %d, want 403", res.StatusCode)
	}

	engine := vendedS3(srv, d)
	f := newFixture(t, shared.Token)
	var loaded struct {
		Metadata struct {
			Location string `json:"location"`
		} `json:"metadata"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/"+shared.Catalog+"/namespaces/"+f.ns+"/tables/t", shared.Token, nil), &loaded)
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(loaded.Metadata.Location, "s3://"), "/")
	put := func(key string) error {
		_, err := engine.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("x"))})
		return err
	}
	if err := put(prefix + "/data/engine.parquet"); err != nil {
		t.Errorf("an engine writes a data file: %v", err)
	}
	if code := s3Code(put(prefix + "/metadata/99999-x.metadata.json")); code != "AccessDenied" {
		t.Errorf("an engine writes a metadata file: %q, want AccessDenied", code)
	}
	_, err = engine.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + "/data/engine.parquet")})
	if code := s3Code(err); code != "AccessDenied" {
		t.Errorf("an engine deletes an object: %q, want AccessDenied", code)
	}
}

// signAs signs a request for the local API (execute-api) with keys.
func signAs(t *testing.T, req *http.Request, keys aws.Credentials) {
	t.Helper()
	var body []byte
	if req.GetBody != nil {
		rc, _ := req.GetBody()
		body, _ = io.ReadAll(rc)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), keys, req, hex.EncodeToString(sum[:]), "execute-api", server.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
}
