package e2e

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/localserver"
	"github.com/icehold/icehold/shared/router"
)

// bucketObjects lists every object of the local warehouse bucket (key → ETag).
func bucketObjects(t *testing.T, srv *localserver.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for path, o := range bucketListing(t, srv) {
		out[path] = aws.ToString(o.ETag)
	}
	return out
}

// bucketListing lists every object of the local warehouse bucket by URI.
func bucketListing(t *testing.T, srv *localserver.Server) map[string]s3types.Object {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	out := map[string]s3types.Object{}
	p := s3.NewListObjectsV2Paginator(awsconfig.S3(cfg, ep), &s3.ListObjectsV2Input{Bucket: aws.String(srv.Info.Bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			out["s3://"+srv.Info.Bucket+"/"+aws.ToString(o.Key)] = o
		}
	}
	return out
}

// reachable lists what a table's metadata reaches: data and delete files of
// every manifest of every snapshot, manifests, manifest lists, statistics and
// every metadata file of the log, the current one included.
func reachable(t *testing.T, tbl *table.Table) (data, meta map[string]bool) {
	t.Helper()
	ctx := context.Background()
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	data, meta = map[string]bool{}, map[string]bool{tbl.MetadataLocation(): true}
	md := tbl.Metadata()
	for e := range md.PreviousFiles() {
		meta[e.MetadataFile] = true
	}
	for _, sn := range md.Snapshots() {
		meta[sn.ManifestList] = true
		mfs, err := sn.Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			meta[mf.FilePath()] = true
			entries, err := mf.FetchEntries(fs, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				data[e.DataFile().FilePath()] = true
			}
		}
	}
	return data, meta
}

// jobJSON is a purge job as the API answers it.
type jobJSON = router.JobView

