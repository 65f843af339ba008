package awstest

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// SerialDynamoDB is a pass-through proxy to an AWS endpoint that lets one
// DynamoDB request at a time through; every other service's requests pass
// concurrently.
//
// Why: moto 5.2's DynamoDB is not isolated under concurrent requests (its
// server is threaded, its backend takes no lock). TransactWriteItems checks
// every condition, then writes, and on a cancellation restores a copy of the
// whole table taken at its start, so two racing transactions can both pass
// their conditions, and a cancelled one can erase writes made meanwhile by
// others. DynamoDB documents transactions as serializable against every
// other write (docs/design.md, "Fidelity: moto and the AWS CLI"). Letting
// one request at a time reach moto's DynamoDB restores that guarantee, so a
// lost race in the store's contract tests is icehold's bug, never moto's.
func SerialDynamoDB(target *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(target)
	// Long polls (SQS WaitTimeSeconds) and large S3 bodies pass as they come.
	proxy.FlushInterval = -1
	// A fresh connection per request: moto's threaded development server
	// closes kept-alive connections under load while a response body is
	// still being read (the body then ends early: "unexpected EOF").
	proxy.Transport = &http.Transport{Proxy: nil, DisableKeepAlives: true}
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_") {
			mu.Lock()
			defer mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	})
}
