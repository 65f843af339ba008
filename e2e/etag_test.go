package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

// s3GetsUnder counts the embedded S3's GETs of objects under a location
// while a test runs (other tests' requests elsewhere are not counted).
func s3GetsUnder(t *testing.T, loc string) func() int {
	t.Helper()
	srv := localOnly(t)
	prefix := "/" + strings.TrimPrefix(loc, "s3://") + "/"
	var mu sync.Mutex
	n := 0
	srv.S3Emulator.SetObserver(func(r *http.Request) {
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, prefix) {
			mu.Lock()
			n++
			mu.Unlock()
		}
	})
	t.Cleanup(func() { srv.S3Emulator.SetObserver(nil) })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// Load, create and commit answers carry an ETag; If-None-Match with the
// current tag answers 304 with no body and no S3 read, and the tag tells
// snapshots=all from refs and one metadata version from the next.
func TestTableAnswersRevalidate(t *testing.T) {
	localOnly(t)
	ns := newNamespace(t, "etag")
	tables := "/v1/" + shared.Catalog + "/namespaces/" + ns + "/tables"
	path := tables + "/t"
	status, h, body := callHeaders(t, "POST", tables, shared.Token, map[string]any{
		"name": "t", "schema": map[string]any{"type": "struct", "schema-id": 0, "fields": []any{
			map[string]any{"id": 1, "name": "id", "type": "long", "required": false}}},
	})
	if status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	created := h.Get("ETag")
	if created == "" {
		t.Fatal("the create answer has no ETag")
	}
	var res struct {
		Loc string `json:"metadata-location"`
	}
	mustDecode(t, body, &res)
	location := res.Loc[:strings.Index(res.Loc, "/metadata/")]

	_, h, _ = callHeaders(t, "GET", path, shared.Token, nil)
	if h.Get("ETag") != created {
		t.Errorf("load tag %q, create tag %q: one metadata version, one tag", h.Get("ETag"), created)
	}
	gets := s3GetsUnder(t, location)
	status, h, body = callHeaders(t, "GET", path, shared.Token, nil, "If-None-Match", created)
	if status != http.StatusNotModified || len(body) != 0 || h.Get("ETag") != created {
		t.Fatalf("revalidation: %d, %d bytes, tag %q; want 304, no body, tag %q", status, len(body), h.Get("ETag"), created)
	}
	if n := gets(); n != 0 {
		t.Errorf("the revalidation read S3 %d times; want none (the entry alone)", n)
	}

	_, h, _ = callHeaders(t, "GET", path+"?snapshots=refs", shared.Token, nil)
	refs := h.Get("ETag")
	if refs == "" || refs == created {
		t.Errorf("snapshots=refs tag %q, snapshots=all tag %q: two bodies need two tags", refs, created)
	}
	if status, _, _ := callHeaders(t, "GET", path+"?snapshots=refs", shared.Token, nil, "If-None-Match", created); status != 200 {
		t.Errorf("refs load revalidated with the all tag: %d", status)
	}
	if status, _, _ := callHeaders(t, "GET", path+"?snapshots=refs", shared.Token, nil, "If-None-Match", refs); status != http.StatusNotModified {
		t.Errorf("refs load with its own tag: %d, want 304", status)
	}

	status, h, body = callHeaders(t, "POST", path, shared.Token, map[string]any{
		"requirements": []any{}, "updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"k": "v"}}},
	})
	if status != 200 || h.Get("ETag") == "" || h.Get("ETag") == created {
		t.Fatalf("commit: %d, tag %q (before %q): %s", status, h.Get("ETag"), created, body)
	}
	committed := h.Get("ETag")
	if status, _, _ := callHeaders(t, "GET", path, shared.Token, nil, "If-None-Match", created); status != 200 {
		t.Errorf("a tag of the old metadata revalidated: %d", status)
	}
	if status, _, _ := callHeaders(t, "GET", path, shared.Token, nil, "If-None-Match", `"other", `+committed); status != http.StatusNotModified {
		t.Errorf("the commit's tag in a list: %d, want 304", status)
	}
}