func jobsOf(t *testing.T, ns, tbl string) []jobJSON {
	t.Helper()
	var res struct {
		Jobs []jobJSON `json:"jobs"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+shared.Catalog+"/purge-jobs?namespace="+url.QueryEscape(ns)+"&table="+tbl, shared.Token, nil), &res)
	return res.Jobs
}

func waitJob(t *testing.T, id, state string, within time.Duration) jobJSON {
	t.Helper()
	deadline := time.Now().Add(within)
	var j jobJSON
	for {
		mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+shared.Catalog+"/purge-jobs/"+id, shared.Token, nil), &j)
		if j.State == state {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s after %v, want %s: %+v", id, j.State, within, state, j)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writtenTable makes a partitioned table with several snapshots, a schema
// change and (withDeletes) position deletes written by iceberg-go.
func writtenTable(t *testing.T, cat *rest.Catalog, ns, name string, props iceberg.Properties, withDeletes bool) *table.Table {
	t.Helper()
	ctx := context.Background()
	if props == nil {
		props = iceberg.Properties{}
	}
	props["write.delete.mode"] = "merge-on-read"
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, name}, eventSchema, catalog.WithPartitionSpec(&eventSpec), catalog.WithProperties(props))
	if err != nil {
		t.Fatal(err)
	}
	tbl = appendRows(t, tbl, rows(t, 0, 12, false))
	tbl = appendRows(t, tbl, rows(t, 12, 12, false))
	tx := tbl.NewTransaction()
	if err := tx.UpdateSchema(true, false).AddColumn([]string{"note"}, iceberg.PrimitiveTypes.String, "", false, nil).Commit(); err != nil {
		t.Fatal(err)
	}
	if tbl, err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tbl = appendRows(t, tbl, rows(t, 24, 6, true))
	if withDeletes {
		tx := tbl.NewTransaction()
		if err := tx.Delete(ctx, iceberg.EqualTo(iceberg.Reference("id"), int64(3)), nil); err != nil {
			t.Fatalf("delete rows: %v", err)
		}
		if tbl, err = tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return tbl
}

func TestPurgeDeletesWhatIsReachableAndNothingElse(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := uniq("purge")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	victim := writtenTable(t, cat, ns, "t", nil, true)
	writtenTable(t, cat, ns, "t2", nil, false) // a sibling whose name extends the victim's
	data, meta := reachable(t, victim)
	deletes := 0
	for _, sn := range victim.Metadata().Snapshots() {
		if sn.Summary != nil && sn.Summary.Properties["added-position-delete-files"] != "" {
			deletes++
		}
	}
	if deletes == 0 {
		t.Fatalf("the victim has no position delete files: the test needs them")
	}
	before := bucketObjects(t, srv)
	for p := range data {
		if _, ok := before[p]; !ok {
			t.Fatalf("reachable %s is not in the bucket", p)
		}
	}

	path := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/tables/t"
	mustCall(t, 204, "DELETE", path+"?purgeRequested=true", shared.Token, nil)
	jobs := jobsOf(t, ns, "t")
	if len(jobs) != 1 {
		t.Fatalf("%d jobs after the drop, want 1", len(jobs))
	}
	job := jobs[0]

	// While the job holds the name.
	if st, body := call(t, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables", shared.Token, `{"name":"t","schema":`+schemaJSON+`}`); st == 409 {
		if !strings.Contains(string(body), job.ID) {
			t.Errorf("create at a purging name: 409 does not name the job: %s", body)
		}
	} else if st != 200 {
		t.Errorf("create at a purging name: %d %s", st, body)
	} else {
		waitJob(t, job.ID, "SUCCEEDED", time.Minute)
		t.Fatalf("create succeeded while the job was %s", job.State)
	}
	if st, body := call(t, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/register", shared.Token,
		map[string]any{"name": "t", "metadata-location": "s3://icehold-warehouse/nope.json"}); st != 409 && st != 400 {
		t.Errorf("register at a purging name: %d %s", st, body)
	}
	if st, _ := call(t, "GET", path, shared.Token, nil); st != 404 {
		t.Errorf("load of a purged table: %d, want 404", st)
	}
	if st, _ := call(t, "DELETE", path+"?purgeRequested=true", shared.Token, nil); st != 404 {
		t.Errorf("repeated drop: %d, want 404", st)
	}
	if n := len(jobsOf(t, ns, "t")); n != 1 {
		t.Errorf("%d jobs after a repeated drop, want 1", n)
	}

	done := waitJob(t, job.ID, "SUCCEEDED", 2*time.Minute)
	after := bucketObjects(t, srv)
	for p := range data {
		if _, ok := after[p]; ok {
			t.Errorf("reachable data or delete file survived: %s", p)
		}
	}
	for p := range meta {
		if _, ok := after[p]; ok {
			t.Errorf("reachable metadata survived: %s", p)
		}
	}
	for k, etag := range before {
		if data[k] || meta[k] {
			continue
		}
		if after[k] != etag {
			t.Errorf("an object the job does not reach was deleted or changed: %s", k)
		}
	}
	if want := int64(len(data) + len(meta)); done.FilesDeleted != want || done.FilesSkipped != 0 {
		t.Errorf("counters: deleted %d skipped %d, want deleted %d (every reachable file once)", done.FilesDeleted, done.FilesSkipped, want)
	}
	if done.BatchesDone != done.BatchesTotal || done.BatchesTotal == 0 {
		t.Errorf("batches %d of %d", done.BatchesDone, done.BatchesTotal)
	}

	// The name is free again; the new table's objects are its own.
	fresh := writtenTable(t, cat, ns, "t", nil, false)
	if fresh.Location() == victim.Location() {
		t.Errorf("the new table reuses the dropped table's location")
	}
	fdata, _ := reachable(t, fresh)
	now := bucketObjects(t, srv)
	for p := range fdata {
		if _, ok := now[p]; !ok {
			t.Errorf("new table's file missing: %s", p)
		}
	}
	t.Logf("job %s: %d batches, %d files deleted", done.ID, done.BatchesTotal, done.FilesDeleted)
}

func TestPurgeHonoursGCAndLocation(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := uniq("gc")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}

	t.Run("gc.enabled=false keeps data and delete files", func(t *testing.T) {
		tbl := writtenTable(t, cat, ns, "keep", iceberg.Properties{"gc.enabled": "false"}, true)
		data, meta := reachable(t, tbl)
		mustCall(t, 204, "DELETE", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/keep?purgeRequested=true", shared.Token, nil)
		job := waitJob(t, jobsOf(t, ns, "keep")[0].ID, "SUCCEEDED", time.Minute)
		after := bucketObjects(t, srv)
		for p := range data {
			if _, ok := after[p]; !ok {
				t.Errorf("gc.enabled=false but %s was deleted", p)
			}
		}
		for p := range meta {
			if _, ok := after[p]; ok {
				t.Errorf("metadata %s survived", p)
			}
		}
		if job.FilesDeleted != int64(len(meta)) {
			t.Errorf("deleted %d, want %d metadata files", job.FilesDeleted, len(meta))
		}
	})

	t.Run("a reachable file outside the location is skipped and counted", func(t *testing.T) {
		owner := writtenTable(t, cat, ns, "owner", nil, false)
		// A file of the first append: it predates the schema change.
		fs, _ := owner.FS(ctx)
		mfs, err := owner.Metadata().Snapshots()[0].Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := mfs[0].FetchEntries(fs, false)
		if err != nil {
			t.Fatal(err)
		}
		foreign := entries[0].DataFile().FilePath()
		borrower, err := cat.CreateTable(ctx, table.Identifier{ns, "borrower"}, eventSchema, catalog.WithPartitionSpec(&eventSpec))
		if err != nil {
			t.Fatal(err)
		}
		tx := borrower.NewTransaction()
		if err := tx.AddFiles(ctx, []string{foreign}, nil, false); err != nil {
			t.Fatalf("add a foreign file: %v", err)
		}
		if borrower, err = tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		data, meta := reachable(t, borrower)
		mustCall(t, 204, "DELETE", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/borrower?purgeRequested=true", shared.Token, nil)
		job := waitJob(t, jobsOf(t, ns, "borrower")[0].ID, "SUCCEEDED", time.Minute)
		after := bucketObjects(t, srv)
		if _, ok := after[foreign]; !ok {
			t.Errorf("the file outside the table's location was deleted: %s", foreign)
		}
		if job.FilesSkipped != 1 {
			t.Errorf("files-skipped = %d, want 1", job.FilesSkipped)
		}
		if want := int64(len(data) - 1 + len(meta)); job.FilesDeleted != want {
			t.Errorf("files-deleted = %d, want %d", job.FilesDeleted, want)
		}
	})
}
