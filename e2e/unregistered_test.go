package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/router"
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

// Defect (issue 30): unregister of a legal-held table needed only
// TABLE_DROP, and the table then left every listing, teardown-check's
// legal-held list included. It needs TABLE_LEGAL_HOLD too, and
// unregistered tables are listed (paginated) with the claims they keep,
// and in teardown-check.
func TestUnregisteredTablesAreListedAndAHeldOneNeedsLegalHold(t *testing.T) {
	srv := localOnly(t)
	c := uniq("unreg")
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": c, "warehouse": "s3://" + srv.Info.Bucket + "/" + c})
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces", shared.Token, map[string]any{"namespace": []string{"ns"}})
	tables := "/v1/" + c + "/namespaces/ns/tables"
	var held struct {
		Metadata struct {
			Location string `json:"location"`
		} `json:"metadata"`
	}
	mustDecode(t, mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "held", "schema": rawSchema, "properties": map[string]string{"icehold.legal-hold": "true"}}), &held)
	mustCall(t, 200, "POST", tables, shared.Token, map[string]any{"name": "plain", "schema": rawSchema})

	dropper := grantTo(t, shared.Token, c, p(authz.TableDrop))
	st, body := call(t, "POST", tables+"/held/unregister", dropper, nil)
	if _, _, msg := errorModel(t, body); st != 403 || !strings.Contains(msg, "TABLE_LEGAL_HOLD") {
		t.Errorf("unregister of a legal-held table with TABLE_DROP only: %d %q, want 403 naming TABLE_LEGAL_HOLD", st, msg)
	}
	mustCall(t, 200, "GET", tables+"/held", shared.Token, nil)
	keeper := grantTo(t, shared.Token, c, p(authz.TableDrop, authz.TableLegalHold))
	mustCall(t, 200, "POST", tables+"/held/unregister", keeper, nil)
	mustCall(t, 200, "POST", tables+"/plain/unregister", dropper, nil)

	var got []router.UnregisteredView
	path := "/lifecycle/v1/catalogs/" + c + "/unregistered-tables?pageSize=1"
	for pages := 0; ; pages++ {
		var page struct {
			Tables []router.UnregisteredView `json:"tables"`
			Next   *string                   `json:"next-page-token"`
		}
		mustDecode(t, mustCall(t, 200, "GET", path, shared.Token, nil), &page)
		got = append(got, page.Tables...)
		if page.Next == nil || pages > 3 {
			break
		}
		path = "/lifecycle/v1/catalogs/" + c + "/unregistered-tables?pageSize=1&pageToken=" + url.QueryEscape(*page.Next)
	}
	names := map[string]router.UnregisteredView{}
	for _, u := range got {
		names[u.Name] = u
	}
	if h, ok := names["held"]; len(got) != 2 || !ok || !h.LegalHold || !slices.Equal(h.Claims, []string{held.Metadata.Location}) {
		t.Errorf("unregistered tables: %+v, want held (legal hold, keeping %s) and plain", got, held.Metadata.Location)
	}
	rep, err := srv.Catalog.Teardown(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range rep.Unregistered {
		if strings.HasPrefix(l, c+": ") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("teardown-check's unregistered tables %q: want this catalog's 2", rep.Unregistered)
	}
}
