package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/local/server"
)

type storageCredential struct {
	Prefix string            `json:"prefix"`
	Config map[string]string `json:"config"`
}

// vendedS3 is an S3 client signing with a storage credential's keys.
func vendedS3(srv *server.Server, c map[string]string) *s3.Client {
	return s3.New(s3.Options{
		Region: server.Region, BaseEndpoint: aws.String(srv.Info.S3Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: c["s3.access-key-id"], SecretAccessKey: c["s3.secret-access-key"], SessionToken: c["s3.session-token"]}, nil
		}),
	})
}

func s3Code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// loadVended loads a table asking for vended credentials.
func loadVended(t *testing.T, cat, ns, name string) (metadataLocation string, creds []storageCredential) {
	t.Helper()
	status, _, body := callHeaders(t, "GET", "/v1/"+cat+"/namespaces/"+ns+"/tables/"+name, shared.Token, nil,
		"X-Iceberg-Access-Delegation", "vended-credentials")
	if status != http.StatusOK {
		t.Fatalf("load %s: %d %s", name, status, body)
	}
	var res struct {
		Loc   string              `json:"metadata-location"`
		Creds []storageCredential `json:"storage-credentials"`
	}
	mustDecode(t, body, &res)
	return res.Loc, res.Creds
}

// Vended credentials read and write their table and nothing else: iceberg-go
// appends with them; with the same keys a delete of any object, a write of
// a metadata file and a read of a sibling table are AccessDenied; and
// iceberg-go refreshes them through /credentials across an expiry without
// failing a write.
func TestVendedCredentials(t *testing.T) {
	srv := localOnly(t)
	embeddedAWS(t)
	ctx := context.Background()
	name, cat := softCatalog(t, map[string]string{"vended-credentials": "allowed"})
	ns := uniq("vended")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	// The credentials' clock: sessions issued now expire 3 s from now
	// (real time, which iceberg-go refreshes by).
	srv.SetCredentialsClock(func() time.Time { return time.Now().Add(-time.Hour + 3*time.Second) })
	t.Cleanup(func() { srv.SetCredentialsClock(nil) })
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, "t"}, eventSchema)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateTable(ctx, table.Identifier{ns, "sibling"}, eventSchema); err != nil {
		t.Fatal(err)
	}
	tbl = appendRows(t, tbl, rows(t, 0, 3, false))

	siblingLoc, _ := loadVended(t, name, ns, "sibling")
	loc, creds := loadVended(t, name, ns, "t")
	if len(creds) != 1 || !strings.HasPrefix(loc, creds[0].Prefix) || creds[0].Config["s3.session-token-expires-at-ms"] == "" {
		t.Fatalf("storage-credentials %+v for %s: want one, for the table's prefix, with its expiry", creds, loc)
	}
	vended := vendedS3(srv, creds[0].Config)
	bucketKey := func(uri string) (string, string) {
		b, k, _ := strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
		return b, k
	}
	bucket, metaKey := bucketKey(loc)
	prefix := strings.TrimPrefix(creds[0].Prefix, "s3://"+bucket+"/")
	list, err := vended.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix + "/")})
	if err != nil || len(list.Contents) == 0 {
		t.Fatalf("list the table's own prefix with the vended key: %v", err)
	}
	if _, err := vended.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(metaKey)}); err != nil {
		t.Errorf("read the table's metadata with the vended key: %v", err)
	}
	if _, err := vended.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + "/data/extra.parquet"), Body: bytes.NewReader([]byte("x"))}); err != nil {
		t.Errorf("write a data file with the vended key: %v", err)
	}
	_, sibKey := bucketKey(siblingLoc)
	refused := []struct {
		name string
		do   func() error
	}{
		{"delete a data file", func() error {
			_, err := vended.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: list.Contents[0].Key})
			return err
		}},
		{"delete the metadata file", func() error {
			_, err := vended.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(metaKey)})
			return err
		}},
		{"write a metadata file", func() error {
			_, err := vended.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + "/metadata/99999-x.metadata.json"), Body: bytes.NewReader([]byte("{}"))})
			return err
		}},
		{"read a sibling table", func() error {
			_, err := vended.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(sibKey)})
			return err
		}},
		{"list the bucket", func() error {
			_, err := vended.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
			return err
		}},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			if code := s3Code(r.do()); code != "AccessDenied" {
				t.Errorf("%s with the vended key: %q, want AccessDenied", r.name, code)
			}
		})
	}
	for _, o := range list.Contents {
		if _, err := vended.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
			t.Errorf("%s is gone after the refused deletes: %v", aws.ToString(o.Key), err)
		}
	}

	// Past the expiry (the credentials' clock moves an hour on): the old
	// key is refused, and iceberg-go, which refreshes 1.5 s before the
	// expiry, keeps appending.
	srv.SetCredentialsClock(func() time.Time { return time.Now().Add(time.Hour) })
	time.Sleep(2 * time.Second)
	if _, err := vended.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(metaKey)}); s3Code(err) != "ExpiredToken" {
		t.Errorf("the expired key: %v, want ExpiredToken", err)
	}
	var mu sync.Mutex
	keys := map[string]bool{}
	srv.S3Emulator.SetObserver(func(r *http.Request) {
		// The engine's writes (icehold writes the metadata files itself).
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/"+ns+"/t-") && !strings.HasSuffix(r.URL.Path, ".metadata.json") {
			_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
			mu.Lock()
			keys[strings.SplitN(cred, "/", 2)[0]] = true
			mu.Unlock()
		}
	})
	t.Cleanup(func() { srv.S3Emulator.SetObserver(nil) })
	tbl = appendRows(t, tbl, rows(t, 3, 3, false))
	srv.S3Emulator.SetObserver(nil)
	mu.Lock()
	for k := range keys {
		if !strings.HasPrefix(k, "ASIA") || k == creds[0].Config["s3.access-key-id"] {
			t.Errorf("the append wrote with key %q; want only a refreshed session's", k)
		}
	}
	if len(keys) == 0 {
		t.Error("the append wrote no file the observer saw")
	}
	mu.Unlock()
	if n := countRows(t, tbl); n != 6 {
		t.Errorf("%d rows after the refreshed append, want 6", n)
	}
}

