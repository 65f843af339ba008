// Package server composes the whole product on one machine: the
// embedded AWS emulators, the same SDK adapters and the same router as in
// Lambda. `icehold local` (make run) and the tests start it.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/partitions"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/storagesweep"
	"github.com/icehold/icehold/shared/store"
)

// Options configure the local server. Zero values are the defaults of `make run`.
type Options struct {
	// Dir keeps state (journal, S3 objects, tokens); "" keeps all in memory.
	Dir string
	// WrapEvents wraps the local event bus (tests hold or crash the relay).
	WrapEvents func(eventbus.PutEvents) eventbus.PutEvents
	// RelayEvery is the outbox relay's poll interval (0: 100 ms; < 0: no
	// relay here, as when the functions' relay is under test).
	RelayEvery time.Duration
	// Addr, S3Addr, DynamoAddr: listen addresses; "" picks a free loopback
	// port (AtPorts sets them all from one base port).
	Addr, S3Addr, DynamoAddr string
	// EdgeAddr serves every AWS service on one port, routed by the service
	// a request is signed for (edge.go).
	EdgeAddr string
	Bucket   string
	Catalog  string
	// SQSAddr, SFNAddr: the embedded SQS and Step Functions.
	SQSAddr, SFNAddr string
	// Pipeline timing; zero values are make run's defaults.
	Visibility     time.Duration // delete queue visibility timeout (lease)
	MaxReceives    int           // delete queue maxReceiveCount
	TimeScale      float64       // shrinks the workflow's Wait and retry intervals
	ReconcileEvery time.Duration // the reconcile schedule
	DeleteWorkers  int           // concurrent delete invocations; < 0: none here
	BatchManifests int           // manifests per delete batch (0: purge's default)
	DeleteTimeout  time.Duration // the delete function's timeout (0: 5 minutes)
	DeleteMargin   time.Duration // how long before it a batch stops and continues (0: a tenth of it)
	// Clock drives the workflow engine's waits, heartbeats and timeouts (a
	// test advances it); nil: real time.
	Clock emulators.Clock
	// DemoProperties are the bootstrap catalog's properties on first start;
	// nil: soft delete on (the demo catalog shows the recoverable drop).
	DemoProperties map[string]string
	// HoldExpiryEvery is the hold-expiry schedule (0: 15 minutes); Now is
	// the soft-delete clock (nil: real time), for tests.
	HoldExpiryEvery time.Duration
	Now             func() time.Time
	// RetentionEvery is the partition retention schedule (0: 1 hour; < 0:
	// none); the sweep's clock is Now.
	RetentionEvery time.Duration
	// Wrap, when set, wraps the REST handler as served (e2e checks the
	// lifecycle API's answers against its spec there).
	Wrap func(http.Handler) http.Handler
	// APIOptions are added to every SDK client's middleware (`make bench`
	// counts the calls the product makes).
	APIOptions []func(*middleware.Stack) error
	// JournalCompactAt: the DynamoDB journal's size (bytes) that triggers
	// its compaction into a snapshot (0: emulators.DefaultCompactAt; < 0:
	// never, the journal alone: the restart benchmark's baseline).
	JournalCompactAt int64
	// External puts DynamoDB, S3, SQS and EventBridge on other endpoints
	// (icehold local --aws-endpoint); Stack names the resources ("": the
	// deployed stack's default, Icehold-Catalog, Icehold-DeleteQueue, …; a
	// state folder made before keeps its names, see namesFor).
	External External
	Stack    string
}

