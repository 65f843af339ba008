package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/partitions"
)

// vendedFor loads a table asking for vended credentials as token, checks
// the answer is kept by no cache, and returns the storage credential and
// the table's refresh endpoint.
func vendedFor(t *testing.T, token, cat, ns, name string) (storageCredential, string) {
	t.Helper()
	st, h, body := callHeaders(t, "GET", "/v1/"+cat+"/namespaces/"+ns+"/tables/"+name, token, nil,
		"X-Iceberg-Access-Delegation", "vended-credentials")
	if st != http.StatusOK {
		t.Fatalf("load %s.%s: %d %s", ns, name, st, body)
	}
	if cc := h.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("a load answer with credentials: Cache-Control %q, want no-store", cc)
	}
	var res struct {
		Config map[string]string   `json:"config"`
		Creds  []storageCredential `json:"storage-credentials"`
	}
	mustDecode(t, body, &res)
	if len(res.Creds) != 1 {
		t.Fatalf("load %s.%s: %d storage credentials, want 1", ns, name, len(res.Creds))
	}
	return res.Creds[0], "/" + strings.TrimPrefix(res.Config["client.refresh-credentials-endpoint"], "/")
}

// refreshed calls a table's credentials endpoint as token.
func refreshed(t *testing.T, token, endpoint string) storageCredential {
	t.Helper()
	st, h, body := callHeaders(t, "GET", endpoint, token, nil)
	if st != http.StatusOK {
		t.Fatalf("GET %s: %d %s", endpoint, st, body)
	}
	if cc := h.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("the credentials endpoint's answer: Cache-Control %q, want no-store", cc)
	}
	var res struct {
		Creds []storageCredential `json:"storage-credentials"`
	}
	mustDecode(t, body, &res)
	if len(res.Creds) != 1 {
		t.Fatalf("GET %s: %d storage credentials, want 1", endpoint, len(res.Creds))
	}
	return res.Creds[0]
}

// putWith writes an object under a credential's prefix with its keys.
func putWith(t *testing.T, c storageCredential, rel, body string) error {
	t.Helper()
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(c.Prefix, "s3://"), "/")
	_, err := vendedS3(localOnly(t), c.Config).PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(prefix + "/" + rel), Body: bytes.NewReader([]byte(body))})
	return err
}

// Vending follows the lifecycle: a table under a legal hold (its own, its
// namespace's or its catalog's) gets read-only sessions, on load and on
// refresh, whoever asks (the admin and a plain writer alike); a live table
// gets write sessions. Every answer carrying keys is Cache-Control:
// no-store.
func TestVendingFollowsLegalHolds(t *testing.T) {
	localOnly(t)
	embeddedAWS(t)
	ctx := context.Background()
	held := iceberg.Properties{"icehold.legal-hold": "true"}
	name, cat := softCatalog(t, map[string]string{"vended-credentials": "allowed"})
	heldName, heldCat := softCatalog(t, map[string]string{"vended-credentials": "allowed", "icehold.legal-hold": "true"})
	ns, heldNS := uniq("vl"), uniq("vlh")
	for _, c := range []struct {
		cat   *rest.Catalog
		ns    string
		props iceberg.Properties
	}{{cat, ns, nil}, {cat, heldNS, held}, {heldCat, ns, nil}} {
		if err := c.cat.CreateNamespace(ctx, table.Identifier{c.ns}, c.props); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ cat, ns, name string }{{name, ns, "live"}, {name, heldNS, "t"}, {heldName, ns, "t"}} {
		mustCall(t, 200, "POST", "/v1/"+c.cat+"/namespaces/"+c.ns+"/tables", shared.Token, map[string]any{"name": c.name, "schema": rawSchema})
	}
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces/"+ns+"/tables", shared.Token, map[string]any{"name": "held", "schema": rawSchema, "properties": held})
	writerIn := map[string]string{}
	for _, c := range []string{name, heldName} {
		writerIn[c] = grantTo(t, shared.Token, c, []authz.Privilege{authz.TableRead, authz.TableWrite})
	}
	cases := []struct {
		what, cat, ns, table string
		writes               bool
	}{
		{"a live table", name, ns, "live", true},
		{"a legal-held table", name, ns, "held", false},
		{"a table of a legal-held namespace", name, heldNS, "t", false},
		{"a table of a legal-held catalog", heldName, ns, "t", false},
	}
	for _, c := range cases {
		for who, token := range map[string]string{"admin": shared.Token, "writer": writerIn[c.cat]} {
			t.Run(c.what+"/"+who, func(t *testing.T) {
				cred, endpoint := vendedFor(t, token, c.cat, c.ns, c.table)
				for when, cred := range map[string]storageCredential{"loaded": cred, "refreshed": refreshed(t, token, endpoint)} {
					err := putWith(t, cred, "data/engine.parquet", "x")
					switch {
					case c.writes && err != nil:
						t.Errorf("%s session: write a data file: %v", when, err)
					case !c.writes && s3Code(err) != "AccessDenied":
						t.Errorf("%s session: write a data file: %v, want AccessDenied (read-only while legal-held)", when, err)
					}
				}
			})
		}
	}
}

