// Package apigw adapts API Gateway (REST API, proxy integration) events to an
// http.Handler, so Lambda runs the same router as the local server.
package apigw

import (
	"bytes"
	"context"
	"encoding/base64"
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

// Request turns a proxy event into an http.Request.
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
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		body = b
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

// Handler returns the Lambda handler serving h.
func Handler(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		r, err := Request(ctx, ev)
		if err != nil {
			return events.APIGatewayProxyResponse{
				StatusCode: http.StatusBadRequest,
				Headers:    map[string]string{"Content-Type": "application/json"},
				Body:       fmt.Sprintf(`{"error":{"message":%q,"type":"BadRequestException","code":400}}`, err.Error()),
			}, nil
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		res := events.APIGatewayProxyResponse{StatusCode: rec.Code, MultiValueHeaders: map[string][]string{}}
		for k, vs := range rec.Header() {
			res.MultiValueHeaders[k] = vs
		}
		// Compressed (binary) answers travel base64-encoded.
		if rec.Header().Get("Content-Encoding") != "" {
			res.Body, res.IsBase64Encoded = base64.StdEncoding.EncodeToString(rec.Body.Bytes()), true
		} else {
			res.Body = rec.Body.String()
		}
		return res, nil
	}
}
