package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/lambdaenv"
)

// runtimeAPI is Lambda's Runtime API for one invocation: it hands event to
// the first /next and records when the process asked (its init done) and
// when it answered.
type runtimeAPI struct {
	event []byte
	mu    sync.Mutex
	next  time.Time // the first /next: init is over
	done  chan []byte
	sent  bool
}

func (r *runtimeAPI) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case strings.HasSuffix(req.URL.Path, "/invocation/next"):
		r.mu.Lock()
		if r.sent {
			r.mu.Unlock()
			<-req.Context().Done() // one invocation only: the next waits until the process ends
			return
		}
		r.sent, r.next = true, time.Now()
		r.mu.Unlock()
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "cold-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:api")
		_, _ = w.Write(r.event)
	case strings.HasSuffix(req.URL.Path, "/response"), strings.HasSuffix(req.URL.Path, "/error"):
		body, _ := io.ReadAll(req.Body)
		w.WriteHeader(http.StatusAccepted)
		if strings.HasSuffix(req.URL.Path, "/error") {
			body = append([]byte("error: "), body...)
		}
		r.done <- body
	}
}

// BenchmarkColdStart: the api function's cold start as Lambda runs it, a
// fresh process on the Runtime API: its binary's size, its init (start to
// its first ask for an event: configuration, SDK clients), and its first
// answer, a load-table (events/api/05-load-table-gzip.json) against a local
// server. It prints what init read from S3 (nothing, by design: every
// read belongs to a request).
func BenchmarkColdStart(b *testing.B) {
	e := start(b)
	e.call(b, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"sales"}})
	e.call(b, "POST", "/v1/demo/namespaces/sales/tables", map[string]any{"name": "orders",
		"schema": mustJSON(map[string]any{"type": "struct", "schema-id": 0, "fields": []any{}})})
	event, err := os.ReadFile("../events/api/05-load-table-gzip.json")
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "bootstrap")
	// The flags of make lambdas but -trimpath and CGO_ENABLED=0, which would
	// compile every dependency again (minutes) for a few KB of difference.
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "../functions/api")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var s3At []time.Time // when each S3 request arrived
	e.srv.S3Emulator.SetObserver(func(*http.Request) {
		mu.Lock()
		defer mu.Unlock()
		s3At = append(s3At, time.Now())
	})
	i := e.srv.Info
	const runs = 5
	var inits, answers []time.Duration
	s3Init, s3Total := 0, 0
	for range runs {
		api := &runtimeAPI{event: event, done: make(chan []byte, 1)}
		rt := httptest.NewServer(api)
		cmd := exec.Command(bin)
		cmd.Env = []string{
			"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(rt.URL, "http://"),
			"AWS_REGION=" + i.Region, "AWS_ACCESS_KEY_ID=" + i.AccessKey, "AWS_SECRET_ACCESS_KEY=" + i.SecretKey,
			lambdaenv.EnvTable + "=" + i.Table, lambdaenv.EnvAdmins + "=" + server.LocalAccountAdmins,
			lambdaenv.EnvDynamoDBEndpoint + "=" + i.DynamoDB, lambdaenv.EnvS3Endpoint + "=" + i.S3Endpoint,
		}
		cmd.Stderr = os.Stderr
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var answer []byte
		select {
		case answer = <-api.done:
		case <-time.After(time.Minute):
			b.Fatal("no answer from the api function in a minute")
		}
		tAnswer := time.Now()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		rt.Close()
		if !strings.Contains(string(answer), `"statusCode":200`) {
			b.Fatalf("first answer: %.300s", answer)
		}
		api.mu.Lock()
		inits = append(inits, api.next.Sub(t0))
		mu.Lock()
		for _, at := range s3At {
			if at.Before(api.next) {
				s3Init++
			}
		}
		s3Total += len(s3At)
		s3At = nil
		mu.Unlock()
		api.mu.Unlock()
		answers = append(answers, tAnswer.Sub(t0))
	}
	fmt.Printf("\n== cold start of the api function (a fresh process on Lambda's Runtime API, %d runs, this machine) ==\n", runs)
	fmt.Printf("binary (%s/%s; make lambdas builds arm64): %s\n", goEnv("GOOS"), goEnv("GOARCH"), mib(uint64(st.Size())))
	fmt.Printf("init (start to its first ask for an event) p50 %s, max %s\n", ms(percentile(inits, 0.5)), ms(percentile(inits, 1)))
	fmt.Printf("first answer (a load-table: catalog, table entry, metadata file) p50 %s, max %s from start\n", ms(percentile(answers, 0.5)), ms(percentile(answers, 1)))
	fmt.Printf("S3 requests during init: %d (of %d in all); Lambda adds its own sandbox start (not measured here)\n", s3Init, s3Total)
}

func goEnv(k string) string {
	out, err := exec.Command("go", "env", k).Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}