// No engine writes a file icehold would read as metadata: a vended session
// writes no key in any of the spellings register takes (.metadata.json,
// .gz.metadata.json, .metadata.json.gz), anywhere under its table, and
// register refuses every other spelling (.METADATA.JSON, a .json): what an
// engine may write under metadata/ (manifests, manifest lists) register
// never reads as metadata.
func TestEnginesWriteNoMetadataFile(t *testing.T) {
	localOnly(t)
	embeddedAWS(t)
	name, _ := softCatalog(t, map[string]string{"vended-credentials": "allowed"})
	ns := uniq("spell")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces/"+ns+"/tables", shared.Token, map[string]any{"name": "t", "schema": rawSchema})
	cred, _ := vendedFor(t, shared.Token, name, ns, "t")
	writes := []struct {
		key   string
		allow bool
	}{
		{"metadata/00009-x.metadata.json", false},
		{"metadata/00009-x.gz.metadata.json", false},
		{"metadata/00009-x.metadata.json.gz", false},
		{"data/x.metadata.json", false},
		{"metadata/snap-1-1-x.avro", true},
		{"metadata/x-m0.avro", true},
		{"metadata/00009-x.METADATA.JSON", true},
		{"metadata/00009-x.json", true},
	}
	for _, w := range writes {
		err := putWith(t, cred, w.key, "{}")
		if w.allow && err != nil {
			t.Errorf("write %s: %v, want it written (engines write it)", w.key, err)
		}
		if !w.allow && s3Code(err) != "AccessDenied" {
			t.Errorf("write %s: %v, want AccessDenied", w.key, err)
		}
		if !w.allow || !strings.Contains(w.key, "JSON") && !strings.HasSuffix(w.key, ".json") {
			continue
		}
		st, body := call(t, "POST", "/v1/"+name+"/namespaces/"+ns+"/register", shared.Token,
			map[string]any{"name": uniq("r"), "metadata-location": cred.Prefix + "/" + w.key})
		if _, _, msg := errorModel(t, body); st != http.StatusBadRequest || !strings.Contains(msg, ".metadata.json") {
			t.Errorf("register %s: %d %s, want a 400 naming the metadata file names", w.key, st, body)
		}
	}
}

// vended-credentials.duration stops at 1 hour, the role-chaining cap of
// the deployed chain, and says so.
func TestVendingDurationBound(t *testing.T) {
	localOnly(t)
	for _, c := range []struct {
		d    string
		want int
	}{{"PT1H", 201}, {"PT15M", 201}, {"PT61M", 400}, {"PT2H", 400}, {"PT12H", 400}} {
		st, body := call(t, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": uniq("dur"), "warehouse": "s3://icehold-warehouse/" + uniq("dur"),
			"properties": map[string]string{"vended-credentials": "allowed", "vended-credentials.duration": c.d}})
		if st != c.want {
			t.Errorf("duration %s: %d %s, want %d", c.d, st, body, c.want)
		}
		if st == 400 && !strings.Contains(string(body), "role chaining") {
			t.Errorf("duration %s: %s, want the reason (role chaining)", c.d, body)
		}
	}
}

// verifyFiles runs verify and returns its files-intact check.
func verifyFiles(t *testing.T, cat, ns, name string) partitions.Check {
	t.Helper()
	var rep partitions.Report
	mustDecode(t, mustCall(t, 200, "GET", lifecycleTablePath(cat, ns, name)+"/verify", shared.Token, nil), &rep)
	for _, c := range rep.Checks {
		if c.Name == partitions.CheckFiles {
			if c.OK != rep.OK && c.OK {
				t.Logf("verify: %+v", rep)
			}
			return c
		}
	}
	t.Fatalf("verify answered no %s check: %+v", partitions.CheckFiles, rep)
	return partitions.Check{}
}

