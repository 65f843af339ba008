// Command purge-progress is the purge state machine's WaitForBatches task (purge.Service.AwaitBatches): it stores the callback token on the job.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
)

func main() {
	env, err := lambdaenv.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	svc, err := purgeenv.Purge(context.Background(), env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(svc.AwaitBatches)
}
