package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/purge"
)

// Defect: the catalog stamped a request's intent (the metadata files it is
// about to write) with the wall clock, while the orphan sweep judges intents
// by the server's clock. On a server whose clock runs ahead (the
// simulation's, a test's), every intent was stale the moment it was
// written, so a sweep during a commit could take the commit's file; on one
// whose clock lags, a lost write's file outlived its hour. Now both read
// the server's clock: a commit whose metadata write failed leaves an intent
// the sweep leaves alone until an hour has passed on that clock, and takes
// then.
func TestIntentsAgeByTheServersClock(t *testing.T) {
	e := newSweepEnv(t)
	ctx := context.Background()
	e.advance(2 * purge.IntentTTL) // the server's clock runs ahead of the wall's
	e.call(t, 200, "POST", "/v1/"+e.srv.Info.Catalog+"/namespaces", map[string]any{"namespace": []string{"ic"}})
	tables := "/v1/" + e.srv.Info.Catalog + "/namespaces/ic/tables"
	e.call(t, 200, "POST", tables, map[string]any{"name": "t", "schema": map[string]any{"type": "struct", "fields": []any{
		map[string]any{"id": 1, "name": "id", "type": "long", "required": false}}}})

	// The commit's metadata PUT fails: its intent stays, naming the file.
	e.srv.S3Emulator.SetFault(&emulators.Fault{Status: http.StatusServiceUnavailable, Code: "SlowDown", Match: func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, ".metadata.json")
	}})
	code, out := callAt(t, e.base, "POST", tables+"/t", e.srv.Info.AdminToken, map[string]any{"requirements": []any{},
		"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"k": "v"}}}})
	e.srv.S3Emulator.SetFault(nil)
	if code < 500 {
		t.Fatalf("the commit whose metadata write failed: %d %s, want a 5xx", code, out)
	}

	sweep := func() purge.OrphanReport {
		t.Helper()
		r, err := e.srv.RunSchedule(ctx, server.ScheduleOrphans)
		if err != nil {
			t.Fatal(err)
		}
		return r.(purge.OrphanReport)
	}
	if rep := sweep(); rep.Intents != 0 {
		t.Fatalf("a sweep at once took %d intents (%+v): the failed commit's intent is minutes old on the server's clock", rep.Intents, rep)
	}
	e.advance(purge.IntentTTL + 1)
	if rep := sweep(); rep.Intents != 1 || len(rep.Jobs) != 1 {
		t.Fatalf("a sweep an hour later: %+v, want the failed commit's one intent in one job", rep)
	}
}
