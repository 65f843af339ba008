package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/outboxenv"
	"github.com/icehold/icehold/shared/lambdaenv/partitionsenv"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/lambdaenv/routerenv"
	"github.com/icehold/icehold/shared/lambdaenv/softdeleteenv"
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
	"partition-drop": routerRunner(routerenv.PartitionRouterConfig),
	"hold-expiry": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var ev events.EventBridgeEvent
		if err := strictJSON(event, &ev); err != nil {
			return nil, err
		}
		svc, err := softdeleteenv.SoftDelete(ctx, env)
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
		svc, err := partitionsenv.Partitions(ctx, env)
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
		svc, err := purgeenv.Purge(ctx, env)
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
		svc, err := purgeenv.Purge(ctx, env)
		if err != nil {
			return nil, err
		}
		lease, err := purgeenv.SQS(ctx, env)
		if err != nil {
			return nil, err
		}
		return svc.DeleteHandler(lease, purgeenv.Queue(env))(ctx, event)
	},
	"reconcile": func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var ev events.EventBridgeEvent
		if err := strictJSON(event, &ev); err != nil {
			return nil, err
		}
		svc, err := purgeenv.Purge(ctx, env)
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
	st, bus, err := outboxenv.Outbox(ctx, env)
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
		return routerenv.RouterConfig(ctx, env, withPurge)
	})
}

// routerRunner runs the router as a function's main builds it.
func routerRunner(build func(context.Context, lambdaenv.Env) (router.Config, error)) func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
	return func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		if !json.Valid(event) {
			return nil, fmt.Errorf("not an API Gateway proxy event: invalid JSON")
		}
		cfg, err := build(ctx, env)
		if err != nil {
			return nil, err
		}
		// A REST API's event or an HTTP API's (version 2.0), as the function.
		return apigw.Serve(router.New(cfg))(ctx, event)
	}
}

func purgeRunner(step func(context.Context, *purge.Service, purge.Input) (any, error)) func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
	return func(ctx context.Context, env lambdaenv.Env, event []byte) (any, error) {
		var in purge.Input
		if err := strictJSON(event, &in); err != nil {
			return nil, err
		}
		svc, err := purgeenv.Purge(ctx, env)
		if err != nil {
			return nil, err
		}
		return step(ctx, svc, in)
	}
}

func invokeCmd(conn *connOpts) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "invoke FUNCTION EVENT.json [STATE_DIR]",
		Short: "Run a function's handler on a sample event against the local server (make invoke)",
		Long: `Runs one function's handler on a sample event against the running local
server's emulators (make run), as Lambda would against AWS. The samples are
in events/FUNCTION/; "icehold invoke seed" makes the state they name, once,
on a fresh server (make invoke-all seeds and runs every sample in file order).`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 || len(args) > 3 {
				return usagef(cmd, "%s (functions: %s)", cmd.UseLine(), strings.Join(functionNames(), ", "))
			}
			if _, ok := functions[args[0]]; !ok {
				return usagef(cmd, "unknown function %q (functions: %s)", args[0], strings.Join(functionNames(), ", "))
			}
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return functionNames(), cobra.ShellCompDirectiveNoFileComp
			}
			return []string{"json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 2 {
				conn.dir, conn.dirSet = args[2], true
			}
			return runInvoke(cmd.Context(), conn, args[0], args[1], cmd.OutOrStdout())
		},
	}
	cmd.AddCommand(seedCmd(conn))
	return cmd
}

func functionNames() []string {
	names := make([]string, 0, len(functions))
	for n := range functions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// runInvoke runs one function's handler on a sample event against the
// running local server's emulators (make run), as Lambda would against AWS.
func runInvoke(ctx context.Context, conn *connOpts, name, eventFile string, stdout io.Writer) error {
	event, err := os.ReadFile(eventFile)
	if err != nil {
		return err
	}
	info, err := conn.localInfo()
	if err != nil {
		return err
	}
	if info == nil {
		return fmt.Errorf("no local server in %s: start it first (make run)", conn.stateDir())
	}
	out, err := functions[name](ctx, info.FunctionEnv(), event)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
