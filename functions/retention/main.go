// Command retention is the partition retention sweep on its EventBridge
// schedule: every table with a policy drops its expired partitions through
// the partition drop (one delete snapshot each), a bounded number of tables
// per run. It deletes no object: snapshot expiry and the delete pipeline do.
package main

import (
	"context"
	"log"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/partitionsenv"
	"github.com/icehold/icehold/shared/partitions"
)

func main() {
	env, err := lambdaenv.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	svc, err := partitionsenv.Partitions(context.Background(), env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(func(ctx context.Context, _ events.EventBridgeEvent) (partitions.SweepResult, error) {
		return svc.SweepRetention(ctx, time.Now(), 0)
	})
}
