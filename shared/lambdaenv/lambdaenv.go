// Package lambdaenv reads a function's configuration from its environment and
// builds the adapters it needs: the composition shared by every Lambda main.
package lambdaenv

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/store"
)

// Environment variables of the functions (set by the CDK stack).
const (
	EnvTable          = "ICEHOLD_TABLE"           // DynamoDB table name
	EnvAdmins         = "ICEHOLD_ADMINS"          // comma-separated principal patterns
	EnvDefaultCatalog = "ICEHOLD_DEFAULT_CATALOG" // /v1/config without warehouse
	EnvClientDefaults = "ICEHOLD_CLIENT_DEFAULTS" // k=v,k=v handed to clients
	// Local endpoints (make invoke, LocalStack); unset in AWS.
	EnvDynamoDBEndpoint = "ICEHOLD_DYNAMODB_ENDPOINT"
	EnvS3Endpoint       = "ICEHOLD_S3_ENDPOINT"
)

// Env is a function's configuration.
type Env struct {
	Table, DefaultCatalog string
	Admins                []string
	ClientDefaults        map[string]string
	Endpoints             awsconfig.Endpoints
}

// FromEnv reads the configuration; the table name is required.
func FromEnv() (Env, error) {
	e := Env{
		Table:          os.Getenv(EnvTable),
		DefaultCatalog: os.Getenv(EnvDefaultCatalog),
		Admins:         splitList(os.Getenv(EnvAdmins)),
		ClientDefaults: map[string]string{},
		Endpoints: awsconfig.Endpoints{
			DynamoDB: os.Getenv(EnvDynamoDBEndpoint),
			S3:       os.Getenv(EnvS3Endpoint),
		},
	}
	if e.Table == "" {
		return e, fmt.Errorf("%s is not set", EnvTable)
	}
	for _, kv := range splitList(os.Getenv(EnvClientDefaults)) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return e, fmt.Errorf("%s: %q is not k=v", EnvClientDefaults, kv)
		}
		e.ClientDefaults[k] = v
	}
	return e, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// RouterConfig builds the router's dependencies from the environment; the
// caller is the IAM principal API Gateway authenticated.
func RouterConfig(ctx context.Context, e Env) (router.Config, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return router.Config{}, err
	}
	st := store.New(awsconfig.DynamoDB(cfg, e.Endpoints), e.Table)
	return router.Config{
		Catalog:        catalog.New(st, objects.New(awsconfig.S3(cfg, e.Endpoints))),
		Authz:          authz.New(st, e.Admins),
		Authenticate:   apigw.Principal,
		ClientDefaults: e.ClientDefaults,
		DefaultCatalog: e.DefaultCatalog,
	}, nil
}
