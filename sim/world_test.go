package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// FileIO for the clients
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/store"
)

// The world is the system under test: one local server (restarted from
// its state folder after a crash), its clock, the principals' tokens and
// the raw clients the checks read the bucket and the store with.

const (
	catalogName = "sim"
	bucket      = server.DefaultBucket
	warehouse   = "s3://" + bucket + "/" + catalogName

	admin  = server.AdminPrincipal
	writer = "sim:writer" // every table privilege but TABLE_LEGAL_HOLD; no CATALOG_MANAGE
	holder = "sim:holder" // TABLE_LEGAL_HOLD, TABLE_READ, TABLE_WRITE
	reader = "sim:reader" // TABLE_READ, TABLE_LIST_SOFT_DELETED
)

// principals in a fixed order (generation picks by index).
var principals = []string{admin, writer, holder, reader}

// writerPrivileges: what the writer holds (everything a table's writers
// and droppers need, not the legal hold's privilege).
var writerPrivileges = []string{"NAMESPACE_CREATE", "NAMESPACE_DROP", "TABLE_CREATE", "TABLE_READ", "TABLE_WRITE", "TABLE_DROP",
	"TABLE_DROP_WITH_PURGE", "TABLE_UNDROP", "TABLE_LIST_SOFT_DELETED", "PARTITION_DROP"}

var holderPrivileges = []string{"TABLE_LEGAL_HOLD", "TABLE_READ", "TABLE_WRITE"}

var readerPrivileges = []string{"TABLE_READ", "TABLE_LIST_SOFT_DELETED"}

// Clock is the simulation's time: it moves only when the generator jumps
// it (at a barrier), so every request of a round sees one instant.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// World is the running system and how the simulation reaches it.
type World struct {
	// leaks: answers that carried secrets without Cache-Control: no-store
	// (callAt notes them; each check reports them).
	leaksMu sync.Mutex
	leaks   []string
	// badErrors: error answers outside the error format (errorModelWrong).
	badErrors []string
	dir       string
	clock     *Clock
	// relayLags: no background outbox relay (a stream that lags: the
	// reconcile drains it later); events pile up and come out together
	// when a check reads them, so their order is the outbox's own.
	relayLags bool
	// refuse: the server's next write of an item under this key prefix
	// fails (refuseWrites).
	refuse atomic.Pointer[refusal]
	// busRefusals: the event bus refuses this many more PutEvents calls.
	busRefusals atomic.Int32
	srv         *server.Server
	tokens      map[string]string // principal → bearer token
	ddb         *dynamodb.Client
	s3          *s3.Client
	http        *http.Client
	// legalPriv: this build knows TABLE_LEGAL_HOLD (the grant was accepted).
	legalPriv bool
	// env2 serves a share of the REST requests with its own grant cache
	// (environments_test.go).
	env2 atomic.Pointer[http.Handler]
	// sec is the second instance (interleavings), built on demand.
	sec *second
	// sched passes the token among a round's actors (nil: -sim.free);
	// gate holds the pipeline between settles; hook is the purge
	// service's hook (sched_test.go).
	sched *sched
	gate  *pipeGate
	hook  func(*pipeGate) func(string) error
	// crossed: jobs active when the process was killed. A kill between
	// the job's last write and its metric line loses the line, as a Lambda
	// killed there would (the record and its event are one transaction;
	// the metric is a signal): checkMetrics lets each of them be missing.
	crossed map[string]bool
}

func (w *World) options() server.Options {
	relay := time.Duration(0) // the local default
	if w.relayLags {
		relay = -1
	}
	return server.Options{
		Dir: w.dir, Catalog: catalogName, RelayEvery: relay,
		DemoProperties: map[string]string{"soft-delete.enabled": "true", "vended-credentials": "allowed"},
		Now:            w.clock.Now,
		// Fast pipeline clocks (the semantics are the same).
		// The pipeline settles after every round (sched_test.go): under an
		// injected delete fault a batch dead-letters after 2 receives, 1 s
		// apart, and throttled retries back off 2 ms, not 25.
		Visibility: time.Second, MaxReceives: 2, TimeScale: 0.02, DeleteWorkers: 2, BatchManifests: 1,
		// The sweeps and reconcile run when the generator says (with the
		// clock it set), never on their own.
		ReconcileEvery: -1, HoldExpiryEvery: -1, RetentionEvery: -1,
		// An actor's request interleaves with the other's at its AWS
		// calls (sched_test.go).
		Wrap:       func(h http.Handler) http.Handler { return serveAs(w.curSched)(w.environments(h)) },
		APIOptions: []func(*middleware.Stack) error{parkBeforeCalls(w.curSched), refuseWrites(w.refuse.Load)},
		WrapEvents: func(next eventbus.PutEvents) eventbus.PutEvents { return refusingBus{next, &w.busRefusals} },
	}
}

