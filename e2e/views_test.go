package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/apache/iceberg-go/view"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/softdelete"
)

// viewSpec restates the REST spec's view answers (see its header).
const viewSpec = "testdata/iceberg-views.yaml"

// viewRoutes are router.Routes() of the REST spec's view operations.
func viewRoutes() []string {
	var out []string
	for _, rt := range router.Routes() {
		if p := rt.Method + " " + rt.Pattern; strings.HasPrefix(rt.Pattern, "/v1/") && strings.Contains(rt.Pattern, "view") && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// checkedViews is an iceberg-go catalog on the suite's catalog c whose
// every answer to a view operation is checked against viewSpec; done
// fails the test on a mismatch and on no answer checked.
func checkedViews(t *testing.T, c string) (*rest.Catalog, func()) {
	t.Helper()
	spec, err := newSpecCheck(viewSpec, viewRoutes())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var mismatches []string
	rt := roundTrip(func(r *http.Request) (*http.Response, error) {
		res, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			return res, err
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			return nil, err
		}
		res.Body = io.NopCloser(bytes.NewReader(body))
		if err := spec.check(r, res.StatusCode, res.Header, body); err != nil {
			mu.Lock()
			mismatches = append(mismatches, err.Error())
			mu.Unlock()
		}
		return res, nil
	})
	cat, err := rest.NewCatalog(context.Background(), "icehold", shared.URL, rest.WithOAuthToken(shared.Token),
		rest.WithWarehouseLocation(c), rest.WithCustomTransport(rt))
	if err != nil {
		t.Fatal(err)
	}
	return cat, func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range mismatches {
			t.Errorf("MISMATCH %s", m)
		}
		n := 0
		for _, k := range spec.checked {
			n += k
		}
		if n == 0 {
			t.Error("no view answer was checked")
		}
		t.Logf("%d view answers checked against %s, of %d operations", n, viewSpec, len(spec.checked))
	}
}

var viewSchema = iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "n", Type: iceberg.PrimitiveTypes.Int64})

