package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// lostCreate writes, as a create that lost its race would, a metadata file
// of a new table at a fresh location under namespace ns of catalog c, and
// leaves its intent pending; it returns the file.
func lostCreate(t *testing.T, c, ns string) string {
	t.Helper()
	srv := localOnly(t)
	ctx := context.Background()
	tables := "/v1/" + c + "/namespaces/" + ns + "/tables"
	seed := uniq("seed")
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": seed, "schema": rawSchema})
	var loaded struct {
		Metadata map[string]any `json:"metadata"`
	}
	mustDecode(t, mustCall(t, 200, "GET", tables+"/"+seed, shared.Token, nil), &loaded)
	mustCall(t, 204, "DELETE", tables+"/"+seed, shared.Token, nil)
	info, err := srv.Catalog.GetCatalog(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	loc := strings.TrimRight(info.Warehouse, "/") + "/" + ns + "/lost-" + id
	m := loaded.Metadata
	m["location"], m["table-uuid"] = loc, id
	raw, _ := json.Marshal(m)
	l, _ := objects.Parse(loc)
	file := putObject(t, srv, l.Key+"/metadata/00000-"+uuid.NewString()+".metadata.json", raw)
	in := store.Intent{ID: uuid.NewString(), Catalog: c, Created: time.Now().UnixNano(), Files: []string{file}}
	if err := srv.Catalog.Store().PutIntent(ctx, in); err != nil {
		t.Fatal(err)
	}
	return file
}

// sweepOrphans runs the orphan sweep an hour ahead and waits for its jobs
// of the suite's catalog.
func sweepOrphans(t *testing.T) {
	t.Helper()
	srv := localOnly(t)
	rep, err := srv.Purge.SweepOrphans(context.Background(), time.Now().Add(purge.IntentTTL+time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range rep.Jobs {
		if st, _ := call(t, "GET", "/lifecycle/v1/catalogs/"+shared.Catalog+"/purge-jobs/"+id, shared.Token, nil); st == 404 {
			continue // another catalog's
		}
		waitJob(t, id, store.JobSucceeded, 5*time.Minute)
	}
}

// Defect (issue 30): the orphan sweep deleted an unregistered table's only
// metadata file once another table took its name: a lost create's file
// (its intent pending) registered as x, x unregistered, a new x created,
// the sweep past the intent's TTL. The check read the claim's owner by
// name, found the new x, whose metadata does not name the file, and let it
// go. It now reads the unregistered table's record, and the file stays
// (and registers again).
func TestOrphanSweepKeepsAnUnregisteredTablesMetadata(t *testing.T) {
	localOnly(t)
	c := shared.Catalog
	ns := newNamespace(t, "unreg_orph")
	tables := "/v1/" + c + "/namespaces/" + ns + "/tables"
	file := lostCreate(t, c, ns)
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/register", shared.Token, map[string]any{"name": "x", "metadata-location": file})
	mustCall(t, 200, "POST", tables+"/x/unregister", shared.Token, nil)
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "x", "schema": rawSchema})
	sweepOrphans(t)
	if _, ok := bucketObjects(t, localOnly(t))[file]; !ok {
		t.Fatalf("the orphan sweep deleted %s, the only metadata file of an unregistered table", file)
	}
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/register", shared.Token, map[string]any{"name": "back", "metadata-location": file})
}
