// Package lambdaenv reads a function's configuration from its environment and
// builds the adapters it needs: the composition shared by every Lambda main.
package lambdaenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/partitions"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/store"
)

// Environment variables of the functions (set by the CDK stack).
const (
	EnvTable          = "ICEHOLD_TABLE"           // DynamoDB table name
	EnvAdmins         = "ICEHOLD_ADMINS"          // comma-separated principal patterns
	EnvDefaultCatalog = "ICEHOLD_DEFAULT_CATALOG" // /v1/config without warehouse
	EnvClientDefaults = "ICEHOLD_CLIENT_DEFAULTS" // k=v,k=v handed to clients
	// EnvWarehouseBuckets: the buckets (comma-separated names) the roles
	// may use; a catalog elsewhere is refused at create. Unset: any.
	EnvWarehouseBuckets = "ICEHOLD_WAREHOUSE_BUCKETS"
	// Local endpoints (make invoke, LocalStack); unset in AWS.
	EnvDynamoDBEndpoint = "ICEHOLD_DYNAMODB_ENDPOINT"
	EnvS3Endpoint       = "ICEHOLD_S3_ENDPOINT"
	EnvSQSEndpoint      = "ICEHOLD_SQS_ENDPOINT"
	EnvSFNEndpoint      = "ICEHOLD_SFN_ENDPOINT"
	// The purge pipeline.
	EnvStateMachine = "ICEHOLD_STATE_MACHINE_ARN"
	EnvDeleteQueue  = "ICEHOLD_DELETE_QUEUE_URL"
	EnvVisibility   = "ICEHOLD_DELETE_VISIBILITY_SECONDS"
	EnvMaxReceives  = "ICEHOLD_DELETE_MAX_RECEIVES"
	EnvEventBus     = "ICEHOLD_EVENT_BUS" // EventBridge bus of the lifecycle events
	// EnvVendingRole: the role the api function assumes for vended
	// credentials ("" vends none).
	EnvVendingRole = "ICEHOLD_VENDING_ROLE_ARN"
	// EnvDeletePace: key deletions per second per S3 prefix, booked by all
	// delete invocations on a schedule shared through the table (unset:
	// purge.DefaultKeyRate; "off": each invocation paces only itself).
	EnvDeletePace = "ICEHOLD_DELETE_PACE"
)

// Env is a function's configuration.
type Env struct {
	Table, DefaultCatalog string
	Admins                []string
	ClientDefaults        map[string]string
	// WarehouseBuckets: where new catalogs' warehouses may lie (none: anywhere).
	WarehouseBuckets []string
	Endpoints        awsconfig.Endpoints
	StateMachineARN  string
	Queue            purge.QueueConfig
	EventBus         string
	// VendingRole is the ARN of the vending role ("": no vended credentials).
	VendingRole string
	// IOProps configure iceberg-go's FileIO (locally: S3 endpoint and keys).
	IOProps map[string]string
	// DeletePace: the per-prefix key deletion rate shared by the delete
	// invocations (keys/s); 0: no shared pacing (the local emulator has no
	// ceiling to share).
	DeletePace float64
}

// FromEnv reads the configuration; the table name is required.
func FromEnv() (Env, error) {
	e := Env{
		Table:            os.Getenv(EnvTable),
		DefaultCatalog:   os.Getenv(EnvDefaultCatalog),
		Admins:           splitList(os.Getenv(EnvAdmins)),
		WarehouseBuckets: splitList(os.Getenv(EnvWarehouseBuckets)),
		ClientDefaults:   map[string]string{},
		Endpoints: awsconfig.Endpoints{
			DynamoDB: os.Getenv(EnvDynamoDBEndpoint),
			S3:       os.Getenv(EnvS3Endpoint),
			SQS:      os.Getenv(EnvSQSEndpoint),
			SFN:      os.Getenv(EnvSFNEndpoint),
		},
		StateMachineARN: os.Getenv(EnvStateMachine),
		EventBus:        os.Getenv(EnvEventBus),
		VendingRole:     os.Getenv(EnvVendingRole),
		Queue:           purge.QueueConfig{URL: os.Getenv(EnvDeleteQueue)},
		DeletePace:      purge.DefaultKeyRate,
	}
	switch v := os.Getenv(EnvDeletePace); v {
	case "":
	case "off":
		e.DeletePace = 0
	default:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return e, fmt.Errorf("%s: %q is not a positive rate or off", EnvDeletePace, v)
		}
		e.DeletePace = f
	}
	if v := os.Getenv(EnvVisibility); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return e, fmt.Errorf("%s: %w", EnvVisibility, err)
		}
		e.Queue.Visibility = time.Duration(n) * time.Second
	}
	if v := os.Getenv(EnvMaxReceives); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return e, fmt.Errorf("%s: %w", EnvMaxReceives, err)
		}
		e.Queue.MaxReceives = n
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
// caller is the IAM principal API Gateway authenticated. withPurge gives it
// the purge pipeline's entry (the drop function).
func RouterConfig(ctx context.Context, e Env, withPurge bool) (router.Config, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return router.Config{}, err
	}
	st := store.New(awsconfig.DynamoDB(cfg, e.Endpoints), e.Table)
	cat := catalog.New(st, objects.New(awsconfig.S3(cfg, e.Endpoints)))
	cat.SetWarehouseBuckets(e.WarehouseBuckets)
	az := authz.New(st, e.Admins)
	cat.SetAuthorizer(az)
	rc := router.Config{
		Catalog:        cat,
		Authz:          az,
		Authenticate:   apigw.Principal,
		ClientDefaults: e.ClientDefaults,
		DefaultCatalog: e.DefaultCatalog,
	}
	if e.VendingRole != "" {
		rc.Vendor = &credentials.Vendor{STS: sts.NewFromConfig(cfg), RoleARN: e.VendingRole, Region: cfg.Region}
	}
	if withPurge {
		rc.Purge = purgeService(cfg, e, st, cat)
		rc.Purge.S3 = nil // the drop and undrop functions never delete objects
	}
	rc.SoftDelete = &softdelete.Service{Catalog: cat, Purge: rc.Purge}
	return rc, nil
}

