package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/icehold/icehold/shared/localserver"
	"github.com/icehold/icehold/shared/store"
)

// Every function has sample events, each fits its handler's input, and
// `icehold invoke` runs the handler on it against a local server.
func TestSampleEventsInvokeEveryFunction(t *testing.T) {
	ctx := context.Background()
	srv, err := localserver.Start(ctx, localserver.Options{Dir: t.TempDir()})
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
			})
		}
	}

	// The drop sample purges a table that exists.
	raw, _ := os.ReadFile("../../events/api/02-create-namespace.json")
	if _, err := functions["api"](ctx, env, raw); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile("../../events/api/04-create-table.json")
	if _, err := functions["api"](ctx, env, raw); err != nil {
		t.Fatal(err)
	}
	raw, _ = os.ReadFile("../../events/drop/drop-with-purge.json")
	out, err := functions["drop"](ctx, env, raw)
	if err != nil {
		t.Fatal(err)
	}
	if res := out.(events.APIGatewayProxyResponse); res.StatusCode != 204 {
		t.Fatalf("drop with purge: %d %s", res.StatusCode, res.Body)
	}
	jobs, _, err := srv.Catalog.Store().ListJobs(ctx, "demo", "", 10)
	if err != nil || len(jobs) != 1 || jobs[0].Table != "orders" || store.Terminal(jobs[0].State) && jobs[0].State != store.JobSucceeded {
		t.Errorf("drop sample made jobs %+v (%v)", jobs, err)
	}
}
