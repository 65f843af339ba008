package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// lambdaLimit is Lambda's response payload limit (base64 of the body counts).
const lambdaLimit = 6 << 20

// A table whose metadata JSON is larger than Lambda's 6 MB answer limit
// still loads: gzip when the client accepts it, and snapshots=refs.
func TestLargeMetadataLoads(t *testing.T) {
	admin := shared.Token
	c := shared.Catalog
	ns := uniq("large")
	mustCall(t, 200, "POST", "/v1/"+c+"/namespaces", admin, map[string]any{"namespace": []string{ns}})
	var created struct {
		Metadata struct {
			Location string `json:"location"`
		} `json:"metadata"`
	}
	mustDecode(t, mustCall(t, 200, "POST", "/v1/"+c+"/namespaces/"+ns+"/tables", admin, `{"name":"big","schema":`+schemaJSON+`}`), &created)
	path := "/v1/" + c + "/namespaces/" + ns + "/tables/big"

	// Thousands of snapshots with chatty summaries, added in a few commits.
	summary := map[string]string{"operation": "append"}
	for i := range 12 {
		summary[fmt.Sprintf("engine.note-%02d", i)] = strings.Repeat("x", 60)
	}
	const perCommit, commits = 2000, 4
	var last int64
	now := time.Now().UnixMilli()
	for c := range commits {
		var updates []any
		for i := range perCommit {
			id := int64(c*perCommit + i + 1)
			snap := map[string]any{
				"snapshot-id": id, "sequence-number": id, "timestamp-ms": now + id,
				"manifest-list": fmt.Sprintf("%s/metadata/snap-%d.avro", created.Metadata.Location, id), "summary": summary, "schema-id": 0,
			}
			if id > 1 {
				snap["parent-snapshot-id"] = id - 1
			}
			updates = append(updates, map[string]any{"action": "add-snapshot", "snapshot": snap})
			last = id
		}
		updates = append(updates, map[string]any{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": last})
		mustCall(t, 200, "POST", path, admin, map[string]any{"requirements": []any{}, "updates": updates})
	}

	zipped := get(t, path, true)
	plain := gunzip(t, zipped)
	if len(plain) <= lambdaLimit {
		t.Fatalf("metadata answer is %d bytes; the test needs more than %d", len(plain), lambdaLimit)
	}
	// Uncompressed it cannot pass Lambda (a 502 in AWS): a clear error says
	// how to load it instead.
	status, body := call(t, "GET", path, shared.Token, nil, "Accept-Encoding", "identity")
	if status != 406 {
		t.Errorf("uncompressed load of %d bytes: %d, want 406", len(plain), status)
	} else if _, _, msg := errorModel(t, body); !strings.Contains(msg, "snapshots=refs") || !strings.Contains(msg, "gzip") {
		t.Errorf("406 gives no advice: %s", msg)
	}
	if len(zipped)*4/3 >= lambdaLimit {
		t.Errorf("gzip answer is %d bytes (base64 %d): over Lambda's limit", len(zipped), len(zipped)*4/3)
	}
	var full struct {
		Metadata struct {
			Snapshots []json.RawMessage `json:"snapshots"`
		} `json:"metadata"`
	}
	mustDecode(t, gunzip(t, zipped), &full)
	if len(full.Metadata.Snapshots) != perCommit*commits {
		t.Errorf("gzip answer has %d snapshots, want %d", len(full.Metadata.Snapshots), perCommit*commits)
	}
	refs := get(t, path+"?snapshots=refs", false)
	if status, _ := call(t, "GET", path+"?snapshots=refs", shared.Token, nil, "Accept-Encoding", "identity"); status != 200 {
		t.Errorf("uncompressed snapshots=refs: %d", status)
	}
	var onlyRefs struct {
		Metadata struct {
			Snapshots []struct {
				ID int64 `json:"snapshot-id"`
			} `json:"snapshots"`
			Refs map[string]any `json:"refs"`
		} `json:"metadata"`
	}
	mustDecode(t, refs, &onlyRefs)
	if len(onlyRefs.Metadata.Snapshots) != 1 || onlyRefs.Metadata.Snapshots[0].ID != last {
		t.Errorf("snapshots=refs kept %v, want only %d", onlyRefs.Metadata.Snapshots, last)
	}
	if len(refs) >= lambdaLimit {
		t.Errorf("refs answer is %d bytes", len(refs))
	}
	t.Logf("metadata %d bytes; gzip %d bytes; refs %d bytes", len(plain), len(zipped), len(refs))
}

func get(t *testing.T, path string, acceptGzip bool) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", shared.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+shared.Token)
	req.Header.Set("Accept-Encoding", "identity")
	if acceptGzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, b)
	}
	if acceptGzip != (res.Header.Get("Content-Encoding") == "gzip") {
		t.Fatalf("Content-Encoding %q with Accept-Encoding gzip=%v", res.Header.Get("Content-Encoding"), acceptGzip)
	}
	return b
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
