package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// Defect: every losing create and every losing commit left the metadata
// file it wrote, and nothing ever deleted it. Now each request names its
// files in an intent before writing them, the write that makes them current
// retires it, and the sweep sends the files of stale intents through the
// delete pipeline as a job of kind orphans. After 5 × 20 racing creates and
// 30 commit-vs-drop races, one sweep (clock advanced, not slept) leaves only
// metadata files some live table references.
func TestRacesLeaveNoOrphanedMetadata(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	c := shared.Catalog
	ns := newNamespace(t, "orph")
	tables := "/v1/" + c + "/namespaces/" + ns + "/tables"
	race := func(n int, fn func(i int) int) map[int]int {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			codes = map[int]int{}
			start = make(chan struct{})
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				code := fn(i)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		return codes
	}
	for round := range 5 {
		name := fmt.Sprintf("c%d", round)
		codes := race(20, func(int) int {
			code, _ := call(t, "POST", tables, shared.Token, `{"name":"`+name+`","schema":`+schemaJSON+`}`)
			return code
		})
		if codes[200] != 1 || codes[409] != 19 {
			t.Fatalf("round %d of 20 racing creates: %v, want one 200 and nineteen 409", round, codes)
		}
	}
	for i := range 30 {
		name := fmt.Sprintf("d%d", i)
		mustCall(t, 200, "POST", tables, shared.Token, `{"name":"`+name+`","schema":`+schemaJSON+`}`)
		codes := race(2, func(who int) int {
			if who == 0 {
				code, _ := call(t, "POST", tables+"/"+name, shared.Token, map[string]any{"requirements": []any{},
					"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"k": "v"}}}})
				return code
			}
			code, _ := call(t, "DELETE", tables+"/"+name+"?purgeRequested=true", shared.Token, nil)
			return code
		})
		if codes[204] != 1 || codes[200]+codes[404]+codes[409] != 1 {
			t.Fatalf("commit-vs-drop race %d: %v, want the drop's 204 and the commit's 200, 404 or 409", i, codes)
		}
	}
	waitIdle(t, srv) // every purge has ended

	cat, err := srv.Catalog.GetCatalog(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	prefix := strings.TrimRight(cat.Warehouse, "/") + "/" + ns + "/"
	metadataFiles := func() []string {
		var out []string
		for k := range bucketObjects(t, srv) {
			if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, ".metadata.json") {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	before := metadataFiles()

	rep, err := srv.Purge.SweepOrphans(ctx, time.Now().Add(purge.IntentTTL+time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Jobs) == 0 {
		t.Fatalf("the sweep made no job: %+v", rep)
	}
	var list struct {
		Jobs []jobJSON `json:"jobs"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/lifecycle/v1/catalogs/"+c+"/purge-jobs?kind=orphans", shared.Token, nil), &list)
	deleted := int64(0)
	for _, j := range list.Jobs {
		if slices.Contains(rep.Jobs, j.ID) {
			j = waitJob(t, j.ID, store.JobSucceeded, 5*time.Minute)
			if j.Kind != store.KindOrphans {
				t.Errorf("orphans job %s: kind %s", j.ID, j.Kind)
			}
			deleted += j.FilesDeleted
		}
	}
	if deleted == 0 {
		t.Errorf("no orphans job of catalog %s deleted anything: %+v", c, list.Jobs)
	}

	// What some live table references: its current metadata and its log.
	referenced := map[string]bool{}
	cl := client(t, shared.Token)
	for _, name := range append(names("c", 5), names("d", 30)...) {
		tbl, err := cl.LoadTable(ctx, []string{ns, name})
		if err != nil {
			continue // dropped
		}
		referenced[tbl.MetadataLocation()] = true
		for e := range tbl.Metadata().PreviousFiles() {
			referenced[e.MetadataFile] = true
		}
	}
	after := metadataFiles()
	for _, f := range after {
		if !referenced[f] {
			t.Errorf("%s is referenced by no table", f)
		}
	}
	t.Logf("metadata files under the namespace: %d before the sweep, %d after (%d referenced); the sweep deleted %d (%+v)",
		len(before), len(after), len(referenced), deleted, rep)
	if len(before) <= len(after) {
		t.Errorf("the races left no orphan to sweep (%d files before, %d after): the test proves nothing", len(before), len(after))
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// One sweep run takes a backlog larger than its page (2,500 stale intents,
// pages of purge.MaxSweepIntents): a run that stopped at one page left the
// newest intents of a busy catalog for the next hour, so that a sweep run
// after the races above still found their files (seen under -race, where
// more requests lose their races).
func TestOneSweepTakesTheWholeBacklog(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	now := time.Now()
	mine := map[string]bool{}
	for i := range 2500 {
		in := store.Intent{
			ID: fmt.Sprintf("backlog-%s-%04d", uuid.NewString()[:8], i), Catalog: shared.Catalog, Created: now.UnixNano(),
			Files: []string{fmt.Sprintf("s3://%s/backlog-nobody/%04d.metadata.json", srv.Info.Bucket, i)},
		}
		if err := srv.Catalog.Store().PutIntent(ctx, in); err != nil {
			t.Fatal(err)
		}
		mine[in.ID] = true
	}
	later := now.Add(2 * purge.IntentTTL)
	rep, err := srv.Purge.SweepOrphans(ctx, later)
	if err != nil || rep.More || rep.Intents < len(mine) || len(rep.Jobs) < 3 {
		t.Fatalf("one sweep: %+v %v; want at least %d intents in at least 3 pages, none left", rep, err, len(mine))
	}
	left, err := srv.Catalog.Store().StaleIntents(ctx, later.Add(-purge.IntentTTL), 10_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range left {
		if mine[in.ID] {
			t.Fatalf("intent %s left after the sweep (%d stale intents left)", in.ID, len(left))
		}
	}
	for _, id := range rep.Jobs {
		// The sweep takes every catalog's stale intents (the suite's other
		// tests leave theirs on the shared server): a job of another
		// catalog is not found under this one.
		if st, _ := call(t, "GET", "/lifecycle/v1/catalogs/"+shared.Catalog+"/purge-jobs/"+id, shared.Token, nil); st == 404 {
			continue
		}
		waitJob(t, id, store.JobSucceeded, 5*time.Minute)
	}
}
