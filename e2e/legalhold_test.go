package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/authz"
)

// A legal hold the table's writers can lift holds nothing (SPEC §2, §4):
// icehold.legal-hold is set and cleared only with TABLE_LEGAL_HOLD, on
// every path that writes table properties, and on the soft-deleted record.
func TestLegalHoldNeedsItsOwnPrivilege(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	name, cat := softCatalog(t, nil)
	ns := uniq("lh")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tpath := "/v1/" + name + "/namespaces/" + ns + "/tables"
	held := map[string]string{"icehold.legal-hold": "true"}
	mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": "h", "schema": rawSchema, "properties": held})
	hMeta := loadedMetadataLocation(t, tpath+"/h")

	// Everything but TABLE_LEGAL_HOLD.
	var most []authz.Privilege
	for _, p := range authz.All {
		if p != authz.TableLegalHold {
			most = append(most, p)
		}
	}
	writer := grantTo(t, shared.Token, name, most)
	keeper := grantTo(t, shared.Token, name, []authz.Privilege{authz.TableLegalHold, authz.TableWrite, authz.TableCreate})

	remove := map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "remove-properties", "removals": []string{"icehold.legal-hold"}}}}
	setFalse := map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"icehold.legal-hold": "false"}}}}
	tx := func(ch map[string]any) map[string]any {
		c := map[string]any{"identifier": map[string]any{"namespace": []string{ns}, "name": "h"}}
		for k, v := range ch {
			c[k] = v
		}
		return map[string]any{"table-changes": []any{c}}
	}
	refused := []struct {
		name, method, path string
		body               any
	}{
		{"commit remove-properties", "POST", tpath + "/h", remove},
		{"commit set-properties false", "POST", tpath + "/h", setFalse},
		{"transaction remove-properties", "POST", "/v1/" + name + "/transactions/commit", tx(remove)},
		{"transaction set-properties false", "POST", "/v1/" + name + "/transactions/commit", tx(setFalse)},
		{"create with the hold", "POST", tpath, map[string]any{"name": "c", "schema": rawSchema, "properties": held}},
	}
	for _, r := range refused {
		if st, body := call(t, r.method, r.path, writer, r.body); st != 403 {
			t.Errorf("%s without TABLE_LEGAL_HOLD: %d %s", r.name, st, body)
		}
	}
	if got := loadedMetadataLocation(t, tpath+"/h"); got != hMeta {
		t.Errorf("a refused request moved the table: %s -> %s", hMeta, got)
	}
	// A namespace's or the catalog's hold holds every table under it (its
	// vended sessions are read-only, none is purged): setting or clearing
	// it takes TABLE_LEGAL_HOLD too (NAMESPACE_CREATE, CATALOG_MANAGE
	// lifted it).
	heldNS := uniq("lhns")
	mustCall(t, 200, "POST", "/v1/"+name+"/namespaces", shared.Token, map[string]any{"namespace": []string{heldNS}, "properties": held})
	nsProps := "/v1/" + name + "/namespaces/" + heldNS + "/properties"
	catProps := "/lifecycle/v1/catalogs/" + name + "/properties"
	for _, r := range []struct {
		name, path string
		body       any
	}{
		{"namespace remove the hold", nsProps, map[string]any{"removals": []string{"icehold.legal-hold"}}},
		{"namespace set the hold false", nsProps, map[string]any{"updates": map[string]string{"icehold.legal-hold": "false"}}},
		{"namespace create with the hold", "/v1/" + name + "/namespaces", map[string]any{"namespace": []string{uniq("lhc")}, "properties": held}},
		{"catalog set the hold", catProps, map[string]any{"updates": held}},
		{"catalog remove the hold", catProps, map[string]any{"removals": []string{"icehold.legal-hold"}}},
	} {
		if st, body := call(t, "POST", r.path, writer, r.body); st != 403 {
			t.Errorf("%s without TABLE_LEGAL_HOLD: %d %s", r.name, st, body)
		}
	}
	var loadedNS struct {
		Properties map[string]string `json:"properties"`
	}
	mustDecode(t, mustCall(t, 200, "GET", "/v1/"+name+"/namespaces/"+heldNS, shared.Token, nil), &loadedNS)
	if loadedNS.Properties["icehold.legal-hold"] != "true" {
		t.Errorf("the namespace's hold after the refused lifts: %v", loadedNS.Properties)
	}
	nsKeeper := grantTo(t, shared.Token, name, []authz.Privilege{authz.NamespaceCreate, authz.TableLegalHold})
	mustCall(t, 200, "POST", nsProps, nsKeeper, map[string]any{"removals": []string{"icehold.legal-hold"}})
	if st, body := call(t, "POST", nsProps, writer, map[string]any{"updates": map[string]string{"owner": "x"}}); st != 200 {
		t.Errorf("a namespace property other than the hold with NAMESPACE_CREATE: %d %s", st, body)
	}
	if st, body := call(t, "DELETE", tpath+"/h?purgeRequested=true", writer, nil); st != 409 || !strings.Contains(string(body), "LegalHold") {
		t.Errorf("drop with purge after the refused lifts: %d %s", st, body)
	}

	// Register with overwrite: metadata without the hold over the held
	// table clears it (an older metadata file of the same table, so the
	// location is its own).
	mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": "o", "schema": rawSchema})
	oFree := loadedMetadataLocation(t, tpath+"/o")
	mustCall(t, 200, "POST", tpath+"/o", shared.Token, map[string]any{"requirements": []any{},
		"updates": []any{map[string]any{"action": "set-properties", "updates": held}}})
	oHeld := loadedMetadataLocation(t, tpath+"/o")
	reg := "/v1/" + name + "/namespaces/" + ns + "/register"
	if st, body := call(t, "POST", reg, writer, map[string]any{"name": "o", "metadata-location": oFree, "overwrite": true}); st != 403 {
		t.Errorf("register overwrite clearing the hold without TABLE_LEGAL_HOLD: %d %s", st, body)
	}
	if got := loadedMetadataLocation(t, tpath+"/o"); got != oHeld {
		t.Errorf("the refused register moved the table: %s -> %s", oHeld, got)
	}
	// Register of metadata that carries a hold sets it: on a catalog that
	// drops hard, so the dropped table's location is free to register.
	hard := uniq("hard")
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": hard, "warehouse": "s3://icehold-warehouse/" + hard})
	mustCall(t, 200, "POST", "/v1/"+hard+"/namespaces", shared.Token, map[string]any{"namespace": []string{ns}})
	hpath := "/v1/" + hard + "/namespaces/" + ns + "/tables"
	mustCall(t, 200, "POST", hpath, shared.Token, map[string]any{"name": "g", "schema": rawSchema, "properties": held})
	gMeta := loadedMetadataLocation(t, hpath+"/g")
	mustCall(t, 204, "DELETE", hpath+"/g", shared.Token, nil)
	creator := grantTo(t, shared.Token, hard, []authz.Privilege{authz.TableCreate, authz.TableWrite, authz.TableRead})
	if st, body := call(t, "POST", "/v1/"+hard+"/namespaces/"+ns+"/register", creator, map[string]any{"name": "g", "metadata-location": gMeta}); st != 403 {
		t.Errorf("register of held metadata without TABLE_LEGAL_HOLD: %d %s", st, body)
	}
	hardKeeper := grantTo(t, shared.Token, hard, []authz.Privilege{authz.TableCreate, authz.TableLegalHold})
	mustCall(t, 200, "POST", "/v1/"+hard+"/namespaces/"+ns+"/register", hardKeeper, map[string]any{"name": "g", "metadata-location": gMeta})

	// With the privilege, the writer's way works: clear, then drop with purge.
	mustCall(t, 200, "POST", tpath+"/o", keeper, setFalse)

	// The soft-deleted record's legal hold: TABLE_LEGAL_HOLD, not CATALOG_MANAGE.
	mustCall(t, 204, "DELETE", tpath+"/h", shared.Token, nil)
	var uuid string
	for _, r := range softDeleted(t, name, ns) {
		if r.Name == "h" {
			uuid = r.TableUUID
		}
	}
	holdPath := "/lifecycle/v1/catalogs/" + name + "/soft-deleted-tables/" + uuid + "/legal-hold"
	manager := grantTo(t, shared.Token, name, []authz.Privilege{authz.CatalogManage})
	if st, body := call(t, "POST", holdPath, manager, map[string]any{"enabled": false}); st != 403 {
		t.Errorf("clearing a record's legal hold with CATALOG_MANAGE only: %d %s", st, body)
	}
	if st, body := call(t, "POST", holdPath, writer, map[string]any{"enabled": false}); st != 403 {
		t.Errorf("clearing a record's legal hold without TABLE_LEGAL_HOLD: %d %s", st, body)
	}
	mustCall(t, 200, "POST", holdPath, keeper, map[string]any{"enabled": false})
	mustCall(t, 200, "POST", holdPath, keeper, map[string]any{"enabled": true})
	if st, _ := call(t, "POST", lifecycleTablePath(name, ns, "h")+"/purge-now", shared.Token, map[string]any{}); st != 409 {
		t.Errorf("purge-now of the record held again: %d", st)
	}

	// A hold set on the record after the drop is not in the table's
	// metadata: an undrop would lift it, so it is refused until cleared.
	mustCall(t, 200, "POST", tpath, shared.Token, map[string]any{"name": "u", "schema": rawSchema})
	mustCall(t, 204, "DELETE", tpath+"/u", shared.Token, nil)
	for _, r := range softDeleted(t, name, ns) {
		if r.Name == "u" {
			mustCall(t, 200, "POST", "/lifecycle/v1/catalogs/"+name+"/soft-deleted-tables/"+r.TableUUID+"/legal-hold", keeper, map[string]any{"enabled": true})
		}
	}
	if st, body := call(t, "POST", lifecycleTablePath(name, ns, "u")+"/undrop", shared.Token, nil); st != 409 || !strings.Contains(string(body), "LegalHold") {
		t.Errorf("undrop of a record held after its drop: %d %s", st, body)
	}
	if st, body := call(t, "DELETE", tpath+"/u?purgeRequested=true", shared.Token, nil); st != 404 {
		t.Errorf("the refused undrop restored the table: drop with purge %d %s", st, body)
	}
}

// loadedMetadataLocation loads a table (admin) and returns its metadata location.
func loadedMetadataLocation(t *testing.T, path string) string {
	t.Helper()
	var res struct {
		Loc string `json:"metadata-location"`
	}
	mustDecode(t, mustCall(t, 200, "GET", path, shared.Token, nil), &res)
	return res.Loc
}
