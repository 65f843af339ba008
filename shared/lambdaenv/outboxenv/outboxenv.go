// Package outboxenv builds the lifecycle event relay from a function's
// environment (the outbox and reconcile functions).
package outboxenv

import (
	"context"

	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/store"
)

// Outbox builds the event relay's parts: the store holding pending events
// and the bus they go to (nil without ICEHOLD_EVENT_BUS).
func Outbox(ctx context.Context, e lambdaenv.Env) (*store.Store, *eventbus.Bus, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return nil, nil, err
	}
	var bus *eventbus.Bus
	if e.EventBus != "" {
		bus = eventbus.New(awsconfig.EventBridge(cfg, e.Endpoints), e.EventBus)
	}
	return store.New(awsconfig.DynamoDB(cfg, e.Endpoints), e.Table), bus, nil
}
