// Command reconcile is the scheduled sweep that starts purge executions that
// never started, restarts dead ones and fails jobs past their attempts.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/purge"
)

func main() {
	env, err := lambdaenv.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	svc, err := lambdaenv.Purge(context.Background(), env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(func(ctx context.Context, _ events.EventBridgeEvent) (purge.ReconcileReport, error) {
		return svc.Reconcile(ctx)
	})
}
