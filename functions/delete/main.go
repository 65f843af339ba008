// Command delete is the delete queue's consumer: one batch per SQS message,
// bulk DeleteObjects under a visibility-timeout lease, failures reported per
// item so SQS retries them and dead-letters them after maxReceiveCount.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
)

func main() {
	ctx := context.Background()
	env, err := lambdaenv.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	svc, err := lambdaenv.Purge(ctx, env)
	if err != nil {
		log.Fatal(err)
	}
	lease, err := lambdaenv.SQS(ctx, env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return svc.HandleSQS(ctx, lease, env.Queue, ev)
	})
}