// start starts (or restarts) the server on the world's state folder.
func (w *World) start(ctx context.Context) error {
	srv, err := server.Start(ctx, w.options())
	if err != nil {
		return err
	}
	// Snapshots a partition drop writes are stamped on the wall clock, as
	// the clients' are: iceberg-go refuses a snapshot more than a minute
	// older than the last one, and the simulated clock runs ahead.
	srv.Partitions.Now = nil
	// The bucket stamps what it writes on the simulated clock, as AWS
	// stamps on its own: the storage sweep's windows (an orphan's age, a
	// noncurrent version's) count in the time the simulation moves.
	if srv.S3Emulator != nil {
		srv.S3Emulator.Store.SetClock(w.clock.Now)
	}
	srv.Purge.Backoff = 2 * time.Millisecond
	w.srv = srv
	env2 := secondEnv(srv)
	w.env2.Store(&env2)
	w.gate = newPipeGate()
	if w.hook != nil {
		srv.Purge.SetCrash(w.hook(w.gate))
	}
	w.http = &http.Client{Timeout: 2 * time.Minute, Transport: w.transport(http.DefaultTransport)}
	ep := awsconfig.Endpoints{DynamoDB: srv.Info.DynamoDB, S3: srv.Info.S3Endpoint, Region: srv.Info.Region,
		AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		return err
	}
	w.ddb = awsconfig.DynamoDB(cfg, ep)
	w.s3 = awsconfig.S3(cfg, ep)
	if w.tokens == nil {
		w.tokens = map[string]string{admin: srv.Info.AdminToken}
	}
	for _, p := range append(slices.Clone(principals[1:]), probe) {
		if w.tokens[p] != "" {
			continue
		}
		tok, err := srv.AddToken(p)
		if err != nil {
			return err
		}
		w.tokens[p] = tok
	}
	return nil
}

// setup grants the principals their privileges (once, on the first start).
func (w *World) setup(ctx context.Context) error {
	if err := w.versionBucket(ctx); err != nil {
		return err
	}
	if o := w.call(ctx, admin, "PUT", "/lifecycle/v1/catalogs/"+catalogName+"/grants/"+writer, map[string]any{"privileges": writerPrivileges}); o.Status != 200 {
		return fmt.Errorf("grant writer: %s", o)
	}
	if o := w.call(ctx, admin, "PUT", "/lifecycle/v1/catalogs/"+catalogName+"/grants/"+reader, map[string]any{"privileges": readerPrivileges}); o.Status != 200 {
		return fmt.Errorf("grant reader: %s", o)
	}
	o := w.call(ctx, admin, "PUT", "/lifecycle/v1/catalogs/"+catalogName+"/grants/"+holder, map[string]any{"privileges": holderPrivileges})
	switch o.Status {
	case 200:
		w.legalPriv = true
	case 400:
		// A build without TABLE_LEGAL_HOLD: the holder reads and writes
		// only; every legal hold change it makes must then be refused.
		if o2 := w.call(ctx, admin, "PUT", "/lifecycle/v1/catalogs/"+catalogName+"/grants/"+holder, map[string]any{"privileges": holderPrivileges[1:]}); o2.Status != 200 {
			return fmt.Errorf("grant holder: %s", o2)
		}
	default:
		return fmt.Errorf("grant holder: %s", o)
	}
	return nil
}

// crash stops the server at whatever it is doing (its pipeline steps are
// cancelled mid-way; every answered write is already in the journals), as
// a kill would, and starts it again from the state folder.
func (w *World) restart(ctx context.Context) error {
	active, err := w.activeJobs(ctx)
	if err != nil {
		return err
	}
	if w.crossed == nil {
		w.crossed = map[string]bool{}
	}
	for _, a := range active {
		w.crossed[a.ID] = true
	}
	w.closeSecond()
	w.gate.abort()
	w.srv.Close()
	return w.start(ctx)
}

// transport gates an actor's requests on the round's token (sched_test.go).
func (w *World) transport(next http.RoundTripper) http.RoundTripper {
	return gated{next: next, sched: w.curSched}
}

func (w *World) curSched() *sched { return w.sched }

