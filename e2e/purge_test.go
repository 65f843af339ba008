package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/store"
)

// bucketObjects lists every object of the local warehouse bucket (key → ETag).
func bucketObjects(t *testing.T, srv *server.Server) map[string]string {
	t.Helper()
	out := map[string]string{}
	for path, o := range bucketListing(t, srv) {
		out[path] = aws.ToString(o.ETag)
	}
	return out
}

// bucketListing lists every object of the local warehouse bucket by URI.
func bucketListing(t *testing.T, srv *server.Server) map[string]s3types.Object {
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

// putObjects writes objects (URIs of the server's bucket) straight to S3,
// as an engine writing files it never commits does.
func putObjects(t *testing.T, srv *server.Server, uris ...string) {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	for _, u := range uris {
		key := strings.TrimPrefix(u, "s3://"+srv.Info.Bucket+"/")
		if _, err := awsconfig.S3(cfg, ep).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Info.Bucket), Key: aws.String(key), Body: strings.NewReader("uncommitted")}); err != nil {
			t.Fatal(err)
		}
	}
}

// assertNothingLeft checks SPEC §3's "SUCCEEDED means nothing is left": no
// object under the purged location, and the counters add up to what went.
func assertNothingLeft(t *testing.T, srv *server.Server, job jobJSON, loc string, before map[string]string, unreferenced int) {
	t.Helper()
	if left := objectsUnder(t, srv, loc); len(left) > 0 {
		t.Errorf("job %s is %s with %d objects left under %s: %v", job.ID, job.State, len(left), loc, sortedKeys(keysOf(left)))
	}
	if job.FilesUnreferenced != int64(unreferenced) || job.FilesDeleted+job.FilesUnreferenced+job.FilesMissing != int64(len(before)) || job.FilesSkipped != 0 {
		t.Errorf("counters: %d deleted, %d unreferenced, %d missing, %d skipped; want %d unreferenced and %d in all (what was under the location)",
			job.FilesDeleted, job.FilesUnreferenced, job.FilesMissing, job.FilesSkipped, unreferenced, len(before))
	}
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

// Defect: files an engine wrote under a table's location and never
// committed were left by the purge, which ended SUCCEEDED. After the
// reachable files, the purge lists the location its table owned alone and
// deletes what no metadata reached (files-unreferenced); a sibling location
// whose name extends the table's, another table and the warehouse around
// it keep every object.
func TestPurgeDeletesUncommittedWrites(t *testing.T) {
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "uncommitted")
	tbl := writtenTable(t, cat, ns, "t", nil, true)
	other := writtenTable(t, cat, ns, "t2", nil, false)
	loc := strings.TrimRight(tbl.Location(), "/")
	stray := []string{
		loc + "/data/00000-0-uncommitted.parquet",
		loc + "/data/id_bucket=3/00001-1-uncommitted.parquet",
		loc + "/metadata/snap-1-0-uncommitted.avro",
		loc + "/x/a%2Fb/deep/file",
	}
	outside := []string{loc + "-sibling/data/x.parquet", loc + "2/x.parquet"}
	putObjects(t, srv, append(stray, outside...)...)
	before := objectsUnder(t, srv, loc)
	kept := objectsUnder(t, srv, other.Location())
	all := bucketObjects(t, srv)
	for _, o := range outside {
		kept[o] = all[o]
	}

	job := waitJob(t, dropPurge(t, ns, "t").ID, store.JobSucceeded, time.Minute)
	assertNothingLeft(t, srv, job, loc, before, len(stray))
	now := bucketObjects(t, srv)
	for k, etag := range kept {
		if now[k] != etag {
			t.Errorf("an object outside the purged location went: %s", k)
		}
	}
}

// The final listing pages (1000 keys a page, each page one DeleteObjects):
// 1,005 uncommitted files all go. make run's S3 answered every listing whole,
// so a page of 1,005 keys failed its DeleteObjects and the job never ended.
func TestFinalListingPagesPastAThousand(t *testing.T) {
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "manystray")
	tbl := writtenTable(t, cat, ns, "t", nil, false)
	loc := strings.TrimRight(tbl.Location(), "/")
	stray := make([]string, 1005)
	for i := range stray {
		stray[i] = fmt.Sprintf("%s/data/uncommitted-%04d.parquet", loc, i)
	}
	putObjects(t, srv, stray...)
	before := objectsUnder(t, srv, loc)
	job := waitJob(t, dropPurge(t, ns, "t").ID, store.JobSucceeded, 2*time.Minute)
	assertNothingLeft(t, srv, job, loc, before, len(stray))
}

