package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/router"
)

// normalize hides what legitimately differs between two fresh servers:
// uuids, clocks, ports.
var volatile = []struct {
	re  *regexp.Regexp
	out string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`"(last-updated-ms|timestamp-ms)":\d+`), `"$1":0`},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
	// Each answer hands the client a fresh session of the engine identity.
	{regexp.MustCompile(`"(s3\.access-key-id|s3\.secret-access-key|s3\.session-token)":"[^"]*"`), `"$1":"<key>"`},
}

func normalize(b []byte) string {
	for _, v := range volatile {
		b = v.re.ReplaceAll(b, []byte(v.out))
	}
	return string(b)
}

func gunzipIf(t *testing.T, encoding string, b []byte) []byte {
	t.Helper()
	if encoding != "gzip" {
		return b
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sample is a proxy event of either front door: a REST API's, or an HTTP
// API's (payload format 2.0).
type sample struct {
	raw []byte
	req *http.Request // as the function reads it
}

func readSample(t *testing.T, raw []byte) sample {
	t.Helper()
	var probe struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(raw, &probe)
	var r *http.Request
	var err error
	if probe.Version == "2.0" {
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("sample is not an HTTP API proxy event: %v", err)
		}
		r, err = apigw.RequestV2(context.Background(), ev)
	} else {
		var ev events.APIGatewayProxyRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("sample is not an API Gateway proxy event: %v", err)
		}
		r, err = apigw.Request(context.Background(), ev)
	}
	if err != nil {
		t.Fatal(err)
	}
	return sample{raw, r}
}

// httpRequest replays a proxy event as a plain HTTP request with a bearer
// token for the event's principal.
func httpRequest(t *testing.T, base, token string, s sample) *http.Request {
	t.Helper()
	req, err := http.NewRequest(s.req.Method, base+s.req.URL.RequestURI(), s.req.Body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = s.req.Header.Clone()
	if apigw.Principal(s.req) != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// answer is a function's answer in either front door's shape.
type answer struct {
	StatusCode        int                 `json:"statusCode"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded"`
}

func (a answer) header(k string) string {
	if v := a.MultiValueHeaders[k]; len(v) > 0 {
		return v[0]
	}
	return a.Headers[k]
}

// expected is what each sample in events/api/ must answer, on the Lambda path
// and on the HTTP path alike, when the samples run in file-name order on a
// fresh server (make invoke runs them the same way against make run). A
// sample without an entry here, or an entry without its sample, fails the
// test. replayed: the answer carries Idempotent-Replayed: true.
var expected = map[string]struct {
	status   int
	replayed bool
}{
	"01-config.json":           {status: 200},
	"02-create-namespace.json": {status: 200},
	"03-list-namespaces.json":  {status: 200},
	"04-create-table.json":     {status: 200},
	"05-load-table-gzip.json":  {status: 200},
	"06-commit-table.json":     {status: 200},
	"07-commit-replayed.json":  {status: 200, replayed: true},
	"08-list-tables.json":      {status: 200},
	"09-rename-table.json":     {status: 204},
	"10-table-exists.json":     {status: 204},
	"11-drop-table.json":       {status: 204},
	"12-malformed-body.json":   {status: 400},
	"13-unauthenticated.json":  {status: 401},
	"14-grant.json":            {status: 200},
	// Through an HTTP API: the IAM identity of its authorizer context.
	"15-list-namespaces-http-api.json": {status: 200},
}

// The sample events go through the Lambda handler and give the same answers
// as the same requests sent to the HTTP server, and each answers the status
// it is there to show (expected): both paths being wrong alike fails too.
func TestSampleEventsMatchHTTPServer(t *testing.T) {
	ctx := context.Background()
	lambdaSide, err := server.Start(ctx, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lambdaSide.Close()
	httpSide, err := server.Start(ctx, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer httpSide.Close()

	cfg := lambdaSide.RouterConfig
	cfg.Authenticate = apigw.Principal // as functions/api wires it
	handler := apigw.Serve(router.New(cfg))

	files, _ := filepath.Glob("../../events/api/*.json")
	sort.Strings(files)
	if len(files) < 10 {
		t.Fatalf("found %d sample events", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		seen[filepath.Base(f)] = true
	}
	for name := range expected {
		if !seen[name] {
			t.Errorf("expected lists %s, but events/api/ has no such sample", name)
		}
	}
	var token string
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, ok := expected[filepath.Base(f)]
			if !ok {
				t.Errorf("events/api/%s has no expected status in this test: add it to expected", filepath.Base(f))
			}
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ev := readSample(t, raw)
			if principal := apigw.Principal(ev.req); token == "" && principal != "" {
				if token, err = httpSide.AddToken(principal); err != nil {
					t.Fatal(err)
				}
			}

			out, err := handler(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			var res answer
			b, _ := json.Marshal(out)
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			lBody := []byte(res.Body)
			if res.IsBase64Encoded {
				if lBody, err = base64.StdEncoding.DecodeString(res.Body); err != nil {
					t.Fatal(err)
				}
			}
			lEnc := res.header("Content-Encoding")
			lBody = gunzipIf(t, lEnc, lBody)

			hres, err := http.DefaultTransport.RoundTrip(httpRequest(t, httpSide.Info.RESTURL, token, ev))
			if err != nil {
				t.Fatal(err)
			}
			defer hres.Body.Close()
			hBody, _ := io.ReadAll(hres.Body)
			hBody = gunzipIf(t, hres.Header.Get("Content-Encoding"), hBody)

			lReplayed := res.header("Idempotent-Replayed") == "true"
			hReplayed := hres.Header.Get("Idempotent-Replayed") == "true"
			if ok {
				for _, side := range []struct {
					name     string
					status   int
					replayed bool
					body     []byte
				}{{"lambda", res.StatusCode, lReplayed, lBody}, {"http", hres.StatusCode, hReplayed, hBody}} {
					if side.status != want.status {
						t.Errorf("%s: status %d, want %d\n%s", side.name, side.status, want.status, side.body)
					}
					if side.replayed != want.replayed {
						t.Errorf("%s: Idempotent-Replayed %v, want %v", side.name, side.replayed, want.replayed)
					}
				}
			}
			if res.StatusCode != hres.StatusCode {
				t.Fatalf("status: lambda %d, http %d\nlambda: %s\nhttp: %s", res.StatusCode, hres.StatusCode, lBody, hBody)
			}
			if lEnc != hres.Header.Get("Content-Encoding") {
				t.Errorf("content encoding: lambda %q, http %q", lEnc, hres.Header.Get("Content-Encoding"))
			}
			if normalize(lBody) != normalize(hBody) {
				t.Errorf("bodies differ\nlambda: %s\nhttp:   %s", lBody, hBody)
			}
			t.Logf("%s %s -> %d", ev.req.Method, ev.req.URL.Path, res.StatusCode)
		})
	}
}
