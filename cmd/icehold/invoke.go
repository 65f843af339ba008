package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/localserver"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/router"
)

// functions maps a function name (functions/<name>) to a runner of its
// handler on a raw event, built as its main builds it.
var functions = map[string]func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error){
	"api":            apiRunner(false),
	"drop":           apiRunner(true),
	"undrop":         apiRunner(true),
	"partition-drop": routerRunner(lambdaenv.PartitionRouterConfig),
	"hold-expiry": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var ev events.EventBridgeEvent
		if err := strictJSON(event, &ev); err != nil {
			return nil, err
		}
		svc, err := lambdaenv.SoftDelete(ctx, env)
		if err != nil {
			return nil, err
		}
		return svc.Expire(ctx, 0)
	},
	"retention": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var ev events.EventBridgeEvent
		if err := strictJSON(event, &ev); err != nil {
			return nil, err
		}
		svc, err := lambdaenv.Partitions(ctx, env)
		if err != nil {
			return nil, err
		}
		return svc.SweepRetention(ctx, time.Now(), 0)
	},
	"purge-plan": purgeRunner(func(ctx context.Context, svc *purge.Service, in purge.Input) (any, error) {
		return svc.Plan(ctx, in)
	}),
	"purge-progress": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var in purge.AwaitInput
		if err := strictJSON(event, &in); err != nil {
			return nil, err
		}
		svc, err := lambdaenv.Purge(ctx, env)
		if err != nil {
			return nil, err
		}
		return svc.AwaitBatches(ctx, in)
	},
	"delete": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var probe struct {
			Records []json.RawMessage `json:"Records"`
		}
		_ = json.Unmarshal(event, &probe)
		if probe.Records != nil {
			if err := strictJSON(event, &events.SQSEvent{}); err != nil {
				return nil, err
			}
		} else if err := strictJSON(event, &purge.StepInput{}); err != nil {
			return nil, err
		}
		svc, err := lambdaenv.Purge(ctx, env)
		if err != nil {
			return nil, err
		}
		lease, err := lambdaenv.SQS(ctx, env)
		if err != nil {
			return nil, err
		}
		return svc.DeleteHandler(lease, env.Queue)(ctx, event)
	},
	"reconcile": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var ev events.EventBridgeEvent
		if err := strictJSON(event, &ev); err != nil {
			return nil, err
		}
		svc, err := lambdaenv.Purge(ctx, env)
		if err != nil {
			return nil, err
		}
		rep, err := svc.Reconcile(ctx)
		if err != nil {
			return rep, err
		}
		rep.EventsRelayed, err = relay(ctx, env)
		return rep, err
	},
	"outbox": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		if err := strictJSON(event, &events.DynamoDBEvent{}); err != nil {
			return nil, err
		}
		n, err := relay(ctx, env)
		return outbox.Report{Published: n}, err
	},
}

// relay drains the outbox as the outbox and reconcile functions do.
func relay(ctx context.Context, env lambdaenv.Env) (int, error) {
	st, bus, err := lambdaenv.Outbox(ctx, env)
	if err != nil {
		return 0, err
	}
	return outbox.Drain(ctx, st, bus)
}

// strictJSON decodes an event, refusing fields its type does not know: a
// sample that drifted from the handler's input fails loudly.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("event does not fit the handler's input: %w", err)
	}
	return nil
}

func apiRunner(withPurge bool) func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
	return routerRunner(func(ctx context.Context, env lambdaenv.Env) (router.Config, error) {
		return lambdaenv.RouterConfig(ctx, env, withPurge)
	})
}

// routerRunner runs the router as a function's main builds it.
func routerRunner(build func(context.Context, lambdaenv.Env) (router.Config, error)) func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
	return func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var ev events.APIGatewayProxyRequest
		if err := json.Unmarshal(event, &ev); err != nil {
			return nil, fmt.Errorf("not an API Gateway proxy event: %w", err)
		}
		cfg, err := build(ctx, env)
		if err != nil {
			return nil, err
		}
		return apigw.Handler(router.New(cfg))(ctx, ev)
	}
}

func purgeRunner(step func(context.Context, *purge.Service, purge.Input) (any, error)) func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
	return func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var in purge.Input
		if err := strictJSON(event, &in); err != nil {
			return nil, err
		}
		svc, err := lambdaenv.Purge(ctx, env)
		if err != nil {
			return nil, err
		}
		return step(ctx, svc, in)
	}
}

// runInvoke runs one function's handler on a sample event against the
// running local server's emulators (make run), as Lambda would against AWS.
func runInvoke(args []string) error {
	if len(args) < 2 {
		names := make([]string, 0, len(functions))
		for n := range functions {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("usage: icehold invoke FUNCTION EVENT.json [STATE_DIR]\nfunctions: %s", strings.Join(names, ", "))
	}
	fn, ok := functions[args[0]]
	if !ok {
		return fmt.Errorf("unknown function %q", args[0])
	}
	event, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	dir := ".icehold"
	if len(args) > 2 {
		dir = args[2]
	}
	raw, err := os.ReadFile(filepath.Join(dir, "local.json"))
	if err != nil {
		return fmt.Errorf("start the local server first (make run): %w", err)
	}
	var info localserver.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return err
	}
	env := info.FunctionEnv()
	out, err := fn(context.Background(), env, event)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
