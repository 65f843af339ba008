package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
)

// edge serves every AWS service of the local server on one port, routed by
// the service a request is signed for, as LocalStack's port 4566 does: one
// --endpoint-url (or AWS_ENDPOINT_URL) reaches them all. Keys are SigV4
// service names (s3, dynamodb, sqs, states, events).
type edge map[string]http.Handler

// forward sends a service's requests on to an external endpoint (moto,
// LocalStack), Host kept so that a signature stays valid there.
func forward(target string) (http.Handler, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	base := p.Director
	p.Director = func(r *http.Request) {
		host := r.Host
		base(r)
		r.Host = host
	}
	p.FlushInterval = -1 // SQS long polls and S3 bodies pass as they come
	return p, nil
}

func (e edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	svc := signingService(r)
	if h, ok := e[svc]; ok {
		h.ServeHTTP(w, r)
		return
	}
	served := make([]string, 0, len(e))
	for k := range e {
		served = append(served, k)
	}
	slices.Sort(served)
	msg := fmt.Sprintf("icehold local serves %s on this port; %q is not one of them", strings.Join(served, ", "), svc)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", "UnknownService")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "UnknownService", "message": msg})
}

// targetPrefixes name the service of an unsigned request of an AWS JSON
// protocol by its X-Amz-Target.
var targetPrefixes = map[string]string{
	"DynamoDB_": "dynamodb", "AmazonSQS.": "sqs", "AWSStepFunctions.": "states", "AWSEvents.": "events",
}

// signingService is the SigV4 service a request is signed for: the
// credential scope of its Authorization header or presigned query
// (KEY/DATE/REGION/SERVICE/aws4_request); unsigned, its X-Amz-Target's
// service, else s3 (an anonymous GET of an object).
func signingService(r *http.Request) string {
	cred := r.URL.Query().Get("X-Amz-Credential")
	if a := r.Header.Get("Authorization"); a != "" {
		_, after, ok := strings.Cut(a, "Credential=")
		if ok {
			cred, _, _ = strings.Cut(after, ",")
		}
	}
	if parts := strings.Split(strings.TrimSpace(cred), "/"); len(parts) == 5 {
		return parts[3]
	}
	target := r.Header.Get("X-Amz-Target")
	for prefix, svc := range targetPrefixes {
		if strings.HasPrefix(target, prefix) {
			return svc
		}
	}
	return "s3"
}