func (w *World) closeSecond() {
	if w.sec != nil {
		w.sec.srv.Close()
		w.sec = nil
	}
}

func (w *World) close() {
	w.closeSecond()
	if w.gate != nil {
		w.gate.abort()
	}
	if w.srv != nil {
		w.srv.Close()
	}
}

// Outcome is what one request got.
type Outcome struct {
	Status int
	Body   []byte
	Header http.Header
	Err    error
}

func (o Outcome) String() string {
	if o.Err != nil {
		return fmt.Sprintf("error %v", o.Err)
	}
	b := string(o.Body)
	if len(b) > 300 {
		b = b[:300] + "…"
	}
	return fmt.Sprintf("%d %s", o.Status, strings.TrimSpace(b))
}

func (o Outcome) ok() bool { return o.Err == nil && o.Status >= 200 && o.Status < 300 }

// call sends one request as principal; body is a raw string or a value to
// marshal.
func (w *World) call(ctx context.Context, principal, method, path string, body any, headers ...string) Outcome {
	return w.callAt(ctx, w.srv.Info.RESTURL, principal, method, path, body, headers...)
}

func (w *World) callAt(ctx context.Context, base, principal, method, path string, body any, headers ...string) Outcome {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return Outcome{Err: err}
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return Outcome{Err: err}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	req.Header.Set("Authorization", "Bearer "+w.tokens[principal])
	res, err := w.http.Do(req)
	if err != nil {
		return Outcome{Err: err}
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if bytes.Contains(out, []byte(`"s3.secret-access-key"`)) && !strings.Contains(res.Header.Get("Cache-Control"), "no-store") {
		// SPEC §2: an answer carrying secrets is no-store.
		w.leaksMu.Lock()
		w.leaks = append(w.leaks, fmt.Sprintf("%s %s -> %d (Cache-Control %q)", method, path, res.StatusCode, res.Header.Get("Cache-Control")))
		w.leaksMu.Unlock()
	}
	if res.StatusCode >= 400 && method != "HEAD" {
		if why := errorModelWrong(res.StatusCode, out); why != "" {
			w.leaksMu.Lock()
			w.badErrors = append(w.badErrors, fmt.Sprintf("%s %s -> %d: %s: %s", method, path, res.StatusCode, why, trunc(string(out), 200)))
			w.leaksMu.Unlock()
		}
	}
	return Outcome{Status: res.StatusCode, Body: out, Header: res.Header, Err: err}
}

// errorTypes: the statuses each error type of docs/spec.md's error format
// is answered with (shared/router's mapping, read from the docs, not the
// code).
var errorTypes = map[string][]int{
	"BadRequestException": {400}, "NotAuthorizedException": {401, 403}, "ForbiddenException": {403},
	"NoSuchCatalogException": {404}, "NoSuchNamespaceException": {404}, "NoSuchTableException": {404}, "NoSuchViewException": {404},
	"NotFoundException": {404}, "NoSuchSoftDeletedTableException": {404}, "NoSuchRetentionPolicyException": {404}, "NoSuchInventoryReportException": {404},
	"MethodNotAllowedException": {405}, "NotAcceptableException": {406},
	"AlreadyExistsException": {409}, "NamespaceNotEmptyException": {409}, "CommitFailedException": {409}, "LocationOwnedException": {409},
	"AmbiguousTableException": {409}, "LegalHoldException": {409}, "InvalidHoldPeriodException": {409}, "JobStateException": {409},
	"UnrepairableException": {409}, "StorageSweepRunningException": {409}, "IdempotencyKeyInFlightException": {409},
	"RequestEntityTooLargeException": {413}, "UnprocessableEntityException": {422}, "InventoryReportRefusedException": {422},
	"IdempotencyKeyReusedException": {422}, "NotImplementedException": {501},
	// The REST spec's server error: an AWS call that failed past the SDK's
	// retries (refusedCommit injects one).
	"InternalServerError": {500},
}

// errorModelWrong says how an error answer breaks the error format
// ({"error": {"message", "type", "code"}}, code the status, a type
// answered with that status); "" when it does not.
func errorModelWrong(status int, body []byte) string {
	var e struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	switch {
	case json.Unmarshal(body, &e) != nil || e.Error == nil:
		return "not in the error format"
	case e.Error.Code != status:
		return fmt.Sprintf("code %d", e.Error.Code)
	case e.Error.Message == "":
		return "no message"
	case !slices.Contains(errorTypes[e.Error.Type], status):
		return fmt.Sprintf("type %q is not answered with %d", e.Error.Type, status)
	}
	return ""
}

// errorType: the type of an error answer ("" none).
func errorType(body []byte) string {
	var e struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Type
}

// client is iceberg-go's REST catalog for principal; status records the
// last error answer it received (iceberg-go's errors do not carry it).
func (w *World) client(ctx context.Context, principal string, vended ...bool) (*rest.Catalog, *statusRecorder, error) {
	return w.clientOf(ctx, catalogName, principal, vended...)
}

// clientOf: client, of catalog cat.
func (w *World) clientOf(ctx context.Context, catName, principal string, vended ...bool) (*rest.Catalog, *statusRecorder, error) {
	rec := &statusRecorder{next: w.transport(http.DefaultTransport)}
	opts := []rest.Option{rest.WithOAuthToken(w.tokens[principal]), rest.WithWarehouseLocation(catName), rest.WithCustomTransport(rec)}
	if len(vended) > 0 && vended[0] {
		// An engine that asks for vended credentials writes its files
		// with the session it gets.
		opts = append(opts, rest.WithHeaders(map[string]string{delegation: "vended-credentials"}))
	}
	cat, err := rest.NewCatalog(ctx, "icehold", w.srv.Info.RESTURL, opts...)
	return cat, rec, err
}

type statusRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	last int
}

