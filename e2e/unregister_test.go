package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// unregisterTable forgets a table and keeps every file: the entry is gone,
// every object is still there, its location stays owned (no other table
// takes it while none owns it), and a register of the answered metadata
// brings the table back, rows and all.
func TestUnregisterKeepsFilesAndRegisterBringsItBack(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := newNamespace(t, "unreg")
	tbl := writtenTable(t, cat, ns, "t", nil, false)
	rowsBefore := countRows(t, tbl)
	before := under(t, tbl.Location())
	if len(before) == 0 {
		t.Fatal("the table has no objects")
	}
	base := "/v1/" + shared.Catalog + "/namespaces/" + ns

	out := mustCall(t, 200, "POST", base+"/tables/t/unregister", shared.Token, nil)
	var res struct {
		Loc      string          `json:"metadata-location"`
		Metadata json.RawMessage `json:"metadata"`
	}
	mustDecode(t, out, &res)
	if res.Loc != tbl.MetadataLocation() || !strings.Contains(string(res.Metadata), tbl.Metadata().TableUUID().String()) {
		t.Errorf("unregister answered %s and metadata %.80s; want the last metadata %s", res.Loc, res.Metadata, tbl.MetadataLocation())
	}
	if status, _ := call(t, "GET", base+"/tables/t", shared.Token, nil); status != 404 {
		t.Errorf("load after unregister: %d, want 404", status)
	}
	after := under(t, tbl.Location())
	sameObjects(t, "unregister", before, after)
	if len(after) != len(before) {
		t.Errorf("%d objects before, %d after", len(before), len(after))
	}

	// The prefix stays owned: a table created at it is refused, naming why.
	status, body := call(t, "POST", base+"/tables", shared.Token, map[string]any{
		"name": "squatter", "location": tbl.Location(), "schema": rawSchema,
	})
	if status != 409 {
		t.Fatalf("create at the unregistered table's location: %d %s, want 409", status, body)
	}
	if _, _, msg := errorModel(t, body); !strings.Contains(msg, "unregistered table "+ns+".t") {
		t.Errorf("the 409 does not name the unregistered table: %s", msg)
	}
	if status, body := call(t, "POST", base+"/tables/t/unregister", shared.Token, nil); status != 404 {
		t.Errorf("unregister again: %d %s, want 404", status, body)
	}

	mustCall(t, 200, "POST", base+"/register", shared.Token, map[string]any{"name": "t", "metadata-location": res.Loc})
	back, err := cat.LoadTable(ctx, tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, back); n != rowsBefore {
		t.Errorf("registered again: %d rows, want %d", n, rowsBefore)
	}
	// The entry owns the location again: dropping it releases the prefix.
	mustCall(t, 204, "DELETE", base+"/tables/t", shared.Token, nil)
	mustCall(t, 200, "POST", base+"/tables", shared.Token, map[string]any{"name": "next", "location": tbl.Location(), "schema": rawSchema})
}
