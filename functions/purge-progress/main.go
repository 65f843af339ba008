// Command purge-progress is the purge state machine's WaitForBatches task (purge.Service.AwaitBatches): it stores the callback token on the job.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
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
	lambda.Start(svc.AwaitBatches)
}