// wideCatalog makes a catalog (named from prefix) whose purges may delete
// inside its whole warehouse (purge.delete-scope=warehouse), with
// namespace n.
func wideCatalog(t *testing.T, srv *server.Server, prefix string) (name, warehouse string, cat *rest.Catalog) {
	t.Helper()
	name = uniq(prefix)
	warehouse = "s3://" + srv.Info.Bucket + "/" + name
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": name, "warehouse": warehouse,
		"properties": map[string]string{"purge.delete-scope": "warehouse"}})
	cat, err := rest.NewCatalog(context.Background(), "icehold", shared.URL, rest.WithOAuthToken(shared.Token), rest.WithWarehouseLocation(name))
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.CreateNamespace(context.Background(), table.Identifier{"n"}, nil); err != nil {
		t.Fatal(err)
	}
	return name, warehouse, cat
}

// purgeWide drops table n.t of wideCatalog's catalog name with purge and
// waits for its job to succeed.
func purgeWide(t *testing.T, name string) jobJSON {
	t.Helper()
	mustCall(t, 204, "DELETE", "/v1/"+name+"/namespaces/n/tables/t?purgeRequested=true", shared.Token, nil)
	var list struct {
		Jobs []jobJSON `json:"jobs"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+name+"/purge-jobs", shared.Token, nil), &list)
	if len(list.Jobs) != 1 {
		t.Fatalf("%d jobs", len(list.Jobs))
	}
	var job jobJSON
	waitFor(t, "the job", time.Minute, func() bool {
		mustDecode(t, mustCall(t, 200, "GET", router.JobPath(name, list.Jobs[0].ID), shared.Token, nil), &job)
		return job.State == store.JobSucceeded
	})
	return job
}

// The final listing covers only a location the table owned alone: a table
// with gc.enabled=false keeps its data files and the files no metadata
// reached, and the warehouse scope (purge.delete-scope=warehouse) widens
// what reachable files may go, never what is listed.
func TestPurgeListsOnlyWhatItsTableOwnedAlone(t *testing.T) {
	srv := localOnly(t)

	t.Run("gc.enabled=false", func(t *testing.T) {
		cat := client(t, shared.Token)
		ns := newNamespace(t, "gcoff")
		tbl := writtenTable(t, cat, ns, "t", iceberg.Properties{"gc.enabled": "false"}, false)
		data, _ := reachable(t, tbl)
		stray := strings.TrimRight(tbl.Location(), "/") + "/data/uncommitted.parquet"
		putObjects(t, srv, stray)
		job := waitJob(t, dropPurge(t, ns, "t").ID, store.JobSucceeded, time.Minute)
		now := bucketObjects(t, srv)
		for p := range data {
			if _, ok := now[p]; !ok {
				t.Errorf("gc.enabled=false but %s went", p)
			}
		}
		if _, ok := now[stray]; !ok || job.FilesUnreferenced != 0 {
			t.Errorf("gc.enabled=false: the uncommitted file left %v, files-unreferenced %d; want it kept, 0", ok, job.FilesUnreferenced)
		}
	})

	t.Run("warehouse scope", func(t *testing.T) {
		name, wh, cat := wideCatalog(t, srv, "wide")
		tbl := writtenTable(t, cat, "n", "t", nil, false)
		loc := strings.TrimRight(tbl.Location(), "/")
		loose := []string{wh + "/n/loose.parquet", wh + "/elsewhere/x.parquet", loc + "-sibling/x.parquet"}
		putObjects(t, srv, append(loose, loc+"/data/uncommitted.parquet")...)
		before := objectsUnder(t, srv, loc)
		job := purgeWide(t, name)
		assertNothingLeft(t, srv, job, loc, before, 1)
		now := bucketObjects(t, srv)
		for _, p := range loose {
			if _, ok := now[p]; !ok {
				t.Errorf("an unowned object of the warehouse outside the table's location went: %s", p)
			}
		}
	})
}

// Defect: a purge racing a partition drop ended SUCCEEDED with the drop's
// two manifests, its manifest list and (when the drop had written it before
// its commit failed) its metadata file left under the purged location: the
// drop's commit lost, so no metadata reached them. Now the purge's final
// listing deletes them (files-unreferenced); when the drop's commit wins,
// the purge deletes them as reachable files. The purge's plan waits for the
// drop's answer: what a writer puts under a location after the purge listed
// it is beyond any purge (see docs/design/purge.md, Async purge).
func TestPurgeRacingAPartitionDropLeavesNothing(t *testing.T) {
	embeddedAWS(t)
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "droprace")

	// gate holds the purge pipeline's plan step until answered is closed.
	gate := func(t *testing.T, answered <-chan struct{}) {
		srv.Purge.SetCrash(func(p string) error {
			if p == "plan.start" {
				select {
				case <-answered:
				case <-time.After(time.Minute):
				}
			}
			return nil
		})
		t.Cleanup(func() { srv.Purge.SetCrash(nil) })
	}
	partitionDrop := func(name string) (int, []byte) {
		return call(t, "POST", dropPath(ns, name), shared.Token, dropBody(cell{1, day1}, cell{2, day2}))
	}

	t.Run("the partition drop's commit loses", func(t *testing.T) {
		tbl := teamTable(t, cat, ns, "loses")
		loc := strings.TrimRight(tbl.Location(), "/")
		before := objectsUnder(t, srv, loc)
		_, metaPrefix, _ := strings.Cut(loc+"/metadata/", srv.Info.Bucket)
		// The drop's metadata file waits until the purge has taken the
		// table: its manifests and manifest list are written by then, and
		// its commit finds the table gone.
		reached, release, answered := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var once sync.Once
		srv.S3Emulator.SetObserver(func(r *http.Request) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, metaPrefix) && strings.HasSuffix(r.URL.Path, ".metadata.json") {
				once.Do(func() { close(reached) })
				<-release
			}
		})
		defer srv.S3Emulator.SetObserver(nil)
		gate(t, answered)
		status := make(chan int, 1)
		go func() {
			code, _ := partitionDrop("loses")
			status <- code
		}()
		select {
		case <-reached:
		case <-time.After(time.Minute):
			t.Fatal("the partition drop never wrote its metadata file")
		}
		job := dropPurge(t, ns, "loses")
		close(release)
		if code := <-status; code == 200 {
			t.Fatalf("the partition drop committed after the table was dropped")
		}
		srv.S3Emulator.SetObserver(nil)
		written := objectsUnder(t, srv, loc)
		close(answered)
		if len(written)-len(before) < 4 {
			t.Fatalf("the losing drop wrote %d objects, want its manifests, manifest list and metadata file", len(written)-len(before))
		}
		done := waitJob(t, job.ID, store.JobSucceeded, time.Minute)
		assertNothingLeft(t, srv, done, loc, written, len(written)-len(before))
	})

	t.Run("the partition drop's commit wins", func(t *testing.T) {
		tbl := teamTable(t, cat, ns, "wins")
		loc := strings.TrimRight(tbl.Location(), "/")
		if code, body := partitionDrop("wins"); code != 200 {
			t.Fatalf("partition drop: %d %s", code, body)
		}
		written := objectsUnder(t, srv, loc)
		done := waitJob(t, dropPurge(t, ns, "wins").ID, store.JobSucceeded, time.Minute)
		assertNothingLeft(t, srv, done, loc, written, 0)
	})

	t.Run("both at once", func(t *testing.T) {
		for i := range 3 {
			name := fmt.Sprintf("race%d", i)
			tbl := teamTable(t, cat, ns, name)
			loc := strings.TrimRight(tbl.Location(), "/")
			answered := make(chan struct{})
			gate(t, answered)
			status := make(chan int, 1)
			go func() {
				code, _ := partitionDrop(name)
				status <- code
			}()
			job := dropPurge(t, ns, name)
			code := <-status
			written := objectsUnder(t, srv, loc)
			close(answered)
			done := waitJob(t, job.ID, store.JobSucceeded, time.Minute)
			if left := objectsUnder(t, srv, loc); len(left) > 0 {
				t.Errorf("round %d (partition drop %d): %d objects left under %s", i, code, len(left), loc)
			}
			if done.FilesDeleted+done.FilesUnreferenced+done.FilesMissing != int64(len(written)) {
				t.Errorf("round %d (partition drop %d): %d deleted + %d unreferenced + %d missing, want the %d objects under the location",
					i, code, done.FilesDeleted, done.FilesUnreferenced, done.FilesMissing, len(written))
			}
			t.Logf("round %d: partition drop %d, %d deleted, %d unreferenced", i, code, done.FilesDeleted, done.FilesUnreferenced)
		}
	})
}
