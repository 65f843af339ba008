// Package purgeenv builds the purge pipeline's service from a function's
// environment: the purge-plan, purge-progress, delete and reconcile
// functions, and the start of purges for the others.
package purgeenv

import (
	"context"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// Purge builds the purge pipeline's service for a step function.
func Purge(ctx context.Context, e lambdaenv.Env) (*purge.Service, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return nil, err
	}
	st := store.New(awsconfig.DynamoDB(cfg, e.Endpoints), e.Table)
	return Service(cfg, e, st, catalog.New(st, objects.New(awsconfig.S3(cfg, e.Endpoints)))), nil
}

// Service is the purge service over a function's store and catalog.
func Service(cfg aws.Config, e lambdaenv.Env, st *store.Store, cat *catalog.Service) *purge.Service {
	var pacer *purge.Pacer
	if e.DeletePace > 0 {
		pacer = purge.NewSharedPacer(st, e.DeletePace) // every invocation books on the same per-prefix schedules
	}
	return &purge.Service{
		Pacer: pacer,
		Store: st, Catalog: cat, S3: awsconfig.S3(cfg, e.Endpoints),
		Workflow: awsconfig.SFN(cfg, e.Endpoints), StateMachineARN: e.StateMachineARN, IOProps: e.IOProps,
		Sender: awsconfig.SQS(cfg, e.Endpoints), Queue: Queue(e),
		Metrics: os.Stdout, // CloudWatch reads embedded-metric-format lines from the logs
	}
}

// Queue is the delete queue of the environment.
func Queue(e lambdaenv.Env) purge.QueueConfig { return purge.QueueConfig(e.Queue) }

// SQS returns the SQS client of the environment (the delete function's lease).
func SQS(ctx context.Context, e lambdaenv.Env) (*sqs.Client, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return nil, err
	}
	return awsconfig.SQS(cfg, e.Endpoints), nil
}
