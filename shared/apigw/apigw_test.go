package apigw

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// echo answers what the router would read of a request: its method, path
// (decoded), query, principal, a header and the body.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Add("Vary", "Accept-Encoding")
	w.Header().Add("Vary", "Authorization")
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery, "ns": r.URL.Query().Get("ns"),
		"principal": Principal(r), "ifNoneMatch": r.Header.Get("If-None-Match"), "body": string(body),
	})
})

func decode(t *testing.T, body string) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return m
}

// An HTTP API event (payload format 2.0) reaches the router as the same
// request a REST API event does: the IAM identity its route's IAM
// authorization verified is the principal, its already-decoded path is the
// path (a multi-level namespace's unit separator, a literal '%' and '?' in
// a name stay in the path), its query and headers are the request's.
func TestHTTPAPIEventReachesTheRouterAsRESTDoes(t *testing.T) {
	const caller = "arn:aws:iam::123456789012:role/team/etl"
	v2 := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: "/v1/demo/namespaces/a\x1fb/tables/50%?x", RawQueryString: "ns=a%1Fb&snapshots=refs",
		Headers: map[string]string{"if-none-match": `"abc"`, "content-type": "application/json"},
		Body:    base64.StdEncoding.EncodeToString([]byte(`{"k":"v"}`)), IsBase64Encoded: true,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: caller}},
		},
	}
	rest := events.APIGatewayProxyRequest{
		HTTPMethod: "POST", Path: "/v1/demo/namespaces/a%1Fb/tables/50%25%3Fx",
		MultiValueQueryStringParameters: map[string][]string{"ns": {"a\x1fb"}, "snapshots": {"refs"}},
		Headers:                         map[string]string{"If-None-Match": `"abc"`, "Content-Type": "application/json"},
		Body:                            `{"k":"v"}`,
		RequestContext:                  events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{UserArn: caller}},
	}
	want := map[string]string{
		"method": "POST", "path": "/v1/demo/namespaces/a\x1fb/tables/50%?x", "query": "ns=a%1Fb&snapshots=refs", "ns": "a\x1fb",
		"principal": caller, "ifNoneMatch": `"abc"`, "body": `{"k":"v"}`,
	}
	res, err := HandlerV2(echo)(context.Background(), v2)
	if err != nil {
		t.Fatal(err)
	}
	restRes, err := Handler(echo)(context.Background(), rest)
	if err != nil {
		t.Fatal(err)
	}
	got, gotREST := decode(t, res.Body), decode(t, restRes.Body)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("HTTP API: %s = %q, want %q", k, got[k], w)
		}
		if k != "query" && gotREST[k] != w { // the REST API's query is re-encoded from its parameters
			t.Errorf("REST API: %s = %q, want %q", k, gotREST[k], w)
		}
	}
	// Payload format 2.0 has no multi-value headers: repeated ones are joined.
	if v := res.Headers["Vary"]; v != "Accept-Encoding, Authorization" {
		t.Errorf("Vary %q, want both values joined", v)
	}
}

// An HTTP API request without IAM authorization (no authorizer context)
// has no principal: the router answers it 401, never as someone.
func TestHTTPAPIEventWithoutIdentityHasNoPrincipal(t *testing.T) {
	res, err := HandlerV2(echo)(context.Background(), events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: "/v1/config",
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := decode(t, res.Body)["principal"]; p != "" {
		t.Errorf("principal %q, want none", p)
	}
}

// Serve answers each front door's event in its own shape: an HTTP API's
// (version 2.0) with single-value headers and cookies, a REST API's with
// multi-value headers; compressed answers travel base64 in both; a body
// that is not base64 as it claims is a 400 ErrorModel.
func TestServeAnswersEachFrontDoorInItsShape(t *testing.T) {
	gz := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "a", Value: "1"})
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write([]byte(`{"ok":true}`))
		_ = zw.Close()
	})
	serve := Serve(gz)
	ctx := context.Background()
	for _, c := range []struct {
		name, event string
		status      int
		shape       string // a field only that shape has
	}{
		{"HTTP API", `{"version":"2.0","rawPath":"/v1/config","requestContext":{"http":{"method":"GET"}}}`, 200, "cookies"},
		{"REST API", `{"path":"/v1/config","httpMethod":"GET"}`, 200, "multiValueHeaders"},
		{"REST API through an HTTP API's payload 1.0", `{"version":"1.0","path":"/v1/config","httpMethod":"GET"}`, 200, "multiValueHeaders"},
		{"HTTP API, bad base64", `{"version":"2.0","rawPath":"/v1/config","body":"%%%","isBase64Encoded":true,"requestContext":{"http":{"method":"POST"}}}`, 400, ""},
		{"REST API, bad base64", `{"path":"/v1/config","httpMethod":"POST","body":"%%%","isBase64Encoded":true}`, 400, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := serve(ctx, json.RawMessage(c.event))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(out)
			var res map[string]any
			_ = json.Unmarshal(raw, &res)
			if res["statusCode"] != float64(c.status) {
				t.Fatalf("answer %s, want status %d", raw, c.status)
			}
			if c.status != 200 {
				if !bytes.Contains(raw, []byte(`BadRequestException`)) {
					t.Errorf("answer %s, want a 400 ErrorModel", raw)
				}
				return
			}
			if v, ok := res[c.shape]; !ok || v == nil {
				t.Errorf("answer %s has no %s", raw, c.shape)
			}
			if res["isBase64Encoded"] != true {
				t.Fatalf("gzip answer not base64: %s", raw)
			}
			b, _ := base64.StdEncoding.DecodeString(res["body"].(string))
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if plain, _ := io.ReadAll(zr); string(plain) != `{"ok":true}` {
				t.Errorf("body %q", plain)
			}
		})
	}
	if _, err := serve(ctx, json.RawMessage(`[1]`)); err == nil {
		t.Error("a non-object event was served")
	}
}