func viewVersion(t *testing.T, sql string, ns ...string) *view.Version {
	t.Helper()
	v, err := view.NewVersionFromSQL(1, 0, sql, ns)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// iceberg-go's view API end to end: create, load, list (paged), exists,
// replace through the update path, rename across namespaces, drop; a view
// and a table never share a name; every answer is the spec's.
func TestViewsThroughIcebergGo(t *testing.T) {
	ctx := context.Background()
	cat, done := checkedViews(t, shared.Catalog)
	defer done()
	ns := table.Identifier{uniq("views"), "sub"} // multi-level
	for i := range ns {
		if err := cat.CreateNamespace(ctx, ns[:i+1], nil); err != nil {
			t.Fatal(err)
		}
	}
	other := table.Identifier{uniq("views2")}
	if err := cat.CreateNamespace(ctx, other, nil); err != nil {
		t.Fatal(err)
	}
	id := append(slices.Clone(ns), "v")
	v, err := cat.CreateView(ctx, id, viewVersion(t, "SELECT 1 AS n", ns...), viewSchema, catalog.WithViewProperties(iceberg.Properties{"k": "1"}))
	if err != nil {
		t.Fatalf("create view: %v", err)
	}
	if !strings.HasPrefix(v.MetadataLocation(), v.Location()+"/metadata/00000-") {
		t.Errorf("metadata file %s is not under the view's location %s", v.MetadataLocation(), v.Location())
	}
	for _, name := range []string{"w1", "w2"} {
		if _, err := cat.CreateView(ctx, append(slices.Clone(ns), name), viewVersion(t, "SELECT 2 AS n", ns...), viewSchema); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := cat.LoadView(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.MetadataLocation() != v.MetadataLocation() || loaded.CurrentVersion().Representations[0].Sql != "SELECT 1 AS n" || loaded.Properties()["k"] != "1" {
		t.Errorf("loaded %s %+v, created %s", loaded.MetadataLocation(), loaded.CurrentVersion(), v.MetadataLocation())
	}
	if ok, err := cat.CheckViewExists(ctx, id); err != nil || !ok {
		t.Errorf("view exists: %v %v", ok, err)
	}

	// A table and a view never share an identifier.
	if _, err := cat.CreateTable(ctx, id, viewSchema); !errors.Is(err, catalog.ErrTableAlreadyExists) {
		t.Errorf("create a table at a view's name: %v", err)
	}
	tid := append(slices.Clone(ns), "t")
	if _, err := cat.CreateTable(ctx, tid, viewSchema); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateView(ctx, tid, viewVersion(t, "SELECT 3 AS n", ns...), viewSchema); !errors.Is(err, catalog.ErrViewAlreadyExists) {
		t.Errorf("create a view at a table's name: %v", err)
	}
	if _, err := cat.LoadView(ctx, tid); !errors.Is(err, catalog.ErrNoSuchView) {
		t.Errorf("load a table as a view: %v", err)
	}
	if _, err := cat.LoadTable(ctx, id); !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("load a view as a table: %v", err)
	}

	// Listing pages through views only, and tables lists no view.
	var names []string
	for vid, err := range cat.ListViews(cat.SetPageSize(ctx, 1), ns) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, vid[len(vid)-1])
	}
	if !slices.Equal(names, []string{"v", "w1", "w2"}) {
		t.Errorf("views listed a page at a time: %v", names)
	}
	var tables []string
	for tid, err := range cat.ListTables(ctx, ns) {
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, tid[len(tid)-1])
	}
	if !slices.Equal(tables, []string{"t"}) {
		t.Errorf("tables listed: %v", tables)
	}

	// Replace: a new version made current, through the update path.
	next, err := view.NewVersionFromSQL(2, 0, "SELECT 2 AS n", ns)
	if err != nil {
		t.Fatal(err)
	}
	replaced, err := cat.UpdateView(ctx, id, []view.Requirement{view.AssertViewUUID(v.Metadata().ViewUUID())},
		[]view.Update{view.NewAddViewVersionUpdate(next), view.NewSetCurrentVersionUpdate(-1), view.NewSetPropertiesUpdate(iceberg.Properties{"k": "2"})})
	if err != nil {
		t.Fatalf("replace view: %v", err)
	}
	if replaced.CurrentVersion().VersionID != 2 || replaced.Properties()["k"] != "2" || !strings.Contains(replaced.MetadataLocation(), "/metadata/00001-") {
		t.Errorf("replaced: version %d, props %v, %s", replaced.CurrentVersion().VersionID, replaced.Properties(), replaced.MetadataLocation())
	}
	// A stale requirement is a 409 CommitFailed, nothing changes.
	if _, err := cat.UpdateView(ctx, id, []view.Requirement{view.AssertViewUUID(replaced.Metadata().ViewUUID())}, nil); err != nil {
		t.Errorf("a replace with no update: %v", err)
	}
	if _, err := cat.UpdateView(ctx, tid, nil, nil); !errors.Is(err, catalog.ErrNoSuchView) {
		t.Errorf("replace a table as a view: %v", err)
	}

	// Rename across namespaces; the old name is free, the new one taken.
	to := append(slices.Clone(other), "moved")
	if _, err := cat.RenameView(ctx, id, to); err != nil {
		t.Fatalf("rename view: %v", err)
	}
	if _, err := cat.LoadView(ctx, id); !errors.Is(err, catalog.ErrNoSuchView) {
		t.Errorf("load after rename: %v", err)
	}
	moved, err := cat.LoadView(ctx, to)
	if err != nil || moved.MetadataLocation() != replaced.MetadataLocation() {
		t.Fatalf("load the renamed view: %v", err)
	}
	if _, err := cat.RenameView(ctx, append(slices.Clone(ns), "w1"), tid); !errors.Is(err, catalog.ErrViewAlreadyExists) {
		t.Errorf("rename a view onto a table: %v", err)
	}

	// A namespace holding a view is not empty.
	if err := cat.DropNamespace(ctx, other); !errors.Is(err, catalog.ErrNamespaceNotEmpty) {
		t.Errorf("drop a namespace holding a view: %v", err)
	}
	if err := cat.DropView(ctx, to); err != nil {
		t.Fatalf("drop view: %v", err)
	}
	if ok, err := cat.CheckViewExists(ctx, to); err != nil || ok {
		t.Errorf("exists after drop: %v %v", ok, err)
	}
	if err := cat.DropView(ctx, to); !errors.Is(err, catalog.ErrNoSuchView) {
		t.Errorf("a second drop: %v", err)
	}
	if err := cat.DropNamespace(ctx, other); err != nil {
		t.Errorf("drop the emptied namespace: %v", err)
	}

	// Register a view from a metadata file (its location is free again
	// once its view was dropped without soft delete).
	w1 := append(slices.Clone(ns), "w1")
	old, err := cat.LoadView(ctx, w1)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.DropView(ctx, w1); err != nil {
		t.Fatal(err)
	}
	reg, err := cat.RegisterView(ctx, append(slices.Clone(ns), "reg"), old.MetadataLocation())
	if err != nil || reg.Metadata().ViewUUID() != old.Metadata().ViewUUID() {
		t.Fatalf("register view: %v", err)
	}
	if _, err := cat.RegisterView(ctx, append(slices.Clone(ns), "reg2"), old.MetadataLocation()); err == nil {
		t.Error("a second register of the same location was accepted")
	}
}