// Iceberg Java's S3FileIO refreshes vended credentials only where the table
// answer names client.refresh-credentials-endpoint (resolved against the
// catalog URI as RESTUtil.resolveEndpoint does), and its
// VendedCredentialsProvider accepts exactly one S3 credential from the
// endpoint, with the four keys. Both hold for a table that owns two
// prefixes (moved while its snapshots reach the old one), the single
// credential still covering every file the table's snapshots reach; and a
// revalidation under a new name after a rename is no 304 (the answer names
// another refresh endpoint).
func TestVendedCredentialsForJavaEngines(t *testing.T) {
	srv := localOnly(t)
	embeddedAWS(t)
	ctx := context.Background()
	name, cat := softCatalog(t, map[string]string{"vended-credentials": "allowed"})
	ns := uniq("javavended")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tables := "/v1/" + name + "/namespaces/" + ns + "/tables/"
	load := func(t *testing.T, tbl string, headers ...string) (int, http.Header, map[string]string, []storageCredential) {
		t.Helper()
		st, h, body := callHeaders(t, "GET", tables+tbl, shared.Token, nil, append([]string{"X-Iceberg-Access-Delegation", "vended-credentials"}, headers...)...)
		var res struct {
			Config map[string]string   `json:"config"`
			Creds  []storageCredential `json:"storage-credentials"`
		}
		if st == http.StatusOK {
			mustDecode(t, body, &res)
		}
		return st, h, res.Config, res.Creds
	}
	// refresh calls the endpoint as VendedCredentialsProvider does and
	// applies its checks.
	refresh := func(t *testing.T, config map[string]string) storageCredential {
		t.Helper()
		ep := config["client.refresh-credentials-endpoint"]
		if ep == "" || strings.HasPrefix(ep, "http") {
			t.Fatalf("config %v: want client.refresh-credentials-endpoint, a path relative to the catalog URI", config)
		}
		path := "/" + strings.TrimPrefix(ep, "/")
		st, body := call(t, "GET", path, shared.Token, nil)
		if st != http.StatusOK {
			t.Fatalf("GET %s (the refresh endpoint): %d %s", path, st, body)
		}
		var res struct {
			Creds []storageCredential `json:"storage-credentials"`
		}
		mustDecode(t, body, &res)
		var s3creds []storageCredential
		for _, c := range res.Creds {
			if strings.HasPrefix(c.Prefix, "s3") {
				s3creds = append(s3creds, c)
			}
		}
		if len(s3creds) != 1 {
			t.Fatalf("the refresh endpoint answered %d S3 credentials (%+v); Iceberg Java accepts exactly one", len(s3creds), res.Creds)
		}
		for _, k := range []string{"s3.access-key-id", "s3.secret-access-key", "s3.session-token", "s3.session-token-expires-at-ms"} {
			if s3creds[0].Config[k] == "" {
				t.Errorf("the refreshed credential has no %s", k)
			}
		}
		return s3creds[0]
	}
	covers := func(t *testing.T, c storageCredential, files map[string]bool) {
		t.Helper()
		for f := range files {
			if !strings.HasPrefix(f, c.Prefix) {
				t.Errorf("%s is outside the credential's prefix %s", f, c.Prefix)
			}
		}
	}

	t.Run("one prefix", func(t *testing.T) {
		tbl := writtenTable(t, cat, ns, "one", nil, false)
		_, _, config, creds := load(t, "one")
		if len(creds) != 1 {
			t.Fatalf("%d storage credentials, want 1", len(creds))
		}
		c := refresh(t, config)
		data, meta := reachable(t, tbl)
		covers(t, c, data)
		covers(t, c, meta)
	})
	t.Run("moved table", func(t *testing.T) {
		tbl := writtenTable(t, cat, ns, "moved", nil, false)
		setLocation(t, name, ns, "moved", "s3://"+srv.Info.Bucket+"/"+name+"/"+ns+"/moved_home")
		tbl = appendRows(t, loadTable(t, cat, ns, "moved"), rows(t, 10, 3, false))
		_, _, config, creds := load(t, "moved")
		if len(creds) != 1 {
			t.Fatalf("%d storage credentials (%+v), want 1", len(creds), creds)
		}
		c := refresh(t, config)
		data, meta := reachable(t, tbl)
		covers(t, c, data)
		covers(t, c, meta)
		covers(t, creds[0], data)
	})
	t.Run("s3a location", func(t *testing.T) {
		// Engines on Hadoop-style locations write s3a:// paths; the
		// credential's prefix must be spelt as the table's files are.
		tbl, err := cat.CreateTable(ctx, table.Identifier{ns, "hadoop"}, eventSchema, catalog.WithPartitionSpec(&eventSpec),
			catalog.WithLocation("s3a://"+srv.Info.Bucket+"/"+name+"/"+ns+"/hadoop_home"))
		if err != nil {
			t.Fatal(err)
		}
		tbl = appendRows(t, tbl, rows(t, 0, 3, false))
		_, _, config, creds := load(t, "hadoop")
		if len(creds) != 1 {
			t.Fatalf("%d storage credentials, want 1", len(creds))
		}
		data, meta := reachable(t, tbl)
		covers(t, creds[0], data)
		covers(t, creds[0], meta)
		covers(t, refresh(t, config), data)
	})
	t.Run("rename", func(t *testing.T) {
		writtenTable(t, cat, ns, "before", nil, false)
		st, h, config, _ := load(t, "before")
		if st != http.StatusOK || h.Get("ETag") == "" {
			t.Fatalf("load: %d, ETag %q", st, h.Get("ETag"))
		}
		mustCall(t, 204, "POST", "/v1/"+name+"/tables/rename", shared.Token, map[string]any{
			"source":      map[string]any{"namespace": []string{ns}, "name": "before"},
			"destination": map[string]any{"namespace": []string{ns}, "name": "after"},
		})
		st, _, after, _ := load(t, "after", "If-None-Match", h.Get("ETag"))
		if st != http.StatusOK {
			t.Fatalf("revalidation under the new name with the old name's tag: %d, want 200 (the refresh endpoint changed)", st)
		}
		if after["client.refresh-credentials-endpoint"] == config["client.refresh-credentials-endpoint"] || !strings.Contains(after["client.refresh-credentials-endpoint"], "/after/") {
			t.Errorf("refresh endpoint after the rename %q (before %q)", after["client.refresh-credentials-endpoint"], config["client.refresh-credentials-endpoint"])
		}
		refresh(t, after)
	})
}
