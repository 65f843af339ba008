package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/lambdaenv"
)

// runtimeAPI is Lambda's Runtime API for one invocation: it records when
// the process first asked for an event (its init done), hands it event (or
// nothing, when event is nil: the process waits until it is killed) and
// takes its answer.
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
		if r.event == nil {
			<-req.Context().Done()
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "cold-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:cold")
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

// coldStart is one fresh process of bin on the Runtime API: how long its
// init took (start to its first ask for an event) and, when answer is set,
// how long until it answered event, and the answer.
func coldStart(b *testing.B, bin string, env []string, event []byte, answer bool) (init, answered time.Duration, out []byte) {
	api := &runtimeAPI{event: event, done: make(chan []byte, 1)}
	rt := httptest.NewServer(api)
	defer rt.Close()
	cmd := exec.Command(bin)
	cmd.Env = append([]string{"AWS_LAMBDA_RUNTIME_API=" + strings.TrimPrefix(rt.URL, "http://")}, env...)
	cmd.Stderr = os.Stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.After(time.Minute)
	for {
		api.mu.Lock()
		asked := api.next
		api.mu.Unlock()
		if !asked.IsZero() && !answer {
			return asked.Sub(t0), 0, nil
		}
		select {
		case out = <-api.done:
			api.mu.Lock()
			defer api.mu.Unlock()
			return api.next.Sub(t0), time.Since(t0), out
		case <-deadline:
			b.Fatalf("%s: no answer in a minute", filepath.Base(filepath.Dir(bin)))
		case <-time.After(time.Millisecond):
		}
	}
}

// BenchmarkColdStart: each function's cold start as Lambda runs it, built
// as make lambdas builds it (tools/lambdabuild: stripped, lean) for this
// machine, beside an empty Go Lambda built the same way in the same run:
// each binary's size and its init (a fresh process on Lambda's Runtime API,
// start to its first ask for an event: package inits, configuration, SDK
// clients), and the api function's first answer, a load-table
// (events/api/05-load-table-gzip.json) against a local server. Runs
// alternate between the binaries, so the machine's load weighs on each
// alike. It prints what init read from S3 (nothing, by design: every read
// belongs to a request).
func BenchmarkColdStart(b *testing.B) {
	e := start(b)
	e.call(b, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"sales"}})
	e.call(b, "POST", "/v1/demo/namespaces/sales/tables", map[string]any{"name": "orders",
		"schema": mustJSON(map[string]any{"type": "struct", "schema-id": 0, "fields": []any{}})})
	event, err := os.ReadFile("../events/api/05-load-table-gzip.json")
	if err != nil {
		b.Fatal(err)
	}
	fns, _ := filepath.Glob("../functions/*")
	pkgs := append(slices.Clone(fns), "./emptylambda")
	dist := b.TempDir()
	build := exec.Command("go", append([]string{"run", "../tools/lambdabuild", "-goos", goEnv("GOOS"), "-arch", goEnv("GOARCH"), "-o", dist}, pkgs...)...)
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	i := e.srv.Info
	env := []string{
		"AWS_REGION=" + i.Region, "AWS_ACCESS_KEY_ID=" + i.AccessKey, "AWS_SECRET_ACCESS_KEY=" + i.SecretKey,
		lambdaenv.EnvTable + "=" + i.Table, lambdaenv.EnvAdmins + "=" + server.LocalAccountAdmins,
		lambdaenv.EnvDynamoDBEndpoint + "=" + i.DynamoDB, lambdaenv.EnvS3Endpoint + "=" + i.S3Endpoint,
		lambdaenv.EnvSQSEndpoint + "=" + i.SQS, lambdaenv.EnvSFNEndpoint + "=" + i.StepFns,
		lambdaenv.EnvDeleteQueue + "=" + i.DeleteQueue, lambdaenv.EnvStateMachine + "=" + i.Machine,
	}
	var mu sync.Mutex
	var s3At []time.Time // when each S3 request arrived
	e.srv.S3Emulator.SetObserver(func(*http.Request) {
		mu.Lock()
		defer mu.Unlock()
		s3At = append(s3At, time.Now())
	})
	names := make([]string, len(pkgs))
	for k, p := range pkgs {
		names[k] = filepath.Base(p)
	}
	// 11 starts each: the p50 of fewer moves with the machine's load.
	const runs = 11
	inits := map[string][]time.Duration{}
	var answers []time.Duration
	s3Init, s3Total := 0, 0
	for range runs {
		for _, name := range names {
			bin := filepath.Join(dist, name, "bootstrap")
			if name != "api" {
				d, _, _ := coldStart(b, bin, env, nil, false)
				inits[name] = append(inits[name], d)
				continue
			}
			t0 := time.Now()
			d, answered, out := coldStart(b, bin, env, event, true)
			if !strings.Contains(string(out), `"statusCode":200`) {
				b.Fatalf("first answer: %.300s", out)
			}
			inits[name] = append(inits[name], d)
			answers = append(answers, answered)
			mu.Lock()
			for _, at := range s3At {
				if at.Before(t0.Add(d)) {
					s3Init++
				}
			}
			s3Total += len(s3At)
			s3At = nil
			mu.Unlock()
		}
	}
	size := func(name string) uint64 {
		st, err := os.Stat(filepath.Join(dist, name, "bootstrap"))
		if err != nil {
			b.Fatal(err)
		}
		return uint64(st.Size())
	}
	empty := percentile(inits["emptylambda"], 0.5)
	fmt.Printf("\n== cold start, each function built as make lambdas builds it (%s/%s here; make lambdas builds linux/arm64), %d runs each, alternating ==\n", goEnv("GOOS"), goEnv("GOARCH"), runs)
	fmt.Printf("%-16s %10s %12s %16s\n", "function", "binary", "init p50", "÷ empty's init")
	for _, name := range names {
		p50 := percentile(inits[name], 0.5)
		fmt.Printf("%-16s %10s %12s %16.1f\n", name, mib(size(name)), ms(p50), float64(p50)/float64(empty))
	}
	fmt.Printf("first answer of the api function (a load-table: catalog, table entry, metadata file) p50 %s, max %s from start\n", ms(percentile(answers, 0.5)), ms(percentile(answers, 1)))
	fmt.Printf("S3 requests during the api function's init: %d (of %d in all); Lambda adds its own sandbox start (not measured here)\n", s3Init, s3Total)

	ratio := float64(percentile(inits["api"], 0.5)) / float64(empty)
	apiSize := float64(size("api")) / (1 << 20)
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("target api binary ≤ half of %.1f MiB (%.2f MiB): %s (%.1f MiB; before: %.1f MiB as the bench built it, %.1f MiB stripped)\n",
		previous.apiBinaryMiB, previous.apiBinaryMiB/2, verdict(apiSize <= previous.apiBinaryMiB/2), apiSize, previous.apiBinaryMiB, previous.apiStrippedMiB)
	fmt.Printf("target api init ÷ empty's ≤ half of before's %.1f (%.1f): %s (%.1f; before: api %.0f ms, empty %.1f ms, commit %s)\n",
		previous.initRatio, previous.initRatio/2, verdict(ratio <= previous.initRatio/2), ratio, previous.apiInitMs, previous.emptyInitMs, previous.coldCommit)
}

func goEnv(k string) string {
	out, err := exec.Command("go", "env", k).Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}