func (r *statusRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := r.next.RoundTrip(req)
	if err == nil && res.StatusCode >= 300 && strings.Contains(req.URL.Host, "127.0.0.1") && !strings.Contains(req.URL.Path, "/"+bucket+"/") {
		r.mu.Lock()
		r.last = res.StatusCode
		r.mu.Unlock()
	}
	return res, err
}

func (r *statusRecorder) status() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// objects lists every key of the warehouse bucket with its size.
func (w *World) objects(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(w.s3, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			out[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	return out, nil
}

// scan walks every item of the store.
func (w *World) scan(ctx context.Context, fn func(item map[string]ddbtypes.AttributeValue) error) error {
	p := dynamodb.NewScanPaginator(w.ddb, &dynamodb.ScanInput{TableName: aws.String(server.TableName)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
	}
	return nil
}

func str(it map[string]ddbtypes.AttributeValue, name string) string {
	if v, ok := it[name].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// digest is the catalog's state as a user could notice it: every store item
// but delivery state (outbox, idempotency receipts) and every object.
func (w *World) digest(ctx context.Context) (string, error) {
	var lines []string
	// Files a request named in an intent before writing them (a refused
	// transaction wrote some of its tables' metadata first): the orphan
	// sweep deletes them once the intent is stale; the intent and its
	// files are the product's cleanup, not a change.
	intended := map[string]bool{}
	err := w.scan(ctx, func(it map[string]ddbtypes.AttributeValue) error {
		if strings.HasPrefix(str(it, "pk"), "INTENT#") {
			if l, ok := it["files"].(*ddbtypes.AttributeValueMemberL); ok {
				for _, v := range l.Value {
					if k, ok := keyOf(attrS(v)); ok {
						intended[k] = true
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	err = w.scan(ctx, func(it map[string]ddbtypes.AttributeValue) error {
		// Delivery state and what the pipeline of an ended job still
		// tidies on its own time (its claim items, its records).
		pk := str(it, "pk")
		for _, p := range []string{store.OutboxPK, "IDEM#", "PACE#", "JOB#", "BATCH#", "INFLIGHT#", "ACTIVEJOB", "INTENT#"} {
			if strings.HasPrefix(pk, p) {
				return nil
			}
		}
		if strings.HasPrefix(pk, "LOC#") && (str(it, "job_id") != "" || str(it, "owner_id") == "") {
			return nil // a job's claim, or an empty item tidied when it may be
		}
		b, _ := json.Marshal(it)
		lines = append(lines, "ddb "+string(b))
		return nil
	})
	if err != nil {
		return "", err
	}
	objs, err := w.objects(ctx)
	if err != nil {
		return "", err
	}
	for k, n := range objs {
		if !intended[k] {
			lines = append(lines, fmt.Sprintf("s3 %s %d", k, n))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// activeJobs lists the jobs that are not terminal.
func (w *World) activeJobs(ctx context.Context) ([]store.ActiveJob, error) {
	var out []store.ActiveJob
	token := ""
	for {
		page, next, err := w.srv.Catalog.Store().ActiveJobs(ctx, token, 100)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		token = next
	}
}

var errTimeout = errors.New("timed out")