// Defaults of `make run`. The resource names are the deployed stack's (its
// default name Icehold; CloudFormation adds a suffix to the queues' and the
// table's), so that a lookup by name in docs/operations.md finds both.
const (
	// DefaultPorts is the base port: the edge (every AWS service) on it,
	// then the REST API, S3, DynamoDB, SQS and Step Functions (AtPorts).
	DefaultPorts  = 8180
	DefaultStack  = "Icehold"
	TableName     = DefaultStack + "-Catalog"
	DeleteQueue   = DefaultStack + "-DeleteQueue"
	DeleteDLQ     = DefaultStack + "-DeleteDLQ"
	PurgeMachine  = DefaultStack + "-purge"
	EventBus      = DefaultStack + "-lifecycle"
	DefaultBucket = "icehold-warehouse"
	// InventoryBucket receives the warehouse's S3 Inventory reports
	// (`icehold local run inventory`), under InventoryPrefix, as the
	// stack's inventory destination bucket does.
	InventoryBucket = "icehold-inventory"
	InventoryPrefix = "inventory"
	InventoryID     = "icehold"
	DefaultCatalog  = "demo"
	Region          = "us-east-1"
	AccessKey       = "icehold"
	SecretKey       = "icehold-local-secret"
	AdminPrincipal  = "local:admin"
	// LocalAccountAdmins: IAM principals of the local account (LocalStack's
	// 000000000000) are admins locally, as the sample events in events/ are.
	LocalAccountAdmins = "arn:aws:iam::000000000000:*"
)

// Info is what local.json holds: how to reach the local server.
type Info struct {
	RESTURL string `json:"rest_url"`
	// AWSEndpoint serves every AWS service (the edge port): what
	// AWS_ENDPOINT_URL and --endpoint-url take (icehold local env).
	AWSEndpoint string `json:"aws_endpoint"`
	S3Endpoint  string `json:"s3_endpoint"`
	DynamoDB    string `json:"dynamodb_endpoint"`
	SQS         string `json:"sqs_endpoint"`
	StepFns     string `json:"stepfunctions_endpoint"`
	DeleteQueue string `json:"delete_queue_url"`
	DeleteDLQ   string `json:"delete_dlq_url"`
	DLQARN      string `json:"delete_dlq_arn"`
	Table       string `json:"table"`
	EventBus    string `json:"event_bus"`
	Events      string `json:"events_endpoint,omitempty"`
	Machine     string `json:"state_machine_arn"`
	Region      string `json:"region"`
	Bucket      string `json:"bucket"`
	AdminToken  string `json:"admin_token"`
	Catalog     string `json:"catalog"`
	Warehouse   string `json:"warehouse"`
	AccessKey   string `json:"s3_access_key_id"`
	SecretKey   string `json:"s3_secret_access_key"`
	StateDir    string `json:"state_dir,omitempty"`
	StartedAt   string `json:"started_at"`
	ProcessID   int    `json:"pid"`
	TokensFile  string `json:"tokens_file,omitempty"`
	ConfigCheck string `json:"config_url"`
}

// Server is a running local icehold.
type Server struct {
	Info       Info
	Handler    http.Handler
	Catalog    *catalog.Service
	Purge      *purge.Service
	SoftDelete *softdelete.Service
	Partitions *partitions.Service
	// StorageSweep plans storage sweeps (SPEC §3) and checks their batches.
	StorageSweep *storagesweep.Service
	// Events is the local event bus (events.log) the outbox relay feeds.
	Events *eventbus.Bus
	// SQS is a client of the embedded queue service (tests, redrive).
	SQS *sqs.Client
	// The emulators themselves, for fault injection in tests.
	S3Emulator *emulators.S3
	Queues     *emulators.SQS
	// DynamoDB is the embedded DynamoDB (nil when external).
	DynamoDB *emulators.DynamoDB
	// RouterConfig is what Handler was built from (tests swap Authenticate
	// to run the Lambda path over the same store).
	RouterConfig router.Config

	mu     sync.RWMutex      // guards tokens
	tokens map[string]string // token → principal, as tokens.json last read
	// reload serializes refreshTokens and guards stamp.
	reload sync.Mutex
	stamp  tokensStamp

	// The local account (SigV4 and vended credentials).
	iam    *emulators.IAM
	users  *users
	vendor *credentials.Vendor

	servers []*http.Server
	dynamo  *emulators.DynamoDB
	queues  *emulators.SQS
	engine  *emulators.StepFunctions
	stop    context.CancelFunc
	bg      sync.WaitGroup
	closers []io.Closer
	dir     string
	clock   func() time.Time // Options.Now
	// unlock releases the state folder's lock (nil without Dir): Close
	// calls it last, after everything that writes there has stopped.
	unlock func()
	names  names
	// The delete queue and its DLQ, as their service names them.
	queueURL, queueARN, dlqURL, dlqARN string
}

