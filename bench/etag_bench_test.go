package bench

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLoadVsRevalidate: an engine's refresh of a table that has not
// changed, as a full load and as a revalidation (If-None-Match → 304 from
// the table entry alone): latency, DynamoDB requests and S3 GETs of each.
func BenchmarkLoadVsRevalidate(b *testing.B) {
	e := start(b)
	e.call(b, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"etag"}})
	e.call(b, "POST", "/v1/demo/namespaces/etag/tables", map[string]any{"name": "t", "schema": benchSchema})
	var gets atomic.Int64
	e.srv.S3Emulator.SetObserver(func(r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/etag/") {
			gets.Add(1)
		}
	})
	defer e.srv.S3Emulator.SetObserver(nil)
	get := func(tag string) (int, string) {
		req, _ := http.NewRequest("GET", e.srv.Info.RESTURL+"/v1/demo/namespaces/etag/tables/t", nil)
		req.Header.Set("Authorization", "Bearer "+e.srv.Info.AdminToken)
		if tag != "" {
			req.Header.Set("If-None-Match", tag)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode, res.Header.Get("ETag")
	}
	_, tag := get("")
	type result struct {
		lat           []time.Duration
		dynamo, s3get int64
	}
	measure := func(r *result, tag string, want int) {
		d0, g0 := e.srv.DynamoDB.Requests.Load(), gets.Load()
		t0 := time.Now()
		if status, _ := get(tag); status != want {
			b.Fatalf("status %d, want %d", status, want)
		}
		r.lat = append(r.lat, time.Since(t0))
		r.dynamo += e.srv.DynamoDB.Requests.Load() - d0
		r.s3get += gets.Load() - g0
	}
	var load, reval result
	const rounds = 200
	b.ResetTimer()
	for range b.N {
		for range rounds { // interleaved, so drift hits both alike
			measure(&load, "", http.StatusOK)
			measure(&reval, tag, http.StatusNotModified)
		}
	}
	b.StopTimer()
	n := int64(len(load.lat))
	fmt.Printf("\n== table refresh: load vs revalidation (If-None-Match) ==\n")
	fmt.Printf("%-14s %10s %10s %16s %12s\n", "", "p50", "p99", "DynamoDB req/op", "S3 GET/op")
	for _, row := range []struct {
		name string
		r    result
	}{{"load", load}, {"revalidation", reval}} {
		fmt.Printf("%-14s %10s %10s %16.2f %12.2f\n", row.name, ms(percentile(row.r.lat, 0.5)), ms(percentile(row.r.lat, 0.99)),
			float64(row.r.dynamo)/float64(n), float64(row.r.s3get)/float64(n))
	}
	b.ReportMetric(float64(reval.s3get)/float64(n), "reval-s3-gets/op")
}
