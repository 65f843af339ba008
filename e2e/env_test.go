// Package e2e is icehold's end-to-end suite: real Iceberg clients against a
// running icehold. With E2E_ENDPOINT (and E2E_TOKEN, E2E_CATALOG) it runs
// against that endpoint (LocalStack or AWS); otherwise it starts the local
// server in process. Tests that need the local server's insides (tokens for
// other principals, the raw store, SIGKILL) skip against a remote endpoint.
package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// FileIO for the client
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/google/uuid"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/eventbus"
)

// env is where the suite's requests go.
type env struct {
	URL, Token, Catalog string
	Local               *server.Server // nil against a remote endpoint
}

var shared *env

// serveEnv makes this test binary act as the local server (the restart test
// runs it as a child process and kills it).
const serveEnv = "ICEHOLD_E2E_SERVE_DIR"

// slowDeletesEnv makes the child's delete steps pause after each DeleteObjects.
const slowDeletesEnv = "ICEHOLD_E2E_SLOW_DELETES"

// holdExpiryEnv sets the child's hold-expiry schedule (a duration).
const holdExpiryEnv = "ICEHOLD_E2E_HOLD_EXPIRY"

// outboxEnv stalls the child's event relay: "hold" never publishes (events
// stay in the outbox), "die-after-publish" kills the process with SIGKILL
// right after the first publish, before the outbox record is deleted.
const outboxEnv = "ICEHOLD_E2E_OUTBOX"

// stalledBus is the event bus of a child run with outboxEnv.
type stalledBus struct {
	next eventbus.PutEvents
	mode string
}

func (b stalledBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	if b.mode == "hold" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	out, err := b.next.PutEvents(ctx, in, opts...)
	if b.mode == "die-after-publish" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return out, err
}

// compactEnv sets the child's DynamoDB journal compaction size (bytes).
const compactEnv = "ICEHOLD_E2E_COMPACT_AT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serveEnv); dir != "" {
		serveForever(dir)
		return
	}
	ctx := context.Background()
	if ep := os.Getenv("E2E_ENDPOINT"); ep != "" {
		shared = &env{URL: ep, Token: os.Getenv("E2E_TOKEN"), Catalog: envOr("E2E_CATALOG", "demo")}
	} else {
		dir, err := os.MkdirTemp("", "icehold-e2e-")
		if err != nil {
			panic(err)
		}
		// Every lifecycle answer the suite receives is checked against
		// docs/lifecycle-api.yaml; a mismatch fails the run.
		spec, err := loadSpecCheck()
		if err != nil {
			panic(err)
		}
		o := testOptions(dir)
		o.Wrap = spec.wrap
		srv, err := server.Start(ctx, o)
		if err != nil {
			panic(err)
		}
		shared = &env{URL: srv.Info.RESTURL, Token: srv.Info.AdminToken, Catalog: srv.Info.Catalog, Local: srv}
		// The servers the tests start as processes (restarts, kill -9) are
		// checked where the tests receive their answers.
		http.DefaultTransport = spec.transport(http.DefaultTransport, srv.Info.RESTURL)
		code := m.Run()
		srv.Close()
		os.RemoveAll(dir)
		if !spec.report(os.Stdout) && code == 0 {
			code = 1
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func serveForever(dir string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	o := testOptions(dir)
	if d, err := time.ParseDuration(os.Getenv(holdExpiryEnv)); err == nil {
		o.HoldExpiryEvery = d
	}
	if mode := os.Getenv(outboxEnv); mode != "" {
		o.WrapEvents = func(next eventbus.PutEvents) eventbus.PutEvents { return stalledBus{next: next, mode: mode} }
	}
	if n, err := strconv.ParseInt(os.Getenv(compactEnv), 10, 64); err == nil {
		o.JournalCompactAt = n
	}
	srv, err := server.Start(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if d, err := time.ParseDuration(os.Getenv(slowDeletesEnv)); err == nil {
		// Slow deletes down so that the parent can kill us mid-purge.
		srv.Purge.SetCrash(func(p string) error {
			if p == "delete.before-checkpoint" {
				time.Sleep(d)
			}
			return nil
		})
	}
	fmt.Println("READY " + srv.Info.RESTURL)
	<-ctx.Done()
}

// testOptions: the pipeline's clocks run fast in tests (the semantics are
// the same: leases, receive counts, waits, retries).
//
// Under make test-moto (awstest.EnvEndpoint set) DynamoDB, S3, SQS and
// EventBridge are moto's: the resources are named after dir, so a child
// restarted on the same dir finds its stack and no two servers share one
// (they share the bucket, as the tests name it; their namespaces differ).
func testOptions(dir string) server.Options {
	var ext server.External
	var stack string
	if url := awstest.External(); url != "" {
		ext = server.ExternalAt(url)
		ext.DynamoDB = awstest.DynamoDBEndpoint()
		h := sha256.Sum256([]byte(dir))
		stack = "ih" + hex.EncodeToString(h[:5])
	}
	return server.Options{
		External: ext, Stack: stack,
		// The suite's demo catalog drops hard (the tests of soft delete make
		// catalogs with it on).
		DemoProperties: map[string]string{},
		Dir:            dir, Visibility: 2 * time.Second, MaxReceives: 3, TimeScale: 0.02,
		ReconcileEvery: 300 * time.Millisecond, DeleteWorkers: 4, BatchManifests: 2,
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// embeddedAWS skips a test that needs the embedded emulators' fault
// injection (S3 faults, duplicated SQS deliveries) when they are external.
func embeddedAWS(t *testing.T) {
	t.Helper()
	if awstest.External() != "" {
		awstest.Skip(t, "needs the embedded emulators' fault injection")
	}
}

// localOnly skips tests that need the in-process server.
func localOnly(t *testing.T) *server.Server {
	t.Helper()
	if shared.Local == nil {
		t.Skip("needs the in-process local server")
	}
	return shared.Local
}

// client opens iceberg-go's REST catalog on the suite's endpoint.
func client(t testing.TB, token string) *rest.Catalog {
	t.Helper()
	opts := []rest.Option{rest.WithWarehouseLocation(shared.Catalog)}
	if token != "" {
		opts = append(opts, rest.WithOAuthToken(token))
	} else {
		opts = append(opts, rest.WithSigV4())
	}
	cat, err := rest.NewCatalog(context.Background(), "icehold", shared.URL, opts...)
	if err != nil {
		t.Fatalf("open REST catalog: %v", err)
	}
	return cat
}

// uniq makes a name unique to one test run.
func uniq(prefix string) string {
	return prefix + "_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
}