// AtPorts puts the listeners on host ("" is 127.0.0.1) from base up: the
// edge on base, then the REST API, S3, DynamoDB, SQS and Step Functions
// (make run: 8180 to 8185). Base 0 picks free ports.
func (o *Options) AtPorts(host string, base int) {
	if host == "" {
		host = "127.0.0.1"
	}
	for i, a := range []*string{&o.EdgeAddr, &o.Addr, &o.S3Addr, &o.DynamoAddr, &o.SQSAddr, &o.SFNAddr} {
		port := 0
		if base != 0 {
			port = base + i
		}
		*a = net.JoinHostPort(host, strconv.Itoa(port))
	}
}

// BindError is a listen address that could not be opened, and what it was
// for (icehold local names the flag that moves it).
type BindError struct {
	Service, Addr string
	Err           error
}

func (e *BindError) Error() string {
	return fmt.Sprintf("%s: %v", e.Service, e.Err) // Err names the address
}

func (e *BindError) Unwrap() error { return e.Err }

// listen opens addr ("" picks a free loopback port) for service.
func listen(service, addr string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &BindError{Service: service, Addr: addr, Err: err}
	}
	return l, nil
}

func (s *Server) serve(l net.Listener, h http.Handler) string {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	s.servers = append(s.servers, srv)
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String()
}