// A view and a table never share a name: 20 creates racing at one name,
// half of them views, have exactly one winner, five times over.
func TestViewAndTableRaceForAName(t *testing.T) {
	ns := uniq("vrace")
	base := "/v1/" + shared.Catalog + "/namespaces/"
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	for round := range 5 {
		name := "x" + string(rune('a'+round))
		var wg sync.WaitGroup
		statuses := make([]int, 20)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					statuses[i], _ = call(t, "POST", base+ns+"/tables", shared.Token, map[string]any{"name": name, "schema": rawSchema})
				} else {
					statuses[i], _ = call(t, "POST", base+ns+"/views", shared.Token, viewBody(name, ns))
				}
			}()
		}
		wg.Wait()
		won := 0
		for _, st := range statuses {
			switch st {
			case 200:
				won++
			case 409:
			default:
				t.Errorf("round %d: a create answered %d", round, st)
			}
		}
		if won != 1 {
			t.Errorf("round %d: %d creates won (%v), want 1", round, won, statuses)
		}
	}
}

// viewBody is a CreateViewRequest of a one-column view.
func viewBody(name, ns string, props ...string) map[string]any {
	p := map[string]string{}
	for i := 0; i+1 < len(props); i += 2 {
		p[props[i]] = props[i+1]
	}
	return map[string]any{
		"name": name, "schema": rawSchema, "properties": p,
		"view-version": map[string]any{
			"version-id": 1, "schema-id": 0, "timestamp-ms": time.Now().UnixMilli(), "summary": map[string]string{"engine-name": "e2e"},
			"representations":   []any{map[string]string{"type": "sql", "sql": "SELECT 1 AS x", "dialect": "spark"}},
			"default-namespace": []string{ns},
		},
	}
}

type viewAnswer struct {
	MetadataLocation string `json:"metadata-location"`
	Metadata         struct {
		UUID     string `json:"view-uuid"`
		Location string `json:"location"`
	} `json:"metadata"`
}

