// Command purge-plan is a step of the purge state machine (purge.Service.Plan).
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
	lambda.Start(svc.Plan)
}
