package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/store"
)

// Done when 6 (SPEC §5): after a retention drop and the table's snapshot
// age, the retention sweep expires the snapshots before the drop; the files
// only they referenced (the dropped days' data and delete files, their
// manifests and manifest lists) are deleted through the delete pipeline as
// a job of kind expire; every file a retained snapshot references is still
// there, and iceberg-go still reads the oldest retained snapshot. Snapshot
// times are real; the sweep's clock is the test's.
func TestExpiryDeletesDroppedFilesThroughThePipeline(t *testing.T) {
	localOnly(t)
	o := testOptions(t.TempDir())
	o.RetentionEvery = -1
	srv, cat := ownServer(t, o)
	ctx := context.Background()
	ns := uniq("exp")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	// Days relative to today: with P7D the first two are expired, the
	// third is not (also two hours on).
	today := time.Now().UTC().Truncate(24 * time.Hour)
	day := func(ago int) string { return today.AddDate(0, 0, -ago).Format("2006-01-02") }
	d1, d2, d3 := day(12), day(11), day(2)
	props := iceberg.Properties{
		"write.delete.mode": "merge-on-read", "format-version": "2",
		table.MaxSnapshotAgeMsKey: "3600000", table.MinSnapshotsToKeepKey: "2",
	}
	build := func(name string) *table.Table {
		tbl, err := cat.CreateTable(ctx, table.Identifier{ns, name}, teamSchema, catalog.WithPartitionSpec(&teamSpec), catalog.WithProperties(props))
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range []string{d1, d2, d3} {
			tbl = appendRows(t, tbl, teamRows(t, allTeams, []string{d}, 4, 12*i))
		}
		// Position deletes in (1, d1) and (2, d3), in one delete manifest.
		tx := tbl.NewTransaction()
		if err := tx.Delete(ctx, iceberg.NewOr(iceberg.EqualTo(iceberg.Reference("v"), int64(0)), iceberg.EqualTo(iceberg.Reference("v"), int64(28))), nil); err != nil {
			t.Fatal(err)
		}
		tbl, err = tx.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return tbl
	}
	events := build("events")
	other := build("other") // the same properties, no policy: never touched
	otherLoc := other.MetadataLocation()
	otherObjects := objectsUnder(t, srv, other.Location())
	ended := filesIn(t, events, func(c cell) bool { return c.day == d1 || c.day == d2 })
	if len(ended) != 7 {
		t.Fatalf("files of the days to drop: %d, want 6 data files and 1 delete file", len(ended))
	}
	before := events.Metadata().Snapshots()

	admin := srv.Info.AdminToken
	if status, out := callAt(t, srv.Info.RESTURL, "PUT", lifecyclePath(srv, ns, "events", "/partition-retention"), admin, map[string]string{"field": "ts_day", "keep": "P7D"}); status != 200 {
		t.Fatalf("set policy: %d %s", status, out)
	}

	// The drop: nothing is old enough to expire yet, nothing is deleted.
	res, err := srv.Partitions.SweepRetention(ctx, time.Now(), 0)
	if err != nil || res.Dropped != 1 || res.DataFilesEnded != 6 || res.DeleteFilesEnded != 1 || res.SnapshotsExpired != 0 || len(res.ExpireJobs) != 0 || len(res.Failed) > 0 {
		t.Fatalf("the drop's sweep: %+v %v", res, err)
	}
	objects := bucketObjects(t, srv)
	for f := range ended {
		if _, ok := objects[f]; !ok {
			t.Errorf("%s went with the drop, before its snapshots expired", f)
		}
	}
	events = loadTable(t, cat, ns, "events")
	dropID := events.CurrentSnapshot().SnapshotID
	events = appendRows(t, events, teamRows(t, allTeams, []string{d3}, 2, 1000))
	appendID := events.CurrentSnapshot().SnapshotID
	retainedFiles := snapshotFiles(t, events, dropID, appendID)
	atDrop := cellCounts(t, events, table.WithSnapshotID(dropID))

	// Two hours on: the four snapshots before the drop are older than the
	// hour and beyond the two newest; drop and append stay.
	sizes := objectSizes(t, srv)
	res, err = srv.Partitions.SweepRetention(ctx, time.Now().Add(2*time.Hour), 0)
	if err != nil || res.SnapshotsExpired != 4 || len(res.ExpireJobs) != 1 || len(res.Failed) > 0 {
		t.Fatalf("the expiry's sweep: %+v %v", res, err)
	}
	jobID := res.ExpireJobs[0]
	var j store.Job
	waitFor(t, "the expire job", 2*time.Minute, func() bool {
		j = jobOf(t, srv, jobID)
		return store.Terminal(j.State)
	})
	if j.State != store.JobSucceeded || j.Kind != store.KindExpire || j.FilesDeleted != int64(res.FilesToDelete) || j.FilesSkipped != 0 || j.FilesMissing != 0 {
		t.Fatalf("expire job: %+v, want SUCCEEDED with %d files deleted", j, res.FilesToDelete)
	}
	// Counted by kind and size as the metadata describes them: the bytes
	// of every file deleted but the manifest lists (the metadata has no
	// size for those).
	after, wantBytes := objectSizes(t, srv), int64(0)
	lists := map[string]bool{}
	for _, sn := range before {
		lists[sn.ManifestList] = true
	}
	for f, n := range sizes {
		if _, kept := after[f]; !kept && !lists[f] {
			wantBytes += n
		}
	}
	if j.DataFilesDeleted != 6 || j.DeleteFilesDeleted != 1 || j.MetadataFilesDeleted != j.FilesDeleted-7 || j.Bytes != wantBytes || wantBytes == 0 {
		t.Errorf("expire job counted %d data, %d delete, %d metadata files, %d bytes; want 6, 1, %d, %d",
			j.DataFilesDeleted, j.DeleteFilesDeleted, j.MetadataFilesDeleted, j.Bytes, j.FilesDeleted-7, wantBytes)
	}
	var list struct {
		Jobs []jobJSON `json:"jobs"`
	}
	_, out := callAt(t, srv.Info.RESTURL, "GET", "/lifecycle/v1/catalogs/"+srv.Info.Catalog+"/purge-jobs?kind=expire", admin, nil)
	mustDecode(t, out, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != jobID || list.Jobs[0].Kind != store.KindExpire {
		t.Errorf("purge-jobs?kind=expire: %+v", list.Jobs)
	}

	events = loadTable(t, cat, ns, "events")
	var ids []int64
	for _, sn := range events.Metadata().Snapshots() {
		ids = append(ids, sn.SnapshotID)
	}
	if fmt.Sprint(ids) != fmt.Sprint([]int64{dropID, appendID}) {
		t.Errorf("snapshots after expiry: %v, want the drop's %d and the append's %d", ids, dropID, appendID)
	}
	objects = bucketObjects(t, srv)
	for f := range ended {
		if _, ok := objects[f]; ok {
			t.Errorf("dropped file %s is still there", f)
		}
	}
	// On the versioned warehouse nothing of what the job deleted is left:
	// no prior version, no delete marker (SPEC §3, the bucket enforces the
	// lifecycle).
	versions := versionsOf(t, srv)
	for f := range sizes {
		if _, kept := after[f]; !kept && versions[f] > 0 {
			t.Errorf("the expire job left %d versions or delete markers of %s", versions[f], f)
		}
	}
	for _, sn := range before {
		if _, ok := objects[sn.ManifestList]; ok {
			t.Errorf("expired snapshot %d's manifest list is still there", sn.SnapshotID)
		}
	}
	for f := range retainedFiles {
		if _, ok := objects[f]; !ok {
			t.Errorf("%s, referenced by a retained snapshot, is gone", f)
		}
	}
	// Time travel to the oldest retained snapshot reads what it did.
	if got := cellCounts(t, events, table.WithSnapshotID(dropID)); fmt.Sprint(got) != fmt.Sprint(atDrop) || got[cell{2, d3}] != 3 || len(got) != 3 {
		t.Errorf("the drop's snapshot after expiry: %v, before it %v", got, atDrop)
	}
	if got := cellCounts(t, events); got[cell{1, d3}] != 6 || got[cell{2, d3}] != 5 || len(got) != 3 {
		t.Errorf("the current snapshot after expiry: %v", got)
	}

	// A rerun expires nothing; the table without a policy never moved.
	loc := events.MetadataLocation()
	if res, err := srv.Partitions.SweepRetention(ctx, time.Now().Add(2*time.Hour), 0); err != nil || res.SnapshotsExpired != 0 || len(res.ExpireJobs) != 0 {
		t.Errorf("rerun: %+v %v", res, err)
	}
	if got := loadTable(t, cat, ns, "events").MetadataLocation(); got != loc {
		t.Errorf("a rerun committed: %s → %s", loc, got)
	}
	if got := loadTable(t, cat, ns, "other").MetadataLocation(); got != otherLoc {
		t.Errorf("the table without a policy moved: %s → %s", otherLoc, got)
	}
	sameObjects(t, "the table without a policy", otherObjects, objectsUnder(t, srv, other.Location()))
	t.Logf("expiry: %d snapshots, %d files deleted (%d bytes) by job %s", res.SnapshotsExpired, j.FilesDeleted, j.Bytes, jobID)

	// The delete step's guard: an expire job of events naming a file of
	// its own, a data file of the other table and a key under no claim
	// deletes only the first; the others are counted skipped.
	stray := strings.TrimRight(events.Location(), "/") + "/data/stray.parquet"
	var theirs string
	for f := range filesIn(t, other, func(cell) bool { return true }) {
		theirs = f
		break
	}
	nobody := "s3://" + srv.Info.Bucket + "/elsewhere/x.parquet"
	ep := awsconfig.Endpoints{S3: srv.Info.S3Endpoint, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	for _, f := range []string{stray, nobody} {
		key := strings.TrimPrefix(f, "s3://"+srv.Info.Bucket+"/")
		if _, err := awsconfig.S3(cfg, ep).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Info.Bucket), Key: aws.String(key), Body: strings.NewReader("x")}); err != nil {
			t.Fatal(err)
		}
	}
	entry, err := srv.Catalog.Store().GetTable(ctx, srv.Info.Catalog, []string{ns}, "events")
	if err != nil {
		t.Fatal(err)
	}
	guarded, err := srv.Purge.PlanExpire(ctx, store.Job{Catalog: srv.Info.Catalog, Namespace: []string{ns}, Table: "events",
		TableUUID: entry.TableUUID, MetadataLocation: entry.MetadataLocation, Location: events.Location(), CreatedBy: "test"},
		entry.Hold, []store.ListedFile{{Path: stray}, {Path: theirs}, {Path: nobody}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Catalog.Store().CreateJob(ctx, guarded); err != nil {
		t.Fatal(err)
	}
	srv.Purge.Started(ctx, guarded)
	waitFor(t, "the guarded expire job", 2*time.Minute, func() bool {
		j = jobOf(t, srv, guarded.ID)
		return store.Terminal(j.State)
	})
	objects = bucketObjects(t, srv)
	_, strayLeft := objects[stray]
	_, theirsLeft := objects[theirs]
	_, nobodyLeft := objects[nobody]
	if j.State != store.JobSucceeded || j.FilesDeleted != 1 || j.FilesSkipped != 2 || strayLeft || !theirsLeft || !nobodyLeft {
		t.Errorf("guarded job %s: deleted %d, skipped %d; left: own stray %v, other table's file %v, unowned key %v",
			j.State, j.FilesDeleted, j.FilesSkipped, strayLeft, theirsLeft, nobodyLeft)
	}

	// A purge of events now: the d3 files its expired appends added are
	// carried (EXISTING) by the drop's rewritten manifest in the current
	// snapshot. The batches delete and count them; the final listing is
	// for files no metadata references, and finds none.
	purged := objectsUnder(t, srv, events.Location())
	if err := cat.PurgeTable(ctx, table.Identifier{ns, "events"}); err != nil {
		t.Fatal(err)
	}
	var purgeJobs struct {
		Jobs []jobJSON `json:"jobs"`
	}
	_, out = callAt(t, srv.Info.RESTURL, "GET", "/lifecycle/v1/catalogs/"+srv.Info.Catalog+"/purge-jobs?kind=purge&namespace="+ns+"&table=events", admin, nil)
	mustDecode(t, out, &purgeJobs)
	if len(purgeJobs.Jobs) != 1 {
		t.Fatalf("purge jobs of events: %s", out)
	}
	var pj jobJSON
	waitFor(t, "the purge of events", 2*time.Minute, func() bool {
		_, out := callAt(t, srv.Info.RESTURL, "GET", "/lifecycle/v1/catalogs/"+srv.Info.Catalog+"/purge-jobs/"+purgeJobs.Jobs[0].ID, admin, nil)
		mustDecode(t, out, &pj)
		return store.Terminal(pj.State)
	})
	if pj.State != store.JobSucceeded {
		t.Fatalf("purge of events: %+v", pj)
	}
	assertNothingLeft(t, srv, pj, events.Location(), purged, 0)
}

// filesIn lists the live data and delete files of the current snapshot in
// the cells keep accepts.
func filesIn(t *testing.T, tbl *table.Table, keep func(cell) bool) map[string]bool {
	t.Helper()
	fs := mustFS(t, tbl)
	out := map[string]bool{}
	mfs, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		entries, err := mf.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			p := e.DataFile().Partition()
			c := cell{team: p[1000].(int32)}
			if d, ok := p[1001].(iceberg.Date); ok {
				c.day = iceberg.DateLiteral(d).String()
			}
			if keep(c) {
				out[e.DataFile().FilePath()] = true
			}
		}
	}
	return out
}