// A soft drop frees a view's name and keeps it: recreated, the old one is
// undropped under another name (a 409 names the holder first), with the
// same uuid and metadata; its events say kind view.
func TestViewSoftDropRecreateUndrop(t *testing.T) {
	srv := localOnly(t)
	name, _ := softCatalog(t, nil)
	ns := uniq("vsd")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	vpath := "/v1/" + name + "/namespaces/" + ns + "/views"
	var first viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", vpath, shared.Token, viewBody("v", ns)), &first)
	before := bucketObjects(t, srv)

	mustCall(t, 204, "DELETE", vpath+"/v", shared.Token, nil)
	if st, body := call(t, "GET", vpath+"/v", shared.Token, nil); st != 404 || !strings.Contains(string(body), "NoSuchViewException") {
		t.Errorf("load after a soft drop: %d %s", st, body)
	}
	if after := bucketObjects(t, srv); len(after) != len(before) {
		t.Errorf("a soft drop changed the bucket: %d objects, was %d", len(after), len(before))
	}
	var recs []softdelete.View
	for _, r := range softDeleted(t, name, ns) {
		if r.Name == "v" {
			recs = append(recs, r)
		}
	}
	if len(recs) != 1 || recs[0].Kind != "view" || recs[0].ViewUUID != first.Metadata.UUID || recs[0].TableUUID != "" ||
		recs[0].MetadataLocation != first.MetadataLocation || recs[0].PurgeAt == "" {
		t.Fatalf("soft-deleted listing: %+v", recs)
	}
	// A namespace holding only a soft-deleted view is empty: a view is a
	// child while it lives.
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns + "_2"}})
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces/"+ns+"_2/views", shared.Token, viewBody("e", ns))
	if st, _ := call(t, "DELETE", "/v1/"+name+"/namespaces/"+ns+"_2", shared.Token, nil); st != 409 {
		t.Errorf("drop a namespace holding a view: %d", st)
	}
	mustCall(t, 204, "DELETE", "/v1/"+name+"/namespaces/"+ns+"_2/views/e", shared.Token, nil)
	mustCall(t, 204, "DELETE", "/v1/"+name+"/namespaces/"+ns+"_2", shared.Token, nil)

	// The name is free: a new view takes it; the undrop is a 409 naming it.
	var second viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", vpath, shared.Token, viewBody("v", ns)), &second)
	undrop := "/lifecycle/v1/catalogs/" + name + "/namespaces/" + ns + "/views/v/undrop"
	st, body := call(t, "POST", undrop, shared.Token, map[string]any{})
	if st != 409 || !strings.Contains(string(body), second.Metadata.UUID) || !strings.Contains(string(body), `"holder"`) {
		t.Errorf("undrop onto a taken name: %d %s, want a 409 naming the holder", st, body)
	}
	// The tables' undrop route does not see a view's record.
	if st, _ := call(t, "POST", lifecycleTablePath(name, ns, "v")+"/undrop", shared.Token, map[string]any{}); st != 404 {
		t.Errorf("undrop a view through the tables' route: %d", st)
	}
	var back struct {
		Name             string `json:"name"`
		ViewUUID         string `json:"view-uuid"`
		MetadataLocation string `json:"metadata-location"`
	}
	mustDecode(t, mustCall(t, 200, "POST", undrop, shared.Token, map[string]any{"view-uuid": first.Metadata.UUID,
		"rename-to": map[string]any{"namespace": []string{ns}, "name": "v_restored"}}), &back)
	if back.Name != "v_restored" || back.ViewUUID != first.Metadata.UUID || back.MetadataLocation != first.MetadataLocation {
		t.Errorf("undrop answered %+v", back)
	}
	var restored viewAnswer
	mustDecode(t, mustCall(t, 200, "GET", vpath+"/v_restored", shared.Token, nil), &restored)
	if restored.MetadataLocation != first.MetadataLocation || restored.Metadata.UUID != first.Metadata.UUID {
		t.Errorf("restored view %+v, was %+v", restored, first)
	}
	var now viewAnswer
	mustDecode(t, mustCall(t, 200, "GET", vpath+"/v", shared.Token, nil), &now)
	if now.Metadata.UUID != second.Metadata.UUID {
		t.Errorf("the recreated view changed: %+v", now)
	}
	// Its location stays owned through the round trip: a table cannot take it.
	if st, body := call(t, "POST", "/v1/"+name+"/namespaces/"+ns+"/tables", shared.Token,
		map[string]any{"name": "squat", "schema": rawSchema, "location": first.Metadata.Location}); st != 409 || !strings.Contains(string(body), "view") {
		t.Errorf("a table at a view's location: %d %s", st, body)
	}
	want := []string{"ViewSoftDeleted", "ViewUndropped"}
	if got := eventually(func() []string { return tableEvents(t, first.Metadata.UUID) }, func(got []string) bool { return slices.Equal(got, want) }); !slices.Equal(got, want) {
		t.Errorf("events of the view: %v, want %v", got, want)
	}
}

