package routerenv_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/lambdaenv/routerenv"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/store"
)

// The storage-sweep routes work through the Lambda path: a proxy event of
// POST …/storage-sweep, served by the router as the drop function builds
// it from its environment, starts a sweep job on the bucket's newest
// report (202); the catalog function, without the purge entry, answers
// 501. The purge functions built from the same environment plan and check
// jobs of kind sweep.
func TestStorageSweepRouteThroughTheLambdaPath(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := srv.WriteInventory(ctx); err != nil {
		t.Fatal(err)
	}
	env := srv.Info.FunctionEnv()
	path := "/lifecycle/v1/catalogs/" + srv.Info.Catalog + "/storage-sweep"
	ev := events.APIGatewayProxyRequest{
		Resource: "/{proxy+}", Path: path, HTTPMethod: "POST",
		Headers: map[string]string{"Content-Type": "application/json"},
		Body:    `{"dry-run":true}`,
		RequestContext: events.APIGatewayProxyRequestContext{AccountID: "000000000000", HTTPMethod: "POST",
			Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::000000000000:user/icehold-admin", AccountID: "000000000000"}},
	}
	raw, _ := json.Marshal(ev)
	for _, c := range []struct {
		fn        string
		withPurge bool
		want      int
	}{
		{"api", false, http.StatusNotImplemented},
		{"drop", true, http.StatusAccepted},
	} {
		t.Run(c.fn, func(t *testing.T) {
			cfg, err := routerenv.RouterConfig(ctx, env, c.withPurge)
			if err != nil {
				t.Fatal(err)
			}
			out, err := apigw.Serve(router.New(cfg))(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				StatusCode int    `json:"statusCode"`
				Body       string `json:"body"`
			}
			b, _ := json.Marshal(out)
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != c.want {
				t.Fatalf("POST %s: %d %s, want %d", path, res.StatusCode, res.Body, c.want)
			}
			if c.want != http.StatusAccepted {
				return
			}
			var j struct {
				Kind         string `json:"kind"`
				StorageSweep *struct {
					DryRun bool `json:"dry-run"`
				} `json:"storage-sweep"`
			}
			if err := json.Unmarshal([]byte(res.Body), &j); err != nil || j.StorageSweep == nil || !j.StorageSweep.DryRun {
				t.Errorf("answer is not a dry-run sweep job (%v): %s", err, res.Body)
			}
		})
	}

	svc, err := purgeenv.Purge(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if svc.Planners[store.KindSweep] == nil || svc.FileChecks[store.KindSweep] == nil {
		t.Errorf("the purge functions have no planner or batch check for jobs of kind %s", store.KindSweep)
	}
}