// snapshotFiles lists what the snapshots reference: manifest lists,
// manifests and the files their live entries name.
func snapshotFiles(t *testing.T, tbl *table.Table, ids ...int64) map[string]bool {
	t.Helper()
	fs := mustFS(t, tbl)
	out := map[string]bool{}
	for _, id := range ids {
		sn := tbl.Metadata().SnapshotByID(id)
		out[sn.ManifestList] = true
		mfs, err := sn.Manifests(fs)
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			out[mf.FilePath()] = true
			entries, err := mf.FetchEntries(fs, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				out[e.DataFile().FilePath()] = true
			}
		}
	}
	return out
}

// objectSizes is every object of the bucket with its size.
func objectSizes(t *testing.T, srv *server.Server) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for path, o := range bucketListing(t, srv) {
		out[path] = aws.ToInt64(o.Size)
	}
	return out
}

// objectsUnder lists a server's objects (key → ETag) under a location.
func objectsUnder(t *testing.T, srv *server.Server, loc string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, etag := range bucketObjects(t, srv) {
		if strings.HasPrefix(k, strings.TrimRight(loc, "/")+"/") {
			out[k] = etag
		}
	}
	return out
}

// Defect: an expire job whose table's claim was released before the job
// ran (the table dropped without purge) still deleted: with the claim gone,
// the check fell through to the warehouse, which owns the old location now,
// and let every file go. A file of an expire job goes only while the claim
// that covers it is still the table's; otherwise it is skipped and counted,
// whether the location is free now or another table took it.
func TestExpireJobSkipsFilesOfAReleasedClaim(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := newNamespace(t, "expreleased")
	for _, tc := range []struct {
		name  string
		taken bool // another table claims the location before the job runs
	}{
		{"the location is free", false},
		{"another table took the location", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniq("t")
			tbl := writtenTable(t, cat, ns, name, nil, false)
			data, _ := reachable(t, tbl)
			entry, err := srv.Catalog.Store().GetTable(ctx, shared.Catalog, []string{ns}, name)
			if err != nil || entry.Hold == nil {
				t.Fatalf("entry %+v: %v", entry, err)
			}
			var files []store.ListedFile
			for f := range data {
				files = append(files, store.ListedFile{Path: f, Kind: store.FileData})
			}
			j, err := srv.Purge.PlanExpire(ctx, store.Job{Catalog: shared.Catalog, Namespace: []string{ns}, Table: name,
				TableUUID: entry.TableUUID, MetadataLocation: entry.MetadataLocation, Location: tbl.Location(), CreatedBy: "test"},
				entry.Hold, files)
			if err != nil {
				t.Fatal(err)
			}
			if err := srv.Catalog.Store().CreateJob(ctx, j); err != nil {
				t.Fatal(err)
			}
			// Before the job runs: the table is dropped without purge (its
			// claim released; the files are nobody's now).
			mustCall(t, 204, "DELETE", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables/"+name, shared.Token, nil)
			if tc.taken {
				mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces/"+ns+"/tables", shared.Token,
					`{"name":"`+name+`_2","location":"`+tbl.Location()+`","schema":`+schemaJSON+`}`)
			}
			srv.Purge.Started(ctx, j)
			done := waitJob(t, j.ID, store.JobSucceeded, time.Minute)
			left := bucketObjects(t, srv)
			gone := 0
			for f := range data {
				if _, ok := left[f]; !ok {
					gone++
				}
			}
			if gone != 0 || done.FilesDeleted != 0 || done.FilesSkipped != int64(len(data)) {
				t.Errorf("expire job after the claim was released: %d of %d files gone, %d deleted, %d skipped; want none gone, all skipped",
					gone, len(data), done.FilesDeleted, done.FilesSkipped)
			}
		})
	}
}