// A view's hold expires into a view job that deletes its metadata files
// (every version of them) and nothing else; a legal-held view stays.
func TestViewHoldExpiryDeletesItsMetadataFiles(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	name, _ := softCatalog(t, map[string]string{"soft-delete.hold-period": "P1D"})
	ns := uniq("vexp")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	base := "/v1/" + name + "/namespaces/" + ns
	var v viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", base+"/views", shared.Token, viewBody("v", ns)), &v)
	var replaced viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", base+"/views/v", shared.Token, map[string]any{
		"requirements": []any{map[string]any{"type": "assert-view-uuid", "uuid": v.Metadata.UUID}},
		"updates":      []any{map[string]any{"action": "set-properties", "updates": map[string]string{"k": "v"}}},
	}), &replaced)
	var held viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", base+"/views", shared.Token, viewBody("held", ns, "icehold.legal-hold", "true")), &held)
	mustCall(t, 200, "POST", base+"/tables", shared.Token, map[string]any{"name": "t", "schema": rawSchema})
	mustCall(t, 200, "POST", base+"/views", shared.Token, viewBody("w", ns))
	mustCall(t, 204, "DELETE", base+"/views/v", shared.Token, nil)
	mustCall(t, 204, "DELETE", base+"/views/held", shared.Token, nil)
	if st, _ := call(t, "POST", "/lifecycle/v1/catalogs/"+name+"/namespaces/"+ns+"/views/held/purge-now", shared.Token, map[string]any{}); st != 409 {
		t.Errorf("purge-now of a legal-held view: %d, want 409", st)
	}
	before := bucketObjects(t, srv)

	sweep := &softdelete.Service{Catalog: srv.Catalog, Purge: srv.Purge, Now: func() time.Time { return time.Now().Add(48 * time.Hour) }}
	if _, err := sweep.Expire(ctx, 0); err != nil {
		t.Fatal(err)
	}
	jobs := jobsIn(t, name, ns)
	if len(jobs) != 1 || jobs[0].Kind != "view" || jobs[0].TableUUID != v.Metadata.UUID {
		t.Fatalf("jobs after the sweep: %+v", jobs)
	}
	j := waitJobIn(t, name, jobs[0].ID, "SUCCEEDED")
	if j.State != "SUCCEEDED" || j.FilesDeleted != 2 || j.MetadataFilesDeleted != 2 || j.FilesUnreferenced != 0 {
		t.Errorf("the view's job: %+v, want 2 metadata files deleted", j)
	}
	after := bucketObjects(t, srv)
	var gone []string
	for k := range before {
		if _, ok := after[k]; !ok && strings.HasPrefix(k, "s3://icehold-warehouse/"+name+"/") {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	want := []string{v.MetadataLocation, replaced.MetadataLocation}
	slices.Sort(want)
	if !slices.Equal(gone, want) {
		t.Errorf("deleted %v, want exactly the view's metadata files %v", gone, want)
	}
	for _, r := range softDeleted(t, name, ns) {
		if r.Name != "held" {
			t.Errorf("left after the sweep: %+v", r)
		}
	}
	want = []string{"ViewSoftDeleted", "ViewPermanentlyDeleted", "PurgeStarted", "PurgeCompleted"}
	if got := eventually(func() []string { return tableEvents(t, v.Metadata.UUID) }, func(got []string) bool { return slices.Equal(got, want) }); !slices.Equal(got, want) {
		t.Errorf("events of the expired view: %v, want %v", got, want)
	}
}

// droppedViewIn makes a view of catalog c and drops it (soft delete off:
// its location is free again) and returns its metadata location.
func droppedViewIn(t *testing.T, c, ns, name string) string {
	t.Helper()
	var v viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/views", shared.Token, viewBody(name, ns)), &v)
	mustCall(t, 204, "DELETE", "/v1/"+c+"/namespaces/"+ns+"/views/"+name, shared.Token, nil)
	return v.MetadataLocation
}

// softDeletedViewIn soft-deletes a new view of catalog c (soft delete on
// for the drop only) and returns its uuid.
func softDeletedViewIn(t *testing.T, c, ns, name string) string {
	t.Helper()
	var v viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/views", shared.Token, viewBody(name, ns)), &v)
	mustCall(t, 200, "POST", "/lifecycle/v1/catalogs/"+c+"/properties", shared.Token, map[string]any{"updates": map[string]string{"soft-delete.enabled": "true"}})
	mustCall(t, 204, "DELETE", "/v1/"+c+"/namespaces/"+ns+"/views/"+name, shared.Token, nil)
	mustCall(t, 200, "POST", "/lifecycle/v1/catalogs/"+c+"/properties", shared.Token, map[string]any{"removals": []string{"soft-delete.enabled"}})
	return v.Metadata.UUID
}

// A view's legal hold is TABLE_LEGAL_HOLD's alone on every path (replace,
// register, the soft-deleted record), and while set nothing of the view
// is deleted: purge-now is a 409, so is an undrop that would lift a hold
// set after the drop.
func TestViewLegalHold(t *testing.T) {
	localOnly(t)
	name, _ := softCatalog(t, nil)
	ns := uniq("vlh")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	vpath := "/v1/" + name + "/namespaces/" + ns + "/views"
	var most []authz.Privilege
	for _, p := range authz.All {
		if p != authz.TableLegalHold {
			most = append(most, p)
		}
	}
	writer := grantTo(t, shared.Token, name, most)
	keeper := grantTo(t, shared.Token, name, []authz.Privilege{authz.TableLegalHold})

	var held viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", vpath, shared.Token, viewBody("h", ns, "icehold.legal-hold", "true")), &held)
	for what, u := range map[string]any{
		"remove-properties":    map[string]any{"action": "remove-properties", "removals": []string{"icehold.legal-hold"}},
		"set-properties false": map[string]any{"action": "set-properties", "updates": map[string]string{"icehold.legal-hold": "false"}},
	} {
		if st, body := call(t, "POST", vpath+"/h", writer, map[string]any{"requirements": []any{}, "updates": []any{u}}); st != 403 {
			t.Errorf("replace %s without TABLE_LEGAL_HOLD: %d %s", what, st, body)
		}
	}
	// Other properties stay the writer's.
	mustCall(t, 200, "POST", vpath+"/h", writer, map[string]any{"requirements": []any{}, "updates": setProps()})

	// Register of a held view's metadata sets the hold: on a catalog that
	// drops hard, so the dropped view's location is free.
	hard := uniq("hard")
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": hard, "warehouse": "s3://icehold-warehouse/" + hard})
	mustCall(t, 200, "POST", "/v1/"+hard+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	var g viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", "/v1/"+hard+"/namespaces/"+ns+"/views", shared.Token, viewBody("g", ns, "icehold.legal-hold", "true")), &g)
	mustCall(t, 204, "DELETE", "/v1/"+hard+"/namespaces/"+ns+"/views/g", shared.Token, nil)
	creator := grantTo(t, shared.Token, hard, []authz.Privilege{authz.TableCreate, authz.TableWrite, authz.TableRead})
	if st, body := call(t, "POST", "/v1/"+hard+"/namespaces/"+ns+"/register-view", creator, map[string]any{"name": "g", "metadata-location": g.MetadataLocation}); st != 403 {
		t.Errorf("register of held view metadata without TABLE_LEGAL_HOLD: %d %s", st, body)
	}

	// The soft-deleted record: a hold set after the drop.
	var v viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", vpath, shared.Token, viewBody("v", ns)), &v)
	mustCall(t, 204, "DELETE", vpath+"/v", shared.Token, nil)
	hold := "/lifecycle/v1/catalogs/" + name + "/soft-deleted-tables/" + v.Metadata.UUID + "/legal-hold"
	if st, body := call(t, "POST", hold, writer, map[string]any{"enabled": true}); st != 403 {
		t.Errorf("record hold without TABLE_LEGAL_HOLD: %d %s", st, body)
	}
	var rec softdelete.View
	mustDecode(t, mustCall(t, 200, "POST", hold, keeper, map[string]any{"enabled": true}), &rec)
	if rec.Kind != "view" || rec.ViewUUID != v.Metadata.UUID || !rec.LegalHold {
		t.Errorf("held record: %+v", rec)
	}
	lc := "/lifecycle/v1/catalogs/" + name + "/namespaces/" + ns + "/views/v"
	for _, op := range []string{"/purge-now", "/undrop"} {
		st, body := call(t, "POST", lc+op, shared.Token, map[string]any{})
		if typ, _, _ := errorModel(t, body); st != 409 || typ != "LegalHoldException" {
			t.Errorf("%s of a held view: %d %s", op, st, body)
		}
	}
	mustCall(t, 200, "POST", hold, keeper, map[string]any{"enabled": false})
	mustCall(t, 202, "POST", lc+"/purge-now", shared.Token, map[string]any{})
}

// No table operation reaches a view through its name, nor a view
// operation a table: each is refused and both are unchanged.
func TestTableOperationsLeaveAViewAlone(t *testing.T) {
	ns := uniq("vtbl")
	base := "/v1/" + shared.Catalog + "/namespaces/" + ns
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	var v viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", base+"/views", shared.Token, viewBody("v", ns)), &v)
	mustCall(t, 200, "POST", base+"/tables", shared.Token, map[string]any{"name": "t", "schema": rawSchema})
	mustCall(t, 200, "POST", base+"/tables", shared.Token, map[string]any{"name": "r", "schema": rawSchema})
	free := loadedMetadataLocation(t, base+"/tables/r")
	mustCall(t, 204, "DELETE", base+"/tables/r", shared.Token, nil)
	freeView := droppedViewIn(t, shared.Catalog, ns, "dv")
	ident := map[string]any{"namespace": []string{ns}, "name": "v"}
	for _, c := range []struct {
		name, method, path string
		body               any
		want               int
	}{
		{"load table", "GET", base + "/tables/v", nil, 404},
		{"table exists", "HEAD", base + "/tables/v", nil, 404},
		{"drop table", "DELETE", base + "/tables/v", nil, 404},
		{"drop table with purge", "DELETE", base + "/tables/v?purgeRequested=true", nil, 404},
		{"commit table", "POST", base + "/tables/v", map[string]any{"requirements": []any{}, "updates": setProps()}, 404},
		{"stage-create table", "POST", base + "/tables", map[string]any{"name": "v", "schema": rawSchema, "stage-create": true}, 409},
		{"commit assert-create", "POST", base + "/tables/v", map[string]any{"requirements": assertCreate, "updates": createUpdates(fixture{ns: ns}, "v")}, 409},
		{"register table", "POST", base + "/register", map[string]any{"name": "v", "metadata-location": free}, 409},
		{"register table with overwrite", "POST", base + "/register", map[string]any{"name": "v", "metadata-location": free, "overwrite": true}, 409},
		{"rename table onto it", "POST", "/v1/" + shared.Catalog + "/tables/rename", map[string]any{"source": map[string]any{"namespace": []string{ns}, "name": "t"}, "destination": ident}, 409},
		{"rename it as a table", "POST", "/v1/" + shared.Catalog + "/tables/rename", map[string]any{"source": ident, "destination": map[string]any{"namespace": []string{ns}, "name": "t2"}}, 404},
		{"transaction on it", "POST", "/v1/" + shared.Catalog + "/transactions/commit", map[string]any{"table-changes": []any{map[string]any{"identifier": ident, "requirements": []any{}, "updates": setProps()}}}, 404},
		// And the other way round: view operations at the table's name.
		{"view exists at a table", "HEAD", base + "/views/t", nil, 404},
		{"drop view at a table", "DELETE", base + "/views/t", nil, 404},
		{"register view at a table", "POST", base + "/register-view", map[string]any{"name": "t", "metadata-location": freeView}, 409},
		{"rename the view to its own name", "POST", "/v1/" + shared.Catalog + "/views/rename", map[string]any{"source": ident, "destination": ident}, 409},
		{"rename a table as a view", "POST", "/v1/" + shared.Catalog + "/views/rename", map[string]any{"source": map[string]any{"namespace": []string{ns}, "name": "t"}, "destination": map[string]any{"namespace": []string{ns}, "name": "t3"}}, 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			if st, body := call(t, c.method, c.path, shared.Token, c.body); st != c.want {
				t.Errorf("%d %s, want %d", st, body, c.want)
			}
		})
	}
	mustCall(t, 200, "GET", base+"/tables/t", shared.Token, nil)
	var after viewAnswer
	mustDecode(t, mustCall(t, 200, "GET", base+"/views/v", shared.Token, nil), &after)
	if after.MetadataLocation != v.MetadataLocation {
		t.Errorf("the view moved: %s -> %s", v.MetadataLocation, after.MetadataLocation)
	}
}

// Replaces race by compare-and-swap: of concurrent replaces from one base
// at most one wins (no two answers are the same successor file), the
// others are 409 CommitFailedException, and the view is the last winner's.
func TestViewReplaceRace(t *testing.T) {
	ns := uniq("vcas")
	base := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/views"
	mustCall(t, 200, "POST", "/v1/"+shared.Catalog+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	mustCall(t, 200, "POST", base, shared.Token, viewBody("v", ns))
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[string]string{} // successor file number -> metadata location
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, body := call(t, "POST", base+"/v", shared.Token, map[string]any{"requirements": []any{},
				"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"writer": string(rune('a' + i))}}}})
			switch st {
			case 200:
				var a viewAnswer
				mustDecode(t, body, &a)
				n := a.MetadataLocation[strings.LastIndex(a.MetadataLocation, "/")+1:][:5]
				mu.Lock()
				defer mu.Unlock()
				if prev, ok := won[n]; ok {
					t.Errorf("two replaces won as file %s: %s and %s", n, prev, a.MetadataLocation)
				}
				won[n] = a.MetadataLocation
			case 409:
				if typ, _, _ := errorModel(t, body); typ != "CommitFailedException" {
					t.Errorf("a lost replace: %s", body)
				}
			default:
				t.Errorf("a replace answered %d %s", st, body)
			}
		}()
	}
	wg.Wait()
	if len(won) == 0 {
		t.Fatal("no replace won")
	}
	var now viewAnswer
	mustDecode(t, mustCall(t, 200, "GET", base+"/v", shared.Token, nil), &now)
	n := now.MetadataLocation[strings.LastIndex(now.MetadataLocation, "/")+1:][:5]
	if last, err := strconv.Atoi(n); err != nil || won[n] != now.MetadataLocation || len(won) != last {
		t.Errorf("current %s, winners %v: want the last of an unbroken chain", now.MetadataLocation, won)
	}

	// The losers' files are orphans: the sweep deletes them and keeps every
	// file that was current once (the create's and the winners').
	srv := localOnly(t)
	dir := now.MetadataLocation[:strings.LastIndex(now.MetadataLocation, "/")+1]
	files := func() []string {
		var out []string
		for k := range bucketObjects(t, srv) {
			if strings.HasPrefix(k, dir) {
				out = append(out, k)
			}
		}
		slices.Sort(out)
		return out
	}
	before := files()
	t.Logf("%d replaces won, %d files before the sweep", len(won), len(before))
	if len(before) == len(won)+1 {
		return // no replace lost: nothing to sweep
	}
	if _, err := srv.Purge.SweepOrphans(context.Background(), time.Now().Add(purge.IntentTTL+time.Minute)); err != nil {
		t.Fatal(err)
	}
	want := []string{dir + "00000"}
	for _, loc := range won {
		want = append(want, loc)
	}
	// The sweep's jobs delete the losers' files; the suite's other tests
	// sweep the shared server too (a job may be theirs, and tidied), so
	// what is waited for is the files, not a job id.
	got := files()
	for deadline := time.Now().Add(time.Minute); len(got) != len(want) && time.Now().Before(deadline); got = files() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(got) != len(want) || !strings.HasPrefix(got[0], want[0]) {
		t.Fatalf("after the sweep %v, want the create's file and the winners' %v", got, won)
	}
	for _, loc := range won {
		if !slices.Contains(got, loc) {
			t.Errorf("the sweep deleted %s, once current", loc)
		}
	}
	mustCall(t, 200, "GET", base+"/v", shared.Token, nil)
}

// A view that moved (set-location) owns both locations until its
// permanent delete, which deletes the metadata files under both and
// releases both: a table can then take either.
func TestViewMovedLocationPurgeNow(t *testing.T) {
	srv := localOnly(t)
	name, _ := softCatalog(t, nil)
	ns := uniq("vmv")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	base := "/v1/" + name + "/namespaces/" + ns
	var v viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", base+"/views", shared.Token, viewBody("v", ns)), &v)
	moved := "s3://icehold-warehouse/" + name + "/elsewhere/" + ns
	var m viewAnswer
	mustDecode(t, mustCall(t, 200, "POST", base+"/views/v", shared.Token, map[string]any{"requirements": []any{},
		"updates": []any{map[string]any{"action": "set-location", "location": moved}}}), &m)
	if !strings.HasPrefix(m.MetadataLocation, moved+"/metadata/") {
		t.Fatalf("moved view's metadata %s", m.MetadataLocation)
	}
	table := func(loc string) (int, []byte) {
		return call(t, "POST", base+"/tables", shared.Token, map[string]any{"name": uniq("t"), "schema": rawSchema, "location": loc})
	}
	for _, loc := range []string{v.Metadata.Location, moved} {
		if st, body := table(loc); st != 409 {
			t.Errorf("a table at the view's location %s: %d %s", loc, st, body)
		}
	}
	mustCall(t, 204, "DELETE", base+"/views/v", shared.Token, nil)
	var j jobJSON
	mustDecode(t, mustCall(t, 202, "POST", "/lifecycle/v1/catalogs/"+name+"/namespaces/"+ns+"/views/v/purge-now", shared.Token, map[string]any{}), &j)
	if j = waitJobIn(t, name, j.ID, "SUCCEEDED"); j.State != "SUCCEEDED" || j.MetadataFilesDeleted != 2 {
		t.Errorf("the view's job: %+v, want its 2 metadata files deleted", j)
	}
	for k := range bucketObjects(t, srv) {
		if k == v.MetadataLocation || k == m.MetadataLocation {
			t.Errorf("left after the purge: %s", k)
		}
	}
	for _, loc := range []string{v.Metadata.Location, moved} {
		if st, body := table(loc); st != 200 {
			t.Errorf("a table at the purged view's location %s: %d %s", loc, st, body)
		}
	}
}
