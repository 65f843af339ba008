// Command purge-progress is a step of the purge state machine (purge.Service.Progress).
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
	lambda.Start(svc.Progress)
}
