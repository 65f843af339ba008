package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// call sends one raw request to the suite's endpoint and returns status and body.
func call(t testing.TB, method, path, token string, body any, headers ...string) (int, []byte) {
	t.Helper()
	status, _, out := callHeaders(t, method, path, token, body, headers...)
	return status, out
}

// callHeaders is call that also returns the answer's headers.
func callHeaders(t testing.TB, method, path, token string, body any, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, shared.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	} else if shared.Local == nil && token == shared.Token {
		signV4(t, req) // against AWS: API Gateway's IAM auth
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, out
}

// mustCall is call that fails the test unless the status is want.
func mustCall(t testing.TB, want int, method, path, token string, body any) []byte {
	t.Helper()
	status, out := call(t, method, path, token, body)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, out)
	}
	return out
}

// errorModel decodes an Iceberg ErrorModel answer.
func errorModel(t testing.TB, body []byte) (typ string, code int, msg string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Type == "" {
		t.Fatalf("answer is not an ErrorModel: %s", body)
	}
	return e.Error.Type, e.Error.Code, e.Error.Message
}

func mustDecode(t testing.TB, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// signV4 signs a request for API Gateway (execute-api) with the default
// credential chain, as iceberg-go's rest.WithSigV4 does.
func signV4(t testing.TB, req *http.Request) {
	t.Helper()
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	if req.GetBody != nil {
		rc, _ := req.GetBody()
		body, _ = io.ReadAll(rc)
	}
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "execute-api", cfg.Region, time.Now()); err != nil {
		t.Fatal(err)
	}
}
