// Package lambdaenv reads a function's configuration from its environment:
// what every Lambda main starts from. It imports none of the services: each
// main builds what it serves with the package of its own kind
// (lambdaenv/routerenv, purgeenv, softdeleteenv, partitionsenv,
// outboxenv), so a function's binary carries only what it runs
// (docs/design/infra.md, Lean functions).
package lambdaenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/awsconfig"
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
	Queue            Queue
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

// Queue is what the delete function knows of its queue (the fields of
// purge.QueueConfig, which it converts to).
type Queue struct {
	URL string
	// Visibility is the queue's visibility timeout: the lease length.
	Visibility time.Duration
	// MaxReceives is the redrive policy's maxReceiveCount.
	MaxReceives int
}

// DefaultDeletePace is purge.DefaultKeyRate (a test holds them equal): the
// shared per-prefix deletion rate when ICEHOLD_DELETE_PACE is unset.
const DefaultDeletePace = 0.95 * 3500

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
		Queue:           Queue{URL: os.Getenv(EnvDeleteQueue)},
		DeletePace:      DefaultDeletePace,
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