// Start starts the emulators, bootstraps the store and serves the API.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.Bucket == "" {
		o.Bucket = DefaultBucket
	}
	if o.Catalog == "" {
		o.Catalog = DefaultCatalog
	}
	s := &Server{dir: o.Dir, tokens: map[string]string{}, clock: o.Now}
	if o.Dir != "" {
		// Before anything opens the journal: a second server on the folder
		// stops here and names the first.
		unlock, err := lockState(o.Dir)
		if err != nil {
			return nil, err
		}
		s.unlock = unlock
	}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	s.names = namesFor(o.Dir, o.Stack)
	if o.Dir != "" { // the emulators made it; external services do not
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return nil, err
		}
	}
	x := o.External
	// Every port first: a port in use stops the start before the state loads.
	ls := map[string]net.Listener{}
	for _, l := range []struct {
		service, addr string
		used          bool
	}{
		{"the edge (every AWS service)", o.EdgeAddr, true}, {"the REST API", o.Addr, true},
		{"S3", o.S3Addr, x.S3 == ""}, {"DynamoDB", o.DynamoAddr, x.DynamoDB == ""},
		{"SQS", o.SQSAddr, x.SQS == ""}, {"Step Functions", o.SFNAddr, true},
	} {
		if !l.used {
			continue
		}
		lis, err := listen(l.service, l.addr)
		if err != nil {
			return nil, err
		}
		s.closers = append(s.closers, lis) // also closes listeners a failed start never served
		ls[l.service] = lis
	}
	restL, sfnL := ls["the REST API"], ls["Step Functions"]
	ep := awsconfig.Endpoints{DynamoDB: x.DynamoDB, S3: x.S3, SQS: x.SQS, Events: x.Events,
		Region: Region, AccessKey: AccessKey, SecretKey: SecretKey}
	var err error
	if x.DynamoDB == "" {
		if s.dynamo, err = emulators.OpenDynamoDB(o.Dir, emulators.DynamoDBOptions{CompactAt: o.JournalCompactAt}); err != nil {
			return nil, fmt.Errorf("dynamodb emulator: %w", err)
		}
		s.DynamoDB = s.dynamo
		ep.DynamoDB = s.serve(ls["DynamoDB"], s.dynamo)
	}
	if x.S3 == "" {
		if s.S3Emulator, err = emulators.NewS3(o.Dir, o.Bucket, InventoryBucket); err != nil {
			return nil, fmt.Errorf("s3 emulator: %w", err)
		}
		s.closers = append(s.closers, s.S3Emulator) // after the servers: no request writes meanwhile
		ep.S3 = s.serve(ls["S3"], s.S3Emulator)
	}
	if x.SQS == "" {
		if s.queues, err = emulators.NewSQS(o.Dir); err != nil {
			return nil, fmt.Errorf("sqs emulator: %w", err)
		}
		s.Queues = s.queues
		ep.SQS = s.serve(ls["SQS"], s.queues)
		s.queues.SetBaseURL(ep.SQS)
	}
	sfnURL := "http://" + sfnL.Addr().String()
	ep.SFN = sfnURL
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		return nil, err
	}
	cfg.APIOptions = append(cfg.APIOptions, o.APIOptions...)
	if err := s.newIAM(o.Bucket); err != nil {
		return nil, fmt.Errorf("local IAM: %w", err)
	}
	cfg.Credentials = s.functionCredentials()
	ddb := awsconfig.DynamoDB(cfg, ep)
	if err := store.CreateTable(ctx, ddb, s.names.table); err != nil {
		return nil, err
	}
	if x.DynamoDB != "" {
		if err := enableTTL(ctx, ddb, s.names.table); err != nil {
			return nil, err
		}
	}
	if x.S3 != "" {
		for _, b := range []string{o.Bucket, InventoryBucket} {
			if err := createBucket(ctx, awsconfig.S3(cfg, ep), b); err != nil {
				return nil, err
			}
		}
	}
	if err := guardBucket(ctx, awsconfig.S3(cfg, ep), o.Bucket); err != nil {
		return nil, err
	}
	st := store.New(ddb, s.names.table)
	s.Catalog = catalog.New(st, objects.New(awsconfig.S3(cfg, ep)))
	s.Catalog.SetWarehouseBuckets([]string{o.Bucket}) // the one bucket it serves
	s.Catalog.SetClock(o.Now)                         // the orphan sweep's clock
	warehouse := "s3://" + o.Bucket + "/" + o.Catalog
	demoProps := o.DemoProperties
	if demoProps == nil {
		demoProps = map[string]string{catalog.PropSoftDeleteEnabled: "true"}
	}
	// Read before creating: a restart finds the catalog, and a failed
	// transaction costs minidyn a copy of the whole table.
	if _, err := s.Catalog.GetCatalog(ctx, o.Catalog); errors.Is(err, catalog.ErrNoSuchCatalog) {
		if _, err := s.Catalog.CreateCatalog(authz.WithPrincipal(ctx, AdminPrincipal), o.Catalog, warehouse, demoProps); err != nil && !errors.Is(err, catalog.ErrCatalogExists) {
			return nil, fmt.Errorf("bootstrap catalog: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("bootstrap catalog: %w", err)
	}
	// State from before the ownership index: claim what exists, once.
	if rep, ran, err := s.Catalog.EnsureOwnership(ctx); err != nil {
		return nil, fmt.Errorf("ownership backfill: %w", err)
	} else if ran && (rep.Tables+rep.SoftDeleted+rep.Jobs > 0 || len(rep.Conflicts) > 0) {
		slog.Info("ownership index backfilled", "warehouses", rep.Warehouses, "tables", rep.Tables, "soft-deleted", rep.SoftDeleted, "jobs", rep.Jobs, "conflicts", rep.Conflicts)
	}
	if _, _, err := s.Catalog.EnsureChildren(ctx); err != nil {
		return nil, fmt.Errorf("namespace children backfill: %w", err)
	}
	if err := s.startPipeline(ctx, o, cfg, ep, st, sfnL); err != nil {
		return nil, err
	}
	s.Partitions = &partitions.Service{Catalog: s.Catalog, IOProps: s.Purge.IOProps, Now: o.Now, Pipeline: s.Purge, Storage: awsconfig.S3(cfg, ep)}
	s.StorageSweep = &storagesweep.Service{
		Catalog: s.Catalog, Purge: s.Purge, S3: awsconfig.S3(cfg, ep), IOProps: s.Purge.IOProps,
		Buckets: []string{o.Bucket}, Now: o.Now,
	}
	s.Purge.Planners = map[string]purge.Planner{store.KindSweep: s.StorageSweep.Plan}
	s.Purge.FileChecks = map[string]purge.FileCheck{store.KindSweep: s.StorageSweep.Check}
	s.startRetention(o)
	admin, err := s.loadTokens()
	if err != nil {
		return nil, err
	}
	s.startIAM(cfg, ep.S3)
	az := authz.New(st, []string{AdminPrincipal, LocalAccountAdmins})
	s.Catalog.SetAuthorizer(az)
	s.RouterConfig = router.Config{
		Catalog:        s.Catalog,
		Purge:          s.Purge,
		SoftDelete:     s.SoftDelete,
		Partitions:     s.Partitions,
		StorageSweep:   s.StorageSweep,
		Authz:          az,
		Authenticate:   s.authenticate,
		AuthError:      authError,
		Vendor:         s.vendor,
		DefaultCatalog: o.Catalog,
		ClientDefaults: map[string]string{
			"s3.endpoint":                 ep.S3,
			"s3.region":                   Region,
			"s3.path-style-access":        "true",
			"s3.force-virtual-addressing": "false",
			"client.region":               Region,
		},
		ClientKeys: s.engineKeys,
		Now:        o.Now,
	}
	s.Handler = s.verifySigV4(router.New(s.RouterConfig))
	served := s.localAPI(s.Handler)
	if o.Wrap != nil {
		served = o.Wrap(served)
	}
	rest := s.serve(router.Listener(restL), served)
	edgeURL, err := s.serveEdge(ls["the edge (every AWS service)"], x)
	if err != nil {
		return nil, err
	}
	s.Info = Info{
		RESTURL: rest, AWSEndpoint: edgeURL, S3Endpoint: ep.S3, DynamoDB: ep.DynamoDB, Region: Region, Bucket: o.Bucket,
		SQS: ep.SQS, StepFns: ep.SFN, DeleteQueue: s.queueURL, DeleteDLQ: s.dlqURL, DLQARN: s.dlqARN,
		Table: s.names.table, EventBus: s.names.bus, Events: ep.Events, Machine: s.Purge.StateMachineARN,
		AdminToken: admin, Catalog: o.Catalog, Warehouse: warehouse, AccessKey: AccessKey, SecretKey: SecretKey,
		StateDir: o.Dir, StartedAt: time.Now().UTC().Format(time.RFC3339), ProcessID: os.Getpid(),
		ConfigCheck: rest + "/v1/config?warehouse=" + o.Catalog,
	}
	if o.Dir != "" {
		s.Info.TokensFile = filepath.Join(o.Dir, "tokens.json")
		b, _ := json.MarshalIndent(s.Info, "", "  ")
		if err := os.WriteFile(filepath.Join(o.Dir, "local.json"), append(b, '\n'), 0o600); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// serveEdge serves the edge port: the embedded services' handlers, and a
// proxy to each external one.
func (s *Server) serveEdge(l net.Listener, x External) (string, error) {
	e := edge{"states": s.engine}
	if s.S3Emulator != nil {
		e["s3"] = s.S3Emulator
	}
	if s.dynamo != nil {
		e["dynamodb"] = s.dynamo
	}
	if s.queues != nil {
		e["sqs"] = s.queues
	}
	for svc, url := range map[string]string{"s3": x.S3, "dynamodb": x.DynamoDB, "sqs": x.SQS, "events": x.Events} {
		if url == "" {
			continue
		}
		h, err := forward(url)
		if err != nil {
			return "", err
		}
		e[svc] = h
	}
	return s.serve(l, e), nil
}

// loadTokens reads tokens.json (token → principal), adding an admin token
// when it has none (first start); it returns an admin token.
func (s *Server) loadTokens() (string, error) {
	if s.dir == "" {
		return s.AddToken(AdminPrincipal)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return "", err
	}
	var admin string
	err := updateTokens(s.dir, func(m map[string]string) (bool, error) {
		for _, t := range sortedTokens(m) {
			if t.Principal == AdminPrincipal {
				admin = t.Token
				return false, nil
			}
		}
		admin = NewToken()
		m[admin] = AdminPrincipal
		return true, nil
	})
	if err != nil {
		return "", err
	}
	if err := s.refreshTokens(); err != nil {
		return "", err
	}
	return admin, nil
}

// AddToken creates a bearer token for principal: in tokens.json (the same as
// `icehold local token add`), or only in memory for a server without Dir.
func (s *Server) AddToken(principal string) (string, error) {
	if s.dir != "" {
		tok, err := AddTokenTo(s.dir, principal)
		if err != nil {
			return "", err
		}
		return tok, s.refreshTokens()
	}
	if err := authz.ValidatePrincipal(principal); err != nil {
		return "", err
	}
	tok := NewToken()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[tok] = principal
	return tok, nil
}

// refreshTokens reloads tokens.json when it is not the version last read: one
// stat per call, a read only after a change (see tokensStamp). A missing or
// unreadable file keeps the tokens last read (and says so once).
func (s *Server) refreshTokens() error {
	if s.dir == "" {
		return nil
	}
	s.reload.Lock()
	defer s.reload.Unlock()
	path := tokensPath(s.dir)
	fi, err := os.Stat(path)
	if err == nil && s.stamp.unchanged(fi) {
		return nil
	}
	var m map[string]string
	if err == nil {
		m, fi, err = readTokensFile(path)
	}
	if err != nil {
		if !s.stamp.failed { // said once, until a read succeeds again
			slog.Warn("tokens.json not reloaded, keeping the tokens last read", "err", err)
		}
		s.stamp = tokensStamp{failed: true}
		return err
	}
	s.mu.Lock()
	s.tokens = m
	s.mu.Unlock()
	s.stamp = tokensStamp{fi: fi, racy: time.Since(fi.ModTime()) < racyWindow}
	return nil
}

func (s *Server) authenticate(r *http.Request) string {
	if p, ok := sigv4Principal(r); ok {
		return p
	}
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return ""
	}
	return s.PrincipalOf(strings.TrimSpace(tok))
}

// Close stops the pipeline and serving.
func (s *Server) Close() {
	if s.stop != nil {
		s.stop()
	}
	if s.engine != nil {
		s.engine.Close()
	}
	s.bg.Wait()
	for _, srv := range s.servers {
		_ = srv.Close()
	}
	if s.dynamo != nil {
		_ = s.dynamo.Close()
	}
	if s.queues != nil {
		_ = s.queues.Close()
	}
	for _, c := range s.closers {
		_ = c.Close()
	}
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
}

// PrincipalOf returns the principal of a bearer token, "" if unknown. With a
// state directory it first reloads tokens.json if it changed, so tokens added
// or revoked by `icehold local token` count from the next request on.
func (s *Server) PrincipalOf(token string) string {
	_ = s.refreshTokens() // on failure: the tokens last read
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tokens[token]
}

// startRetention runs the retention sweep on its schedule (EventBridge
// rate(1 hour) in AWS), a bounded run each time.
func (s *Server) startRetention(o Options) {
	every := o.RetentionEvery
	if every == 0 {
		every = time.Hour
	}
	if every < 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	if prev := s.stop; prev != nil {
		s.stop = func() { cancel(); prev() }
	} else {
		s.stop = cancel
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	s.every(ctx, every, func(ctx context.Context) {
		if rep, err := s.Partitions.SweepRetention(ctx, now(), 0); err != nil {
			slog.Warn("partition retention", "error", err)
		} else if rep.Dropped > 0 || len(rep.Failed) > 0 {
			slog.Info("partition retention", "report", rep)
		}
	})
}
