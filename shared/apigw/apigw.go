// Package apigw adapts API Gateway's Lambda proxy events to an
// http.Handler, so Lambda runs the same router as the local server. Both
// front doors are served: a REST API's proxy event (payload format 1.0) and
// an HTTP API's (payload format 2.0); Serve tells them apart by the event's
// "version" field and answers in the shape that API reads.
package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

type principalKey struct{}

// Principal is the IAM caller that API Gateway authenticated (SigV4), as
// Handler attached it to the request.
func Principal(r *http.Request) string {
	p, _ := r.Context().Value(principalKey{}).(string)
	return p
}

// Request turns a REST API proxy event into an http.Request.
func Request(ctx context.Context, ev events.APIGatewayProxyRequest) (*http.Request, error) {
	u := &url.URL{Path: ev.Path}
	if strings.Contains(ev.Path, "%") {
		p, err := url.PathUnescape(ev.Path)
		if err != nil {
			return nil, fmt.Errorf("path %q: %w", ev.Path, err)
		}
		u.Path, u.RawPath = p, ev.Path
	}
	q := url.Values{}
	for k, vs := range ev.MultiValueQueryStringParameters {
		q[k] = vs
	}
	for k, v := range ev.QueryStringParameters {
		if _, ok := q[k]; !ok {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	body, err := decodeBody(ev.Body, ev.IsBase64Encoded)
	if err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, principalKey{}, ev.RequestContext.Identity.UserArn)
	r, err := http.NewRequestWithContext(ctx, ev.HTTPMethod, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range ev.MultiValueHeaders {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	for k, v := range ev.Headers {
		if r.Header.Get(k) == "" {
			r.Header.Set(k, v)
		}
	}
	return r, nil
}

// RequestV2 turns an HTTP API proxy event (payload format 2.0) into an
// http.Request. The HTTP API hands over rawPath already percent-decoded
// (docs/design/infra.md, The API's edge), so it is the request's path as
// is: decoding it again would turn a name's literal "%41" into "A". Its
// rawQueryString stays encoded. The caller is the IAM identity the
// route's IAM authorization verified (requestContext.authorizer.iam).
func RequestV2(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	if !strings.HasPrefix(ev.RawPath, "/") {
		return nil, fmt.Errorf("path %q: not absolute", ev.RawPath)
	}
	u := &url.URL{Path: ev.RawPath, RawQuery: ev.RawQueryString}
	body, err := decodeBody(ev.Body, ev.IsBase64Encoded)
	if err != nil {
		return nil, err
	}
	principal := ""
	if a := ev.RequestContext.Authorizer; a != nil && a.IAM != nil {
		principal = a.IAM.UserARN
	}
	ctx = context.WithValue(ctx, principalKey{}, principal)
	r, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	// Repeated headers arrive joined with commas, as HTTP allows; cookies
	// arrive apart.
	for k, v := range ev.Headers {
		r.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	return r, nil
}

func decodeBody(body string, b64 bool) ([]byte, error) {
	if !b64 {
		return []byte(body), nil
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	return b, nil
}

// badEvent is the ErrorModel answer to an event that is no request.
func badEvent(err error) (int, map[string]string, string) {
	return http.StatusBadRequest, map[string]string{"Content-Type": "application/json"},
		fmt.Sprintf(`{"error":{"message":%q,"type":"BadRequestException","code":400}}`, err.Error())
}

// serve runs h on r; the body is base64 when the answer is compressed
// (binary).
func serve(h http.Handler, r *http.Request) (rec *httptest.ResponseRecorder, body string, b64 bool) {
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Header().Get("Content-Encoding") != "" {
		return rec, base64.StdEncoding.EncodeToString(rec.Body.Bytes()), true
	}
	return rec, rec.Body.String(), false
}

// Handler returns the Lambda handler serving h behind a REST API.
func Handler(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		r, err := Request(ctx, ev)
		if err != nil {
			code, hdr, body := badEvent(err)
			return events.APIGatewayProxyResponse{StatusCode: code, Headers: hdr, Body: body}, nil
		}
		rec, body, b64 := serve(h, r)
		res := events.APIGatewayProxyResponse{StatusCode: rec.Code, MultiValueHeaders: map[string][]string{}, Body: body, IsBase64Encoded: b64}
		for k, vs := range rec.Header() {
			res.MultiValueHeaders[k] = vs
		}
		return res, nil
	}
}

// HandlerV2 returns the Lambda handler serving h behind an HTTP API
// (payload format 2.0, which has no multi-value headers: repeated
// headers are joined with commas, Set-Cookie goes to cookies).
func HandlerV2(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		r, err := RequestV2(ctx, ev)
		if err != nil {
			code, hdr, body := badEvent(err)
			return events.APIGatewayV2HTTPResponse{StatusCode: code, Headers: hdr, Body: body}, nil
		}
		rec, body, b64 := serve(h, r)
		res := events.APIGatewayV2HTTPResponse{StatusCode: rec.Code, Headers: map[string]string{}, Body: body, IsBase64Encoded: b64}
		for k, vs := range rec.Header() {
			if k == "Set-Cookie" {
				res.Cookies = append(res.Cookies, vs...)
				continue
			}
			res.Headers[k] = strings.Join(vs, ", ")
		}
		return res, nil
	}
}

// Serve returns the Lambda handler serving h behind either front door:
// an event whose "version" is "2.0" is an HTTP API's (HandlerV2), any
// other a REST API's (Handler).
func Serve(h http.Handler) func(context.Context, json.RawMessage) (any, error) {
	rest, v2 := Handler(h), HandlerV2(h)
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		var probe struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("not an API Gateway proxy event: %w", err)
		}
		if probe.Version == "2.0" {
			var ev events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("not an HTTP API proxy event: %w", err)
			}
			return v2(ctx, ev)
		}
		var ev events.APIGatewayProxyRequest
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("not an API Gateway proxy event: %w", err)
		}
		return rest(ctx, ev)
	}
}
