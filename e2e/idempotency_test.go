package e2e

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// Idempotency-Key: the same request replays the first answer without running
// again; another request under the key is 422; a failure worth retrying is
// not stored.
func TestIdempotencyKey(t *testing.T) {
	admin := shared.Token
	c := shared.Catalog
	ns := uniq("idem")
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces", admin, map[string]any{"namespace": []string{ns}})
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/tables", admin, `{"name":"t","schema":`+schemaJSON+`}`)
	path := "/v1/" + c + "/namespaces/" + ns + "/tables/t"
	commit := func(v string) map[string]any {
		return map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"v": v}}}}
	}
	var first, again, load struct {
		Loc string `json:"metadata-location"`
	}

	key := uuid.NewString()
	s1, b1 := call(t, "POST", path, admin, commit("1"), "Idempotency-Key", key)
	s2, b2 := call(t, "POST", path, admin, commit("1"), "Idempotency-Key", key)
	if s1 != 200 || s2 != 200 {
		t.Fatalf("statuses %d %d: %s %s", s1, s2, b1, b2)
	}
	mustDecode(t, b1, &first)
	mustDecode(t, b2, &again)
	mustDecode(t, mustCall(t, 200, "GET", path, admin, nil), &load)
	if again.Loc != first.Loc || load.Loc != first.Loc {
		t.Errorf("replay committed again: first %s, replay %s, table %s", first.Loc, again.Loc, load.Loc)
	}

	status, out := call(t, "POST", path, admin, commit("2"), "Idempotency-Key", key)
	if status != 422 {
		t.Errorf("same key, other payload: %d %s, want 422", status, out)
	}

	// A deterministic 4xx is replayed too.
	key2 := uuid.NewString()
	s1, _ = call(t, "POST", "/v1/"+c+"/namespaces", admin, `{"namespace": [`, "Idempotency-Key", key2)
	s2, _ = call(t, "POST", "/v1/"+c+"/namespaces", admin, `{"namespace": [`, "Idempotency-Key", key2)
	if s1 != 400 || s2 != 400 {
		t.Errorf("malformed body with key: %d then %d, want 400 twice", s1, s2)
	}

	// Concurrent requests under one key: one runs, the others are replays or
	// 409 while it is in flight; the table moves exactly once.
	key3 := uuid.NewString()
	var wg sync.WaitGroup
	locs := make([]string, 8)
	codes := make([]int, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, b := call(t, "POST", path, admin, commit("3"), "Idempotency-Key", key3)
			codes[i] = st
			if st == 200 {
				var r struct {
					Loc string `json:"metadata-location"`
				}
				mustDecode(t, b, &r)
				locs[i] = r.Loc
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, st := range codes {
		switch st {
		case 200:
			seen[locs[i]] = true
		case 409:
		default:
			t.Errorf("concurrent request %d: status %d", i, st)
		}
	}
	if len(seen) != 1 {
		t.Errorf("concurrent requests under one key produced %d commits: %v", len(seen), fmt.Sprint(seen))
	}
}

// A replayed answer is the first one as a client sees it: one that carries
// credentials (a create's config, vended keys) is no-store as the first
// was, and a table answer keeps its ETag.
func TestIdempotentReplayKeepsCacheControlAndETag(t *testing.T) {
	admin := shared.Token
	c := shared.Catalog
	ns := uniq("idemhdr")
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces", admin, map[string]any{"namespace": []string{ns}})
	key := uuid.NewString()
	body := `{"name":"t","schema":` + schemaJSON + `}`
	path := "/v1/" + c + "/namespaces/" + ns + "/tables"
	s1, h1, b1 := callHeaders(t, "POST", path, admin, body, "Idempotency-Key", key, "X-Iceberg-Access-Delegation", "vended-credentials")
	s2, h2, b2 := callHeaders(t, "POST", path, admin, body, "Idempotency-Key", key, "X-Iceberg-Access-Delegation", "vended-credentials")
	if s1 != 200 || s2 != 200 || string(b1) != string(b2) {
		t.Fatalf("keyed create: %d then %d (same body %v)", s1, s2, string(b1) == string(b2))
	}
	if h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the second answer is no replay: %v", h2)
	}
	for _, k := range []string{"Cache-Control", "ETag"} {
		if h1.Get(k) == "" || h2.Get(k) != h1.Get(k) {
			t.Errorf("%s: first answer %q, replay %q; want the replay to repeat it", k, h1.Get(k), h2.Get(k))
		}
	}
}
