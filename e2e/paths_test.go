package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
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
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// dataFile describes one data file at path for tbl's current spec.
func dataFile(t *testing.T, tbl *table.Table, path string) iceberg.DataFile {
	t.Helper()
	b, err := iceberg.NewDataFileBuilder(tbl.Spec(), iceberg.EntryContentData, path, iceberg.ParquetFile, map[int]any{}, nil, nil, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	return b.Build()
}

// replaceObject deletes and writes an object (the embedded S3, gofakes3,
// merges a rewritten object's metadata with the old one's, so an
// overwrite keeps the first write's checksum and fails every read).
func replaceObject(t *testing.T, srv *server.Server, key string, body []byte) {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	if _, err := awsconfig.S3(cfg, ep).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(srv.Info.Bucket), Key: aws.String(key)}); err != nil {
		t.Fatal(err)
	}
	putObject(t, srv, key, body)
}

// Defect (issue 30): a principal holding only CATALOG_MANAGE on "*" made a
// catalog, committed to its own table a data file
// s3://<bucket>/evil/e/x/../../../demo/cr/vict2/data/<f>.parquet
// (iceberg-go AddDataFiles), dropped the table with purge, and the
// legal-held demo table lost that file: the commit was accepted, verify
// said files-inside-location ok, and the purge compared the path's raw
// text with its claim. The commit is now a 400 naming the path; a manifest
// rewritten after a clean commit to name the same path is flagged by
// verify, and the purge deletes nothing of the victim's.
func TestDotSegmentPathsDeleteNothingAcrossCatalogs(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	cr := newNamespace(t, "cr")
	victim := writtenTable(t, client(t, shared.Token), cr, "vict2", iceberg.Properties{"icehold.legal-hold": "true"}, false)
	rowsBefore := countRows(t, victim)
	victimData, _ := reachable(t, victim)
	target := slices.Sorted(func(yield func(string) bool) {
		for p := range victimData {
			if !yield(p) {
				return
			}
		}
	})[0]
	targetKey := strings.TrimPrefix(target, "s3://"+srv.Info.Bucket+"/")

	// The attacker: CATALOG_MANAGE on "*", which lets it make a catalog
	// and grant itself everything there.
	principal := "user:" + uniq("evil")
	mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/*/grants/"+principal, shared.Token, map[string]any{"privileges": []string{"CATALOG_MANAGE"}})
	tok, err := srv.AddToken(principal)
	if err != nil {
		t.Fatal(err)
	}
	evil := uniq("evil")
	wh := "s3://" + srv.Info.Bucket + "/" + evil
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", tok, map[string]any{"name": evil, "warehouse": wh})
	all := make([]string, len(authz.All))
	for i, p := range authz.All {
		all[i] = string(p)
	}
	mustCall(t, 200, "PUT", "/lifecycle/v1/catalogs/"+evil+"/grants/"+principal, tok, map[string]any{"privileges": all})
	mustCall(t, 200, "POST", "/v1/"+evil+"/namespaces", tok, map[string]any{"namespace": []string{"e"}})
	mustCall(t, 200, "POST", "/v1/"+evil+"/namespaces/e/tables", tok, map[string]any{"name": "x", "location": wh + "/e/x", "schema": rawSchema})
	cat, err := rest.NewCatalog(ctx, "icehold", shared.URL, rest.WithOAuthToken(tok), rest.WithWarehouseLocation(evil))
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{"e", "x"})
	if err != nil {
		t.Fatal(err)
	}
	escape := wh + "/e/x/" + strings.Repeat("../", 3) + targetKey

	// The commit is refused, naming the path.
	tx := tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, []iceberg.DataFile{dataFile(t, tbl, escape)}, nil); err != nil {
		t.Fatalf("stage the data file: %v", err)
	}
	if _, err := tx.Commit(ctx); err == nil || !strings.Contains(err.Error(), escape) {
		t.Errorf("commit of a data file %s: %v, want a 400 naming the path", escape, err)
	}

	// Stored anyway: a clean commit, then its manifest rewritten in S3.
	tx = tbl.NewTransaction()
	if err := tx.AddDataFiles(ctx, []iceberg.DataFile{dataFile(t, tbl, wh+"/e/x/data/clean.parquet")}, nil); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatalf("a clean commit: %v", err)
	}
	snap := tbl.CurrentSnapshot()
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := snap.Manifests(fs)
	if err != nil || len(mfs) != 1 {
		t.Fatalf("manifests of the clean commit: %d, %v", len(mfs), err)
	}
	var buf bytes.Buffer
	sid := snap.SnapshotID
	entry := iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &sid, nil, nil, dataFile(t, tbl, escape))
	mf, err := iceberg.WriteManifest(mfs[0].FilePath(), &buf, tbl.Metadata().Version(), tbl.Spec(), tbl.Schema(), sid, []iceberg.ManifestEntry{entry})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := objects.Parse(mfs[0].FilePath())
	replaceObject(t, srv, m.Key, buf.Bytes())
	buf.Reset()
	seq := snap.SequenceNumber
	if err := iceberg.WriteManifestList(tbl.Metadata().Version(), &buf, sid, snap.ParentSnapshotID, &seq, 0, []iceberg.ManifestFile{mf}); err != nil {
		t.Fatal(err)
	}
	ml, _ := objects.Parse(snap.ManifestList)
	replaceObject(t, srv, ml.Key, buf.Bytes())

	// verify names it.
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name     string   `json:"name"`
			OK       bool     `json:"ok"`
			Examples []string `json:"examples"`
		} `json:"checks"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+evil+"/namespaces/e/tables/x/verify", tok, nil), &rep)
	flagged := false
	for _, c := range rep.Checks {
		flagged = flagged || c.Name == "files-inside-location" && !c.OK && slices.Contains(c.Examples, escape)
	}
	if rep.OK || !flagged {
		t.Errorf("verify of a table naming %s: %+v, want files-inside-location failed naming it", escape, rep)
	}

	// The purge deletes nothing of the victim's.
	mustCall(t, 204, "DELETE", "/v1/"+evil+"/namespaces/e/tables/x?purgeRequested=true", tok, nil)
	var jobs struct {
		Jobs []jobJSON `json:"jobs"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+evil+"/purge-jobs", tok, nil), &jobs)
	if len(jobs.Jobs) != 1 {
		t.Fatalf("%d purge jobs", len(jobs.Jobs))
	}
	var job jobJSON
	deadline := time.Now().Add(time.Minute)
	for !store.Terminal(job.State) && time.Now().Before(deadline) {
		mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+evil+"/purge-jobs/"+jobs.Jobs[0].ID, tok, nil), &job)
		time.Sleep(50 * time.Millisecond)
	}
	if job.State != store.JobSucceeded || job.FilesSkipped < 1 {
		raw, _ := json.Marshal(job)
		t.Errorf("purge of e.x: %s, want SUCCEEDED with the escaping path skipped", raw)
	}
	left := bucketObjects(t, srv)
	for p := range victimData {
		if _, ok := left[p]; !ok {
			t.Errorf("the purge of %s.e.x deleted the legal-held table's %s", evil, p)
		}
	}
	victim, err = client(t, shared.Token).LoadTable(ctx, table.Identifier{cr, "vict2"})
	if err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, victim); n != rowsBefore {
		t.Errorf("the legal-held table scans %d rows, had %d", n, rowsBefore)
	}
}

// Register refuses metadata naming a path with a dot segment (its metadata
// log here; the metadata location itself too), naming it.
func TestRegisterRefusesDotSegmentPaths(t *testing.T) {
	srv := localOnly(t)
	ns := newNamespace(t, "regdot")
	tables := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/tables"
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "seed", "schema": rawSchema})
	var loaded struct {
		MetadataLocation string         `json:"metadata-location"`
		Metadata         map[string]any `json:"metadata"`
	}
	mustDecode(t, mustCall(t, 200, "GET", tables+"/seed", shared.Token, nil), &loaded)
	loc, _ := loaded.Metadata["location"].(string)
	mustCall(t, 204, "DELETE", tables+"/seed", shared.Token, nil)
	l, _ := objects.Parse(loc)
	escape := loc + "/../other/metadata/00000-x.metadata.json"
	m := loaded.Metadata
	m["metadata-log"] = []any{map[string]any{"metadata-file": escape, "timestamp-ms": 1}}
	raw, _ := json.Marshal(m)
	forged := putObject(t, srv, l.Key+"/metadata/00001-forged.metadata.json", raw)
	for name, metaLoc := range map[string]string{
		"metadata log":      forged,
		"metadata location": loc + "/metadata/../metadata/00001-forged.metadata.json",
	} {
		t.Run(name, func(t *testing.T) {
			st, body := call(t, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/register", shared.Token, map[string]any{"name": "t", "metadata-location": metaLoc})
			if st != 400 || !strings.Contains(string(body), "segment") {
				t.Errorf("register: %d %s, want 400 naming the path", st, body)
			}
		})
	}
	mustCall(t, 404, "GET", tables+"/t", shared.Token, nil)

	// A view's register takes the same path rule (it once read the key
	// literally and registered the view).
	var created struct {
		MetadataLocation string          `json:"metadata-location"`
		Metadata         json.RawMessage `json:"metadata"`
	}
	views := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/views"
	mustDecode(t, mustCall(t, 200, "POST", views, shared.Token, viewBody("dv", ns)), &created)
	mustCall(t, 204, "DELETE", views+"/dv", shared.Token, nil)
	vl, _ := objects.Parse(created.MetadataLocation)
	dir, file := path.Split(vl.Key)
	dotted := putObject(t, srv, dir+"../metadata/"+file, created.Metadata)
	st, body := call(t, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/register-view", shared.Token, map[string]any{"name": "v", "metadata-location": dotted})
	if st != 400 || !strings.Contains(string(body), "segment") {
		t.Errorf("register-view: %d %s, want 400 naming the path", st, body)
	}
	mustCall(t, 404, "GET", views+"/v", shared.Token, nil)
}
