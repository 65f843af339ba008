// Command outbox relays lifecycle events: the table's stream wakes it when
// an event is recorded (filtered to the outbox's items), and it publishes
// every pending event to the bus, oldest first, deleting each once sent.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/outboxenv"
	"github.com/icehold/icehold/shared/outbox"
)

func main() {
	env, err := lambdaenv.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	st, bus, err := outboxenv.Outbox(context.Background(), env)
	if err != nil {
		log.Fatal(err)
	}
	// The stream records are only a wake-up: the outbox itself is the
	// queue, so a failed run is retried and nothing is skipped.
	lambda.Start(func(ctx context.Context, _ events.DynamoDBEvent) (outbox.Report, error) {
		n, err := outbox.Drain(ctx, st, bus)
		return outbox.Report{Published: n}, err
	})
}
