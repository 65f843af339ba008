package router_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/icehold/icehold/local/server"
)

var (
	once sync.Once
	srv  *server.Server
)

// fuzzServer is one in-memory local server shared by the fuzz targets, with a
// namespace "ns" and a table "ns.t".
func fuzzServer(t testing.TB) *server.Server {
	once.Do(func() {
		var err error
		srv, err = server.Start(context.Background(), server.Options{})
		if err != nil {
			t.Fatal(err)
		}
		send(srv, "POST", "/v1/demo/namespaces", `{"namespace":["ns"]}`)
		send(srv, "POST", "/v1/demo/namespaces/ns/tables", `{"name":"t","schema":{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","type":"long","required":false}]}}`)
	})
	return srv
}

func send(s *server.Server, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.Info.AdminToken)
	rec := httptest.NewRecorder()
	s.Handler.ServeHTTP(rec, req)
	return rec
}

// checkAnswer: no body may make the server fail (5xx) or answer an error
// outside the ErrorModel.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, body string) {
	if rec.Code >= 500 {
		t.Fatalf("body %q: status %d: %s", body, rec.Code, rec.Body.String())
	}
	if rec.Code >= 400 {
		var e struct {
			Error struct {
				Type string `json:"type"`
				Code int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Type == "" || e.Error.Code != rec.Code {
			t.Fatalf("body %q: %d answer is not an ErrorModel: %s", body, rec.Code, rec.Body.String())
		}
	}
}

func fuzzEndpoint(f *testing.F, method, path string, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		s := fuzzServer(t)
		checkAnswer(t, send(s, method, path, body), body)
	})
}

func FuzzCommitTable(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/demo/namespaces/ns/tables/t",
		`{"requirements":[],"updates":[{"action":"set-properties","updates":{"a":"b"}}]}`,
		`{"requirements":[{"type":"assert-current-schema-id","current-schema-id":0}],"updates":[{"action":"remove-properties","removals":["a"]}]}`,
		`{"updates":[{"action":"add-schema","schema":{"type":"struct","fields":[]}}]}`,
		`{"updates":[{"action":"set-current-schema","schema-id":-1}]}`,
		`{"updates":[{"action":"add-snapshot","snapshot":{"snapshot-id":1}}]}`,
		`{"requirements":[{"type":"assert-create"}]}`, `[]`, `null`, `{"updates":[null]}`)
}

func FuzzCreateTable(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/demo/namespaces/ns/tables",
		`{"name":"u","schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"long","required":false}]}}`,
		`{"name":"v","stage-create":true,"schema":{"type":"struct","fields":[{"id":1,"name":"x","type":"decimal(9,2)","required":true}]},"partition-spec":{"fields":[{"source-id":1,"field-id":1000,"name":"b","transform":"bucket[4]"}]}}`,
		`{"name":"w","schema":{"type":"struct","fields":[]},"write-order":{"order-id":1,"fields":[{"source-id":9,"transform":"identity","direction":"asc","null-order":"nulls-first"}]}}`,
		`{"name":"x","location":"s3://b/p","schema":{"type":"struct","fields":[]},"properties":{"format-version":"9"}}`)
}

func FuzzNamespaceRequests(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/demo/namespaces",
		`{"namespace":["a"],"properties":{"k":"v"}}`, `{"namespace":["a","b","c"]}`, `{"namespace":[""]}`, `{"namespace":null}`)
}

func FuzzTransaction(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/demo/transactions/commit",
		`{"table-changes":[{"identifier":{"namespace":["ns"],"name":"t"},"requirements":[],"updates":[{"action":"set-properties","updates":{"a":"b"}}]}]}`,
		`{"table-changes":[{"identifier":{"namespace":[],"name":""}}]}`)
}

func FuzzNamespacePath(f *testing.F) {
	for _, s := range []string{"ns", "ns%1Fchild", "%00", "..", "a%2Fb", "%1F%1F"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ns string) {
		s := fuzzServer(t)
		if strings.ContainsAny(ns, "/?#") {
			return // not a path segment
		}
		req := httptest.NewRequest("GET", "/v1/demo/namespaces/x", nil)
		req.URL.RawPath = "/v1/demo/namespaces/" + ns
		req.URL.Path = "/v1/demo/namespaces/" + ns
		req.Header.Set("Authorization", "Bearer "+s.Info.AdminToken)
		rec := httptest.NewRecorder()
		s.Handler.ServeHTTP(rec, req)
		checkAnswer(t, rec, ns)
	})
}
