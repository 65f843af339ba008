// Command reconcile is the scheduled sweep that starts purge executions that
// never started, restarts dead ones and fails jobs past their attempts; it
// also relays any lifecycle event the outbox function has not (a backstop
// for a stream that lagged or a bus that refused).
package main

import (
	"context"
	"errors"
	"log"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/outboxenv"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/purge"
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
	st, bus, err := outboxenv.Outbox(context.Background(), env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(func(ctx context.Context, _ events.EventBridgeEvent) (purge.ReconcileReport, error) {
		rep, err := svc.Reconcile(ctx)
		n, rerr := outbox.Drain(ctx, st, bus)
		rep.EventsRelayed = n
		return rep, errors.Join(err, rerr)
	})
}
