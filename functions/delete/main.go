// Command delete is the only function that may delete objects. It consumes
// the delete queue (one batch per message, bulk DeleteObjects under a
// visibility-timeout lease, failures reported per item so SQS retries them
// and dead-letters them after maxReceiveCount) and runs the state machine's
// finalize step (the metadata layer, current metadata file last).
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
)

func main() {
	ctx := context.Background()
	env, err := lambdaenv.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	svc, err := purgeenv.Purge(ctx, env)
	if err != nil {
		log.Fatal(err)
	}
	lease, err := purgeenv.SQS(ctx, env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(svc.DeleteHandler(lease, purgeenv.Queue(env)))
}
