package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/localserver"
	"github.com/icehold/icehold/shared/router"
)

// functions maps a function name (functions/<name>) to a runner of its
// handler on a raw event, built as its main builds it.
var functions = map[string]func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error){
	"api": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var ev events.APIGatewayProxyRequest
		if err := json.Unmarshal(event, &ev); err != nil {
			return nil, fmt.Errorf("not an API Gateway proxy event: %w", err)
		}
		cfg, err := lambdaenv.RouterConfig(ctx, env)
		if err != nil {
			return nil, err
		}
		return apigw.Handler(router.New(cfg))(ctx, ev)
	},
}

// runInvoke runs one function's handler on a sample event against the
// running local server's emulators (make run), as Lambda would against AWS.
func runInvoke(args []string) error {
	if len(args) < 2 {
		names := make([]string, 0, len(functions))
		for n := range functions {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("usage: icehold invoke FUNCTION EVENT.json [STATE_DIR]\nfunctions: %s", strings.Join(names, ", "))
	}
	fn, ok := functions[args[0]]
	if !ok {
		return fmt.Errorf("unknown function %q", args[0])
	}
	event, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	dir := ".icehold"
	if len(args) > 2 {
		dir = args[2]
	}
	raw, err := os.ReadFile(filepath.Join(dir, "local.json"))
	if err != nil {
		return fmt.Errorf("start the local server first (make run): %w", err)
	}
	var info localserver.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return err
	}
	env := lambdaenv.Env{
		Table: localserver.TableName, DefaultCatalog: info.Catalog,
		Admins: []string{localserver.AdminPrincipal, localserver.LocalAccountAdmins},
		ClientDefaults: map[string]string{"s3.endpoint": info.S3Endpoint, "s3.region": info.Region,
			"s3.access-key-id": info.AccessKey, "s3.secret-access-key": info.SecretKey, "s3.path-style-access": "true"},
		Endpoints: awsconfig.Endpoints{DynamoDB: info.DynamoDB, S3: info.S3Endpoint, Region: info.Region,
			AccessKey: info.AccessKey, SecretKey: info.SecretKey},
	}
	out, err := fn(context.Background(), env, event)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