// An engine's attempts on a live table's committed files, with the keys a
// load vends it and with the static engine policy: overwriting a data
// file, a manifest and a manifest list succeeds at S3 (the session writes
// its table), deleting one is refused, and so is writing any metadata
// file name.
// verify names each file changed, with its key; repair copies back the
// newest prior version of each; after it the table scans the same rows.
// Neither session may delete a version; what has no version left (the
// break-glass identity deleted them all) repair refuses, 409 naming it,
// changing nothing.
func TestEngineOverwritesAreNamedAndRepaired(t *testing.T) {
	srv := localOnly(t)
	embeddedAWS(t)
	ctx := context.Background()
	name, cat := softCatalog(t, map[string]string{"vended-credentials": "allowed"})
	ns := uniq("attempt")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl := writtenTable(t, cat, ns, "t", nil, true)
	before := countRows(t, tbl)
	if c := verifyFiles(t, name, ns, "t"); !c.OK {
		t.Fatalf("verify of an intact table: %+v", c)
	}
	// A data file of the current snapshot, a manifest that does not name
	// it (verify reads what a manifest names from the manifest itself)
	// and the oldest snapshot's manifest list.
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md := tbl.Metadata()
	manifests, err := md.CurrentSnapshot().Manifests(fs)
	if err != nil || len(manifests) < 2 {
		t.Fatalf("the current snapshot's manifests: %d, %v; want two or more", len(manifests), err)
	}
	entries, err := manifests[0].FetchEntries(fs, true)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the entries of %s: %v", manifests[0].FilePath(), err)
	}
	dataFile, manifest, manifestList := entries[0].DataFile().FilePath(), manifests[len(manifests)-1].FilePath(), md.Snapshots()[0].ManifestList
	cred, _ := vendedFor(t, shared.Token, name, ns, "t")
	engine := vendedS3(srv, cred.Config)
	bucketKey := func(uri string) (*string, *string) {
		b, k, _ := strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
		return aws.String(b), aws.String(k)
	}
	changed := []string{dataFile, manifest, manifestList}
	for _, f := range changed {
		b, k := bucketKey(f)
		if _, err := engine.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: k, Body: strings.NewReader("garbage")}); err != nil {
			t.Fatalf("overwrite %s with the vended keys: %v", f, err)
		}
	}
	b, k := bucketKey(dataFile)
	if _, err := engine.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: k}); s3Code(err) != "AccessDenied" {
		t.Errorf("delete %s with the vended keys: %v, want AccessDenied", dataFile, err)
	}
	// The documented engine policy: an engine not vended credentials signs
	// with a session of the engine role, which a client configuration
	// carries (locally: /v1/config's defaults; in AWS the operator's
	// engine role holding the policy). Only the api function may assume
	// the vending role (its trust policy), as in AWS.
	var conf struct {
		Defaults map[string]string `json:"defaults"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/config?warehouse="+name, shared.Token, nil), &conf)
	policyEngine := vendedS3(srv, conf.Defaults)
	if len(entries) > 1 {
		other := entries[len(entries)-1].DataFile().FilePath()
		b, k := bucketKey(other)
		if _, err := policyEngine.PutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: k, Body: strings.NewReader("engine policy")}); err != nil {
			t.Fatalf("overwrite %s with the engine policy: %v", other, err)
		}
		if _, err := policyEngine.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: k}); s3Code(err) != "AccessDenied" {
			t.Errorf("delete %s with the engine policy: %v, want AccessDenied", other, err)
		}
		changed = append(changed, other)
	}
	// Neither may delete a prior version (their policies grant no version
	// action, and the bucket policy denies it to all but icehold's
	// deleting roles): every overwritten byte stays recoverable.
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	vs, err := awsconfig.S3(cfg, ep).ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: k})
	if err != nil || len(vs.Versions) < 2 {
		t.Fatalf("the versions of %s after an overwrite: %d, %v; want the prior one kept", dataFile, len(vs.Versions), err)
	}
	for _, v := range vs.Versions {
		for who, c := range map[string]*s3.Client{"vended": engine, "engine policy": policyEngine} {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: k, VersionId: v.VersionId}); s3Code(err) != "AccessDenied" {
				t.Errorf("delete version %s of %s with the %s keys: %v, want AccessDenied", aws.ToString(v.VersionId), dataFile, who, err)
			}
		}
	}
	mb, mk := bucketKey(tbl.MetadataLocation())
	for _, spelling := range []string{".metadata.json", ".metadata.json.gz", ".gz.metadata.json"} {
		key := strings.TrimSuffix(aws.ToString(mk), ".metadata.json") + "-forged" + spelling
		if _, err := policyEngine.PutObject(ctx, &s3.PutObjectInput{Bucket: mb, Key: aws.String(key), Body: strings.NewReader("{}")}); s3Code(err) != "AccessDenied" {
			t.Errorf("write %s with the engine policy: %v, want AccessDenied", key, err)
		}
	}

	c := verifyFiles(t, name, ns, "t")
	if c.OK || c.Violations != int64(len(changed)) {
		t.Fatalf("verify after the overwrites: %+v; want %d files named", c, len(changed))
	}
	for _, f := range changed {
		if !slices.ContainsFunc(c.Examples, func(e string) bool { return strings.HasPrefix(e, f+" ") }) {
			t.Errorf("verify names %q; want %s among them", c.Examples, f)
		}
	}

	repair := lifecycleTablePath(name, ns, "t") + "/repair"
	var rep partitions.RepairReport
	mustDecode(t, mustCall(t, 200, "POST", repair, shared.Token, nil), &rep)
	if len(rep.Restored) != len(changed) {
		t.Errorf("repair restored %+v, want the %d changed files", rep.Restored, len(changed))
	}
	if c := verifyFiles(t, name, ns, "t"); !c.OK {
		t.Errorf("verify after repair: %+v", c)
	}
	mustDecode(t, mustCall(t, 200, "POST", repair, shared.Token, nil), &rep)
	if len(rep.Restored) != 0 {
		t.Errorf("a second repair restored %+v, want nothing", rep.Restored)
	}
	if n := countRows(t, loadTable(t, cat, ns, "t")); n != before {
		t.Errorf("%d rows after repair, want %d", n, before)
	}

	// What no version can restore (the local break-glass identity, which
	// the guard exempts, deleted every version of a file): repair refuses,
	// 409 naming it, and changes nothing.
	admin := awsconfig.S3(cfg, ep)
	if vs, err = admin.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: k}); err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Versions {
		if _, err := admin.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: b, Key: k, VersionId: v.VersionId}); err != nil {
			t.Fatalf("the break-glass identity deletes version %s: %v", aws.ToString(v.VersionId), err)
		}
	}
	st, body := call(t, "POST", repair, shared.Token, nil)
	if _, _, msg := errorModel(t, body); st != http.StatusConflict || !strings.Contains(msg, dataFile) {
		t.Errorf("repair of a file without versions: %d %s, want a 409 naming %s", st, body, dataFile)
	}
	if c := verifyFiles(t, name, ns, "t"); c.Violations != 1 {
		t.Errorf("verify after a refused repair: %+v, want the one lost file", c)
	}
}

// A legal hold, a soft drop or a revoke of TABLE_WRITE takes effect on a
// write session vended before it when the session expires, at most
// vended-credentials.duration after its issue (STS cannot revoke a
// session; the docs state the bound): until then the old keys write (an
// overwrite leaves the prior version: repair), from then on they are
// refused, and what is vended after the change cannot write.
func TestVendedSessionsEndWithTheirDuration(t *testing.T) {
	srv := localOnly(t)
	embeddedAWS(t)
	name, _ := softCatalog(t, map[string]string{"vended-credentials": "allowed", "vended-credentials.duration": "PT15M"})
	ns := uniq("bound")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	writer := grantTo(t, shared.Token, name, []authz.Privilege{authz.TableRead, authz.TableWrite})
	tables := "/v1/" + name + "/namespaces/" + ns + "/tables"
	hold := map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"icehold.legal-hold": "true"}}}}
	changes := []struct {
		what  string
		apply func(table string)
		after func(t *testing.T, table string) // what a new vend gives
	}{
		{"legal hold", func(tbl string) { mustCall(t, 200, "POST", tables+"/"+tbl, shared.Token, hold) }, func(t *testing.T, tbl string) {
			cred, _ := vendedFor(t, writer, name, ns, tbl)
			if err := putWith(t, cred, "data/new.parquet", "x"); s3Code(err) != "AccessDenied" {
				t.Errorf("a session vended after the hold wrote: %v", err)
			}
		}},
		{"soft drop", func(tbl string) { mustCall(t, 204, "DELETE", tables+"/"+tbl, shared.Token, nil) }, func(t *testing.T, tbl string) {
			if st, _ := call(t, "GET", tables+"/"+tbl+"/credentials", writer, nil); st != http.StatusNotFound {
				t.Errorf("credentials of a soft-dropped table: %d, want 404", st)
			}
		}},
		{"revoke", func(string) {
			mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+name+"/grants/"+principalOf(t, writer), shared.Token, map[string]any{"privileges": []string{"TABLE_READ"}})
		}, func(t *testing.T, tbl string) {
			cred, _ := vendedFor(t, writer, name, ns, tbl)
			if err := putWith(t, cred, "data/new.parquet", "x"); s3Code(err) != "AccessDenied" {
				t.Errorf("a session vended after the revoke wrote: %v", err)
			}
		}},
	}
	for i, c := range changes {
		t.Run(c.what, func(t *testing.T) {
			tbl := fmt.Sprintf("t%d", i)
			mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": tbl, "schema": rawSchema})
			srv.SetCredentialsClock(nil)
			cred, _ := vendedFor(t, writer, name, ns, tbl)
			c.apply(tbl)
			if err := putWith(t, cred, "data/old-session.parquet", "x"); err != nil {
				t.Errorf("within its duration the old session writes (the documented bound): %v", err)
			}
			c.after(t, tbl)
			srv.SetCredentialsClock(func() time.Time { return time.Now().Add(15*time.Minute + time.Second) })
			defer srv.SetCredentialsClock(nil)
			if err := putWith(t, cred, "data/old-session-2.parquet", "x"); s3Code(err) != "ExpiredToken" {
				t.Errorf("past vended-credentials.duration the old session: %v, want ExpiredToken", err)
			}
		})
	}
}

// versionedS3: a client of the warehouse's S3, which must keep versions
// (the test skips on one that keeps none).
func versionedS3(t *testing.T, srv *server.Server) *s3.Client {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	s3c := awsconfig.S3(cfg, ep)
	if v, err := s3c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: aws.String(srv.Info.Bucket)}); err != nil || v.Status != "Enabled" {
		t.Skipf("the warehouse keeps no versions here (%v): run under make test-moto", err)
	}
	return s3c
}

// On the versioned warehouse (the embedded S3's, moto's; the test skips
// on an S3 that keeps none) a purge leaves nothing
// under the table's location, versions and delete markers included, even
// of a file an engine overwrote (two versions) before the drop.
func TestPurgeLeavesNoVersion(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	s3c := versionedS3(t, srv)
	cat := client(t, shared.Token)
	ns := uniq("versions")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl := writtenTable(t, cat, ns, "t", nil, true)
	data, _ := reachable(t, tbl)
	for f := range data {
		_, key, _ := strings.Cut(strings.TrimPrefix(f, "s3://"), "/")
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Info.Bucket), Key: aws.String(key), Body: strings.NewReader("overwritten")}); err != nil {
			t.Fatal(err)
		}
		break
	}
	_, prefix, _ := strings.Cut(strings.TrimPrefix(tbl.Location(), "s3://"), "/")
	path := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/tables/t"
	mustCall(t, 204, "DELETE", path+"?purgeRequested=true", shared.Token, nil)
	jobs := jobsOf(t, ns, "t")
	if len(jobs) != 1 {
		t.Fatalf("%d jobs after the drop, want 1", len(jobs))
	}
	waitJob(t, jobs[0].ID, "SUCCEEDED", 2*time.Minute)
	out, err := s3c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(srv.Info.Bucket), Prefix: aws.String(prefix + "/")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Versions) + len(out.DeleteMarkers); n > 0 {
		t.Errorf("%d versions and delete markers left under %s after SUCCEEDED", n, prefix)
	}
}

// Defect (the simulation's warehouse-scope corner): with
// purge.delete-scope=warehouse a purge deleted a reachable file outside its
// table's location by key only, so on a versioned warehouse the bytes stayed
// as a noncurrent version behind a delete marker: the final listing prunes
// the versions of the prefix the table owned, never of a key outside it.
// Every icehold delete leaves nothing (docs/design/storagesweep.md); such a
// key's versions go with it.
func TestWarehouseScopePurgeLeavesNoVersionOutsideItsLocation(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	s3c := versionedS3(t, srv)
	name, _, cat := wideCatalog(t, srv, "widever")
	tbl := writtenTable(t, cat, "n", "t", nil, false)
	data, _ := reachable(t, tbl)
	var src string
	for f := range data {
		src = f
		break
	}
	// A copy of one of its data files under a prefix no table owns, added
	// to the table by a second snapshot.
	_, srcKey, _ := strings.Cut(strings.TrimPrefix(src, "s3://"), "/")
	outsideKey := name + "/shared/x.parquet"
	if _, err := s3c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(srv.Info.Bucket), Key: aws.String(outsideKey), CopySource: aws.String(srv.Info.Bucket + "/" + srcKey)}); err != nil {
		t.Fatal(err)
	}
	tx := tbl.NewTransaction()
	if err := tx.AddFiles(ctx, []string{"s3://" + srv.Info.Bucket + "/" + outsideKey}, nil, false); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	purgeWide(t, name)
	out, err := s3c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(srv.Info.Bucket), Prefix: aws.String(outsideKey)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Versions) + len(out.DeleteMarkers); n > 0 {
		t.Errorf("%d versions and delete markers of %s (outside the table, deleted under the warehouse scope) left after SUCCEEDED", n, outsideKey)
	}
}

// On the versioned warehouse (the test skips on an S3 that keeps none),
// repair restores
// what an engine overwrote or deleted, the table then scans the same rows,
// and a second repair changes nothing. (An engine's own keys cannot delete;
// an operator's can, and the prior version stays all the same.)
func TestRepairRestoresFromVersions(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	s3c := versionedS3(t, srv)
	cat := client(t, shared.Token)
	ns := uniq("repair")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl := writtenTable(t, cat, ns, "t", nil, true)
	before := countRows(t, tbl)
	md := tbl.Metadata()
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := md.CurrentSnapshot().Manifests(fs)
	if err != nil || len(manifests) < 2 {
		t.Fatalf("%d manifests, %v", len(manifests), err)
	}
	// Two files named by manifests other than the one overwritten below.
	var files []string
	for _, m := range manifests[:len(manifests)-1] {
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			files = append(files, e.DataFile().FilePath())
		}
	}
	if len(files) < 2 {
		t.Fatalf("%d files outside the last manifest; the test needs 2", len(files))
	}
	key := func(uri string) *string {
		_, k, _ := strings.Cut(strings.TrimPrefix(uri, "s3://"), "/")
		return aws.String(k)
	}
	bucket := aws.String(srv.Info.Bucket)
	for _, f := range []string{files[0], manifests[len(manifests)-1].FilePath(), md.CurrentSnapshot().ManifestList} {
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: key(f), Body: strings.NewReader("garbage")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: key(files[len(files)-1])}); err != nil {
		t.Fatal(err)
	}
	if c := verifyFiles(t, shared.Catalog, ns, "t"); c.OK || c.Violations < 3 {
		t.Fatalf("verify after the damage: %+v", c)
	}
	var rep partitions.RepairReport
	mustDecode(t, mustCall(t, 200, "POST", lifecycleTablePath(shared.Catalog, ns, "t")+"/repair", shared.Token, nil), &rep)
	if len(rep.Restored) != 4 {
		t.Errorf("repair restored %+v, want the 4 damaged files", rep.Restored)
	}
	if c := verifyFiles(t, shared.Catalog, ns, "t"); !c.OK {
		t.Errorf("verify after repair: %+v", c)
	}
	mustDecode(t, mustCall(t, 200, "POST", lifecycleTablePath(shared.Catalog, ns, "t")+"/repair", shared.Token, nil), &rep)
	if len(rep.Restored) != 0 {
		t.Errorf("a second repair restored %+v", rep.Restored)
	}
	if n := countRows(t, loadTable(t, cat, ns, "t")); n != before {
		t.Errorf("%d rows after repair, want %d", n, before)
	}
}

// versionsOf lists the versions and delete markers of the local warehouse
// bucket by URI (how many each key has).
func versionsOf(t *testing.T, srv *server.Server) map[string]int {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	out := map[string]int{}
	p := s3.NewListObjectVersionsPaginator(awsconfig.S3(cfg, ep), &s3.ListObjectVersionsInput{Bucket: aws.String(srv.Info.Bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			out["s3://"+srv.Info.Bucket+"/"+aws.ToString(v.Key)]++
		}
		for _, m := range page.DeleteMarkers {
			out["s3://"+srv.Info.Bucket+"/"+aws.ToString(m.Key)]++
		}
	}
	return out
}

// Issue 29's attempts with old keys: a write session vended before a legal
// hold, a soft drop or a revoke of TABLE_WRITE overwrites a committed data
// file within its bound (the documented one: its duration), and an engine
// on the engine policy another. Nothing is lost: verify names both (after the undrop, for the soft drop; the
// held table stays held), repair restores its prior version, and the table
// scans the same rows as before.
func TestOldSessionsOverwritesAreRepaired(t *testing.T) {
	srv := localOnly(t)
	embeddedAWS(t)
	ctx := context.Background()
	name, cat := softCatalog(t, map[string]string{"vended-credentials": "allowed", "vended-credentials.duration": "PT15M"})
	ns := uniq("oldkeys")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	writer := grantTo(t, shared.Token, name, []authz.Privilege{authz.TableRead, authz.TableWrite})
	tables := "/v1/" + name + "/namespaces/" + ns + "/tables/"
	var conf struct {
		Defaults map[string]string `json:"defaults"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/config?warehouse="+name, shared.Token, nil), &conf)
	engineKeys := conf.Defaults
	hold := map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"icehold.legal-hold": "true"}}}}
	changes := []struct {
		what          string
		apply, before func(tbl string) // the change; what comes before repair
	}{
		{"legal hold", func(tbl string) { mustCall(t, 200, "POST", tables+tbl, shared.Token, hold) }, func(string) {}},
		{"soft drop", func(tbl string) { mustCall(t, 204, "DELETE", tables+tbl, shared.Token, nil) }, func(tbl string) {
			mustCall(t, 200, "POST", lifecycleTablePath(name, ns, tbl)+"/undrop", shared.Token, map[string]any{})
		}},
		{"revoke", func(string) {
			mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+name+"/grants/"+principalOf(t, writer), shared.Token, map[string]any{"privileges": []string{"TABLE_READ"}})
		}, func(string) {}},
	}
	for i, c := range changes {
		t.Run(c.what, func(t *testing.T) {
			tblName := fmt.Sprintf("t%d", i)
			tbl := writtenTable(t, cat, ns, tblName, nil, false)
			rows := countRows(t, tbl)
			data, _ := reachable(t, tbl)
			var files []string
			for f := range data {
				files = append(files, f)
			}
			if len(files) < 2 {
				t.Fatalf("%d data files; the test needs 2", len(files))
			}
			files = files[:2]
			cred, _ := vendedFor(t, writer, name, ns, tblName)
			c.apply(tblName)
			// The old vended session, and the engine policy (which knows no
			// table's state), each overwrite one.
			for i, keys := range []map[string]string{cred.Config, engineKeys} {
				bucket, key, _ := strings.Cut(strings.TrimPrefix(files[i], "s3://"), "/")
				if _, err := vendedS3(srv, keys).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
					Body: strings.NewReader("garbage")}); err != nil {
					t.Fatalf("overwrite %s (%d): %v", files[i], i, err)
				}
			}
			c.before(tblName)
			v := verifyFiles(t, name, ns, tblName)
			for _, f := range files {
				if v.OK || !slices.ContainsFunc(v.Examples, func(e string) bool { return strings.HasPrefix(e, f+" ") }) {
					t.Fatalf("verify after the overwrites: %+v; want %s named", v, f)
				}
			}
			var rep partitions.RepairReport
			mustDecode(t, mustCall(t, 200, "POST", lifecycleTablePath(name, ns, tblName)+"/repair", shared.Token, nil), &rep)
			if len(rep.Restored) != 2 {
				t.Errorf("repair restored %+v, want %v", rep.Restored, files)
			}
			if v := verifyFiles(t, name, ns, tblName); !v.OK {
				t.Errorf("verify after repair: %+v", v)
			}
			if n := countRows(t, loadTable(t, cat, ns, tblName)); n != rows {
				t.Errorf("%d rows after repair, want %d", n, rows)
			}
		})
	}
}
