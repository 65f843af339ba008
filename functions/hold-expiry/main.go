// Command hold-expiry is the hold-expiry sweep on its EventBridge schedule:
// soft-deleted tables past their purge time are deleted for good (and their
// files handed to the purge pipeline), a bounded number per run.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/softdeleteenv"
	"github.com/icehold/icehold/shared/softdelete"
)

func main() {
	env, err := lambdaenv.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	svc, err := softdeleteenv.SoftDelete(context.Background(), env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(func(ctx context.Context, _ events.EventBridgeEvent) (softdelete.ExpiryReport, error) {
		return svc.Expire(ctx, 0)
	})
}