// PartitionRouterConfig is RouterConfig for the partition-drop function: the
// router with the partitions service (it reads manifests and writes new
// ones, never deletes an object).
func PartitionRouterConfig(ctx context.Context, e Env) (router.Config, error) {
	rc, err := RouterConfig(ctx, e, false)
	if err != nil {
		return rc, err
	}
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return rc, err
	}
	// Storage: verify's files check lists the table's prefixes; repair
	// copies prior versions back (the function's role: infra/access.go).
	rc.Partitions = &partitions.Service{Catalog: rc.Catalog, IOProps: e.IOProps, Storage: awsconfig.S3(cfg, e.Endpoints)}
	return rc, nil
}

// Partitions builds the partitions service of the retention function: the
// sweep drops expired partitions and expires snapshots, whose files it
// hands to the delete pipeline as jobs (it deletes no object: its purge
// service has no S3 deleter).
func Partitions(ctx context.Context, e Env) (*partitions.Service, error) {
	p, err := Purge(ctx, e)
	if err != nil {
		return nil, err
	}
	p.S3, p.Sender = nil, nil
	return &partitions.Service{Catalog: p.Catalog, IOProps: e.IOProps, Pipeline: p}, nil
}

// SoftDelete builds the soft-delete service of the hold-expiry function: it
// starts the purge jobs of expired records (it deletes no object itself).
func SoftDelete(ctx context.Context, e Env) (*softdelete.Service, error) {
	p, err := Purge(ctx, e)
	if err != nil {
		return nil, err
	}
	p.S3 = nil
	return &softdelete.Service{Catalog: p.Catalog, Purge: p}, nil
}

// Purge builds the purge pipeline's service for a step function.
func Purge(ctx context.Context, e Env) (*purge.Service, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return nil, err
	}
	st := store.New(awsconfig.DynamoDB(cfg, e.Endpoints), e.Table)
	return purgeService(cfg, e, st, catalog.New(st, objects.New(awsconfig.S3(cfg, e.Endpoints)))), nil
}

func purgeService(cfg aws.Config, e Env, st *store.Store, cat *catalog.Service) *purge.Service {
	var pacer *purge.Pacer
	if e.DeletePace > 0 {
		pacer = purge.NewSharedPacer(st, e.DeletePace) // every invocation books on the same per-prefix schedules
	}
	return &purge.Service{
		Pacer: pacer,
		Store: st, Catalog: cat, S3: awsconfig.S3(cfg, e.Endpoints),
		Workflow: awsconfig.SFN(cfg, e.Endpoints), StateMachineARN: e.StateMachineARN, IOProps: e.IOProps,
		Sender: awsconfig.SQS(cfg, e.Endpoints), Queue: e.Queue,
		Metrics: os.Stdout, // CloudWatch reads embedded-metric-format lines from the logs
	}
}

// Outbox builds the event relay's parts: the store holding pending events
// and the bus they go to.
func Outbox(ctx context.Context, e Env) (*store.Store, *eventbus.Bus, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return nil, nil, err
	}
	return store.New(awsconfig.DynamoDB(cfg, e.Endpoints), e.Table), busOf(cfg, e), nil
}

func busOf(cfg aws.Config, e Env) *eventbus.Bus {
	if e.EventBus == "" {
		return nil
	}
	return eventbus.New(awsconfig.EventBridge(cfg, e.Endpoints), e.EventBus)
}

// SQS returns the SQS client of the environment (the delete function's lease).
func SQS(ctx context.Context, e Env) (*sqs.Client, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return nil, err
	}
	return awsconfig.SQS(cfg, e.Endpoints), nil
}
