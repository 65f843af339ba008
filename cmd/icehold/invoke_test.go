package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/store"
)

// Every function has sample events, each fits its handler's input, and
// `icehold invoke` runs the handler on it against a local server.
func TestSampleEventsInvokeEveryFunction(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	env := srv.Info.FunctionEnv()

	fns, _ := filepath.Glob("../../functions/*")
	for _, dir := range fns {
		fn := filepath.Base(dir)
		if _, ok := functions[fn]; !ok {
			t.Errorf("functions/%s has no runner in icehold invoke", fn)
			continue
		}
		samples, _ := filepath.Glob(filepath.Join("../../events", fn, "*.json"))
		if len(samples) == 0 {
			t.Errorf("functions/%s has no sample event in events/%s", fn, fn)
		}
		for _, sample := range samples {
			t.Run(fn+"/"+filepath.Base(sample), func(t *testing.T) {
				raw, err := os.ReadFile(sample)
				if err != nil {
					t.Fatal(err)
				}
				out, err := functions[fn](ctx, env, raw)
				if err != nil && strings.Contains(err.Error(), "does not fit") {
					t.Fatalf("sample does not fit the handler: %v", err)
				}
				if res, ok := out.(events.APIGatewayProxyResponse); ok && res.StatusCode >= 500 {
					t.Errorf("%s answered %d: %s", fn, res.StatusCode, res.Body)
				}
				if res, ok := out.(events.APIGatewayV2HTTPResponse); ok && res.StatusCode >= 500 {
					t.Errorf("%s answered %d: %s", fn, res.StatusCode, res.Body)
				}
			})
		}
	}
}

// What make invoke-all does: on a fresh server, icehold invoke seed, then
// every sample in file order through icehold invoke; each runs as its name
// says (only the malformed and unauthenticated api samples are refused),
// though earlier samples renamed and dropped the api samples' table.
func TestSamplesRunInFileOrder(t *testing.T) {
	samples, _ := filepath.Glob("../../events/*/*.json")
	for i := range samples {
		samples[i], _ = filepath.Abs(samples[i])
	}
	if len(samples) == 0 {
		t.Fatal("no samples")
	}
	isolate(t)
	ctx := context.Background()
	dir := t.TempDir()
	// make run's reconcile runs each minute: the samples run before it.
	srv, err := server.Start(ctx, server.Options{Dir: dir, ReconcileEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if out, _, err := cli("invoke", "seed", "--dir", dir); err != nil || !strings.Contains(out, "pj-0019dd1c7a2b0-5f1e2d3c4b") {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	refused := map[string]int{"api/12-malformed-body.json": 400, "api/13-unauthenticated.json": 401}
	for _, sample := range samples {
		name := filepath.Base(filepath.Dir(sample)) + "/" + filepath.Base(sample)
		out, _, err := cli("invoke", filepath.Base(filepath.Dir(sample)), sample, "--dir", dir)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		var res struct {
			StatusCode int               `json:"statusCode"`
			Body       string            `json:"body"`
			Failures   []json.RawMessage `json:"batchItemFailures"`
			Enqueued   *int              `json:"enqueued"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Errorf("%s printed %q: %v", name, out, err)
			continue
		}
		want := refused[name]
		switch {
		case want != 0 && res.StatusCode != want:
			t.Errorf("%s answered %d, want %d", name, res.StatusCode, want)
		case want == 0 && res.StatusCode >= 400:
			t.Errorf("%s answered %d: %s", name, res.StatusCode, res.Body)
		case len(res.Failures) > 0:
			t.Errorf("%s: the delete step failed its message: %s", name, out)
		case res.Enqueued != nil && *res.Enqueued < 0:
			t.Errorf("%s: enqueued %d", name, *res.Enqueued)
		}
	}
	st := srv.Catalog.Store()
	for id, want := range map[string]string{
		"pj-0019dd1c7a2b3-5f1e2d3c4b": store.JobFailed,    // finalize-failed
		"pj-0019dd1c7a2b2-5f1e2d3c4b": store.JobSucceeded, // finalize
	} {
		if j, err := st.GetJob(ctx, "demo", id); err != nil || j.State != want {
			t.Errorf("job %s: %s (%v), want %s", id, j.State, err, want)
		}
	}
	if j, err := st.GetJob(ctx, "demo", "pj-0019dd1c7a2b0-5f1e2d3c4b"); err != nil || !j.Planned {
		t.Errorf("the purge-plan samples did not plan their job: %+v (%v)", j, err)
	}
	jobs, _, err := st.ListJobs(ctx, "demo", "", 20)
	var dropped []string
	for _, j := range jobs {
		if j.Table == "orders" {
			dropped = append(dropped, fmt.Sprint(j.Namespace))
		}
	}
	if err != nil || len(dropped) != 1 || dropped[0] != "[samples]" {
		t.Errorf("the drop sample's purge jobs: %v (%v), want one of samples.orders", dropped, err)
	}
	// Seeding again makes only what the samples used up (the purged table).
	if out, _, err := cli("invoke", "seed", "--dir", dir); err != nil || out != "table samples.orders\n" {
		t.Errorf("second seed: %v %q", err, out)
	}
}
