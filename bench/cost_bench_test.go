package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/store"
)

// The cost model (SPEC §8, docs/cost.md): what each operation asks of AWS,
// counted from the calls the product makes on a local server whose SDK
// clients are metered (meter_test.go), and what two reference workloads
// cost a month at list prices (prices_test.go), beside Glue Data Catalog's
// request prices and a per-file delete loop.

// costEnv is a local server with metered clients, the bench's own
// unmetered ones, and a grantee (not an admin: a check reads grants).
type costEnv struct {
	env
	m       *meter
	st      *store.Store // unmetered: the bench's own reads
	sfn     *sfn.Client  // unmetered
	clock   *benchClock  // the authorizer's cache clock
	grantee string       // the grantee's token
}

// benchClock is a clock the bench moves (the grant cache's TTL).
type benchClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *benchClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *benchClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const granteePrincipal = "arn:aws:iam::123456789012:user/engine"

func startCost(b *testing.B) *costEnv {
	b.Helper()
	m := &meter{}
	srv, err := server.Start(context.Background(), server.Options{
		TimeScale: 0.01, Visibility: time.Minute, DeleteWorkers: 1,
		// The schedules run when the bench says (their idle runs are a
		// fixed monthly cost), the outbox relay too (its function's work
		// belongs to the operation that recorded the events).
		ReconcileEvery: time.Hour, HoldExpiryEvery: time.Hour, RetentionEvery: -1, RelayEvery: -1,
		APIOptions: []func(*middleware.Stack) error{m.middleware},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	srv.S3Emulator.SetObserver(m.observeS3)
	clk := &benchClock{t: time.Unix(1_000_000, 0)}
	srv.RouterConfig.Authz.SetClock(clk.now)
	i := srv.Info
	ep := awsconfig.Endpoints{DynamoDB: i.DynamoDB, SFN: i.StepFns, Region: i.Region, AccessKey: i.AccessKey, SecretKey: i.SecretKey}
	cfg, err := awsconfig.Load(context.Background(), ep)
	if err != nil {
		b.Fatal(err)
	}
	ce := &costEnv{env: env{srv: srv}, m: m, st: store.New(awsconfig.DynamoDB(cfg, ep), i.Table), sfn: awsconfig.SFN(cfg, ep), clock: clk}
	if ce.grantee, err = srv.AddToken(granteePrincipal); err != nil {
		b.Fatal(err)
	}
	return ce
}

// grantAll gives the grantee every privilege on a catalog.
func (ce *costEnv) grantAll(b *testing.B, cat string) {
	var all []string
	for _, p := range authz.All {
		all = append(all, string(p))
	}
	ce.call(b, "PUT", "/lifecycle/v1/catalogs/"+cat+"/grants/"+granteePrincipal, map[string]any{"privileges": all})
}

// send is one request as token; it fails the benchmark on a status past want.
func (ce *costEnv) send(b *testing.B, token, method, path string, body any, hdr map[string]string, want int) *http.Response {
	b.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, ce.srv.Info.RESTURL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != want {
		b.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, out, want)
	}
	res.Body = io.NopCloser(bytes.NewReader(out))
	return res
}

// opRow is what one operation asked of AWS.
type opRow struct {
	name        string
	div         float64 // the counts are divided by it (per 1,000 files: files / 1,000)
	u           usage
	api         int            // API Gateway requests
	fns         map[string]int // Lambda invocations by function
	transitions int            // Step Functions state transitions
	events      int            // EventBridge events
}

// measure runs op with the meter on; the outbox's relay of the events it
// recorded (the outbox function, on the table's stream in AWS) is part of
// it, and so is each delete invocation (one a message received: the event
// source mapping's batch size is 1).
func (ce *costEnv) measure(name string, div float64, op func(r *opRow)) opRow {
	r := opRow{name: name, div: div, fns: map[string]int{}}
	before := ce.m.snapshot()
	op(&r)
	done := ce.m.snapshot()
	n, err := outbox.Drain(context.Background(), ce.srv.Catalog.Store(), ce.srv.Events)
	if err != nil {
		panic(err)
	}
	if n > 0 {
		r.fns["outbox"]++
		r.events += n
		done = ce.m.snapshot()
	} // else the drain's look at an empty outbox is the bench's, not the stream's (it runs on records only)
	r.u = done.minus(before)
	r.fns["delete"] += r.u.calls["SQS ReceiveMessage"]
	return r
}

// rest is one request of an operation, served by fn (the function API
// Gateway sends it to).
func (ce *costEnv) rest(b *testing.B, r *opRow, fn, method, path string, body any, hdr map[string]string, want int) *http.Response {
	r.api++
	r.fns[fn]++
	return ce.send(b, ce.grantee, method, path, body, hdr, want)
}

// await waits for a purge job to end and adds its execution: the state
// transitions and the step functions it invoked (retries included).
func (ce *costEnv) await(b *testing.B, r *opRow, cat, id string) store.Job {
	b.Helper()
	ctx := context.Background()
	t0 := time.Now()
	var j store.Job
	for {
		var err error
		if j, err = ce.st.GetJob(ctx, cat, id); err != nil {
			b.Fatal(err)
		}
		if store.Terminal(j.State) {
			break
		}
		if time.Since(t0) > 5*time.Minute {
			b.Fatalf("job %s still %s", id, j.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if j.State != store.JobSucceeded {
		b.Fatalf("job %s: %s %s", id, j.State, j.LastError)
	}
	arn := purge.ExecutionARN(ce.srv.Purge.StateMachineARN, j.Execution)
	stepFn := map[string]string{"Plan": "purge-plan", "WaitForBatches": "purge-progress", "Finalize": "delete", "MarkFailed": "delete"}
	state := ""
	for tok := (*string)(nil); ; {
		h, err := ce.sfn.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{ExecutionArn: &arn, NextToken: tok})
		if err != nil {
			b.Fatal(err)
		}
		for _, ev := range h.Events {
			typ := string(ev.Type)
			if strings.HasSuffix(typ, "StateEntered") {
				r.transitions++
				if ev.StateEnteredEventDetails != nil {
					state = aws.ToString(ev.StateEnteredEventDetails.Name)
				}
			}
			if typ == "TaskScheduled" {
				r.fns[stepFn[state]]++
			}
		}
		if tok = h.NextToken; tok == nil {
			break
		}
	}
	return j
}

// frontDoor is an API Gateway API type and its price per request.
type frontDoor struct {
	name string
	perM float64
}

// The two front doors (infra: icehold:api), the default first.
var (
	httpAPI = frontDoor{"HTTP API", prices.httpAPIPerM}
	restAPI = frontDoor{"REST API", prices.restAPIPerM}
	doors   = []frontDoor{httpAPI, restAPI}
)

// cost is a row's price per operation (per unit) behind a front door, USD:
// AWS's list prices times what it counted, and Lambda's duration modelled
// (prices_test.go). CloudWatch Logs are the workloads' (logBytes).
func (r opRow) cost(door frontDoor) float64 {
	u := r.u
	inv, gb := 0, 0.0
	for fn, n := range r.fns {
		inv += n
		gb += float64(n) * functionGB[fn]
	}
	if inv > 0 {
		gb /= float64(inv)
	}
	s3Read := u.calls["S3 GET"] + u.calls["S3 HEAD"]
	s3Write := u.calls["S3 PUT"] + u.calls["S3 POST"] + u.calls["S3 LIST"] + u.calls["S3 DeleteObjects"]
	sqsCalls := u.sum("SQS ") - u.sum("SQS ReceiveMessage (empty)")
	ms := float64(inv*cpuMsPerInvocation + u.sum("DynamoDB ")*dynamoMsPerCall + s3Read*s3ReadMs +
		(s3Write+u.calls["S3 DELETE"])*s3WriteMs + sqsCalls*sqsMsPerCall + u.sum("SFN ")*sfnMsPerCall)
	usd := float64(r.api)*door.perM/1e6 +
		float64(inv)*prices.lambdaPerM/1e6 + ms/1000*gb*prices.lambdaPerGBs +
		u.rcu*prices.dynamoReadPerM/1e6 + u.wcu*prices.dynamoWritePerM/1e6 +
		float64(s3Write)*prices.s3Tier1PerK/1e3 + float64(s3Read)*prices.s3Tier2PerK/1e3 +
		float64(r.transitions)*prices.sfnPerK/1e3 + float64(sqsCalls)*prices.sqsPerM/1e6 +
		float64(r.events)*prices.eventsPerM/1e6
	return usd / r.div
}

// logBytes is what an operation writes to CloudWatch Logs, per unit: an
// access log line per API request, Lambda's lines per invocation.
func (r opRow) logBytes() float64 {
	inv := 0
	for _, n := range r.fns {
		inv += n
	}
	return float64(r.api*accessLogBytes+inv*lambdaLogBytes) / r.div
}

func (r opRow) print() {
	u, d := r.u, r.div
	inv := 0
	for _, n := range r.fns {
		inv += n
	}
	reads := u.calls["DynamoDB GetItem"] + u.calls["DynamoDB Query"] + u.calls["DynamoDB Scan"]
	writes := u.sum("DynamoDB ") - reads
	f := func(n int) string { return trim(float64(n) / d) }
	fmt.Printf("%-38s %5s %5s %6s %6s %6s %6s %6s %7s %6s %5s %5s %5s %9.2f %9.2f\n", r.name, f(r.api), f(inv),
		f(reads), trim(u.rcu/d), f(writes), trim(u.wcu/d),
		f(u.calls["S3 GET"]+u.calls["S3 HEAD"]), f(u.calls["S3 PUT"]+u.calls["S3 POST"]+u.calls["S3 LIST"]),
		f(u.calls["S3 DeleteObjects"]+u.calls["S3 DELETE"]), f(u.sum("SQS ")-u.sum("SQS ReceiveMessage (empty)")),
		f(r.transitions), f(r.events), r.cost(httpAPI)*1e6, r.cost(restAPI)*1e6)
}

func trim(v float64) string {
	switch {
	case v == float64(int64(v)):
		return fmt.Sprint(int64(v))
	case v < 0.1:
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// loadRefreshed is the row of a load that finds its process's reading of
// the grants older than authz.TTL.
var loadRefreshed = fmt.Sprintf("load (grants re-read, every %s)", authz.TTL)

// loadRevalidated is the row of a load whose client holds the current
// metadata (If-None-Match: its ETag): a 304.
const loadRevalidated = "load revalidated (If-None-Match, 304)"

// Purge per 1,000 files: a table of this many files in manifests of 1,000.
const costPurgeFiles = 10_000

func BenchmarkCost(b *testing.B) {
	ce := startCost(b)
	ctx := context.Background()
	// A catalog without soft delete (drop is a hard drop there).
	ce.call(b, "POST", "/lifecycle/v1/catalogs", map[string]any{"name": "hard", "warehouse": "s3://" + ce.srv.Info.Bucket + "/hard"})
	ce.grantAll(b, "demo")
	ce.grantAll(b, "hard")
	for _, ns := range []string{"/v1/demo/namespaces", "/v1/hard/namespaces"} {
		ce.call(b, "POST", ns, map[string]any{"namespace": []string{"c"}})
	}
	schema := json.RawMessage(`{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","type":"long","required":false}]}`)
	tbl := "/v1/demo/namespaces/c/tables/"
	var rows []opRow
	add := func(r opRow) { rows = append(rows, r) }

	add(ce.measure("create", 1, func(r *opRow) {
		ce.rest(b, r, "api", "POST", "/v1/demo/namespaces/c/tables", map[string]any{"name": "t", "schema": schema}, nil, 200)
	}))
	ce.send(b, ce.grantee, "GET", tbl+"t", nil, nil, 200) // the grants are cached now
	var etag string
	add(ce.measure("load (grants cached)", 10, func(r *opRow) {
		for range 10 {
			etag = ce.rest(b, r, "api", "GET", tbl+"t", nil, nil, 200).Header.Get("ETag")
		}
	}))
	ce.clock.advance(authz.TTL)
	add(ce.measure(loadRefreshed, 1, func(r *opRow) {
		ce.rest(b, r, "api", "GET", tbl+"t", nil, nil, 200)
	}))
	if etag == "" {
		b.Fatal("a load answered no ETag (SPEC §2: a revalidation is a 304 without an S3 GET)")
	}
	add(ce.measure(loadRevalidated, 10, func(r *opRow) {
		for range 10 {
			ce.rest(b, r, "api", "GET", tbl+"t", nil, map[string]string{"If-None-Match": etag}, 304)
		}
	}))
	add(ce.measure("commit", 1, func(r *opRow) {
		ce.rest(b, r, "api", "POST", tbl+"t", map[string]any{"requirements": []any{},
			"updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"k": "v"}}}}, nil, 200)
	}))

	ce.call(b, "POST", "/v1/hard/namespaces/c/tables", map[string]any{"name": "t", "schema": schema})
	add(ce.measure("drop (soft delete off)", 1, func(r *opRow) {
		ce.rest(b, r, "drop", "DELETE", "/v1/hard/namespaces/c/tables/t", nil, nil, 204)
	}))
	add(ce.measure("soft drop", 1, func(r *opRow) {
		ce.rest(b, r, "drop", "DELETE", tbl+"t", nil, nil, 204)
	}))
	add(ce.measure("undrop", 1, func(r *opRow) {
		ce.rest(b, r, "undrop", "POST", "/lifecycle/v1/catalogs/demo/namespaces/c/tables/t/undrop", map[string]any{}, nil, 200)
	}))

	ce.synthTable(b, "c", "big", costPurgeFiles, 1000, true)
	add(ce.measure("drop + purge, per 1,000 files", costPurgeFiles/1000, func(r *opRow) {
		res := ce.rest(b, r, "drop", "DELETE", tbl+"big?purgeRequested=true", nil, nil, 204)
		if j := ce.await(b, r, "demo", res.Header.Get(router.PurgeJobHeader)); j.FilesDeleted < costPurgeFiles {
			b.Fatalf("purge deleted %d files, want %d", j.FilesDeleted, costPurgeFiles)
		}
	}))

	ce.daysTable(b, "c", "days", 30, 10, 10)
	days := make([]map[string]string, 10)
	for d := range days {
		days[d] = map[string]string{"ts_day": time.Unix(int64(pdEpoch+d)*86400, 0).UTC().Format("2006-01-02")}
	}
	add(ce.measure("partition drop (10 of 30 days, 300 files)", 1, func(r *opRow) {
		ce.rest(b, r, "partition-drop", "POST", "/lifecycle/v1/catalogs/demo/namespaces/c/tables/days/partitions/drop",
			map[string]any{"partitions": days}, nil, 200)
	}))
	ce.call(b, "PUT", "/lifecycle/v1/catalogs/demo/namespaces/c/tables/days/partition-retention", map[string]any{"field": "ts_day", "keep": "P7D"})
	add(ce.measure("retention sweep, per table due", 1, func(r *opRow) {
		r.fns["retention"]++
		res, err := ce.srv.Partitions.SweepRetention(ctx, time.Now(), 0)
		if err != nil || res.Dropped != 1 {
			b.Fatalf("sweep: %+v %v", res, err)
		}
		for _, id := range res.ExpireJobs {
			ce.await(b, r, "demo", id)
		}
	}))

	// The schedules' runs with nothing to do: a fixed monthly cost.
	idle := []struct {
		name, fn string
		perMonth float64
		run      func() error
	}{
		{"reconcile + orphan sweep (every 5 min)", "reconcile", 30 * 24 * 12, func() error { _, err := ce.srv.Purge.Reconcile(ctx); return err }},
		{"hold expiry (every 15 min)", "hold-expiry", 30 * 24 * 4, func() error { _, err := ce.srv.SoftDelete.Expire(ctx, 0); return err }},
		{"retention sweep, nothing due (hourly)", "retention", 30 * 24, func() error {
			_, err := ce.srv.Partitions.SweepRetention(ctx, time.Now(), 0)
			return err
		}},
	}
	fixed, idleLogBytes := 0.0, 0.0
	var idleRows []opRow
	for _, s := range idle {
		r := ce.measure(s.name, 1, func(r *opRow) {
			r.fns[s.fn]++
			if err := s.run(); err != nil {
				b.Fatal(err)
			}
		})
		idleRows = append(idleRows, r)
		fixed += r.cost(httpAPI) * s.perMonth // no API request: the same behind either door
		idleLogBytes += r.logBytes() * s.perMonth
	}
	// The delete queue's event source mapping polls while idle: Lambda's
	// pollers long-poll (20 s), at least 5 of them (SQS's FAQ on Lambda).
	pollsPerMonth := 5 * 3 * 60 * 24 * 30.0
	fixed += pollsPerMonth * prices.sqsPerM / 1e6

	fmt.Printf("\n== cost per operation, counted from the SDK calls (DynamoDB capacity from ReturnConsumedCapacity); USD at us-east-1 list prices of %s ==\n", prices.date)
	fmt.Printf("%-38s %5s %5s %6s %6s %6s %6s %6s %7s %6s %5s %5s %5s %9s %9s\n", "operation", "APIGW", "λ inv", "DDB rd", "RCU", "DDB wr", "WCU", "S3 GET", "S3 PUT*", "S3 DEL", "SQS", "SFN", "evts", "$/1M HTTP", "$/1M REST")
	for _, r := range rows {
		r.print()
	}
	fmt.Println("schedules, idle (a fixed monthly cost):")
	for _, r := range idleRows {
		r.print()
	}
	fmt.Printf("(λ inv: Lambda invocations, the outbox's for the events an operation records included; DDB rd/wr: calls; S3 PUT*: PUT, POST, LIST;\n" +
		" S3 DEL: DeleteObjects (1,000 keys) and DELETE; SQS: requests but the idle polls; SFN: state transitions; evts: EventBridge events;\n" +
		" $/1M HTTP, REST: the operation a million times behind the HTTP API (default) or the REST API (icehold:api=rest),\n" +
		" Lambda duration modelled: 5 ms CPU an invocation plus AWS's typical latency per call)\n")
	target := func(label string, ok bool, got string) {
		verdict := "met"
		if !ok {
			verdict = "NOT met"
		}
		fmt.Printf("target %-62s %-8s (%s)\n", label, verdict, got)
	}
	byName := map[string]opRow{}
	for _, r := range rows {
		byName[r.name] = r
	}
	load, commit := byName["load (grants cached)"], byName["commit"]
	loadReads := float64(load.u.calls["DynamoDB GetItem"]+load.u.calls["DynamoDB Query"]) / load.div
	loadGets := float64(load.u.calls["S3 GET"]) / load.div
	target("load-table ≤ 2 DynamoDB reads + 1 S3 GET", loadReads <= 2 && loadGets <= 1, fmt.Sprintf("%s reads, %s GET; once per %s a process reads the grant index again: %s reads",
		trim(loadReads), trim(loadGets), authz.TTL, trim(float64(byName[loadRefreshed].u.sum("DynamoDB ")))))
	cw := commit.u.calls
	commitWrites := cw["DynamoDB TransactWriteItems"] + cw["DynamoDB UpdateItem"] + cw["DynamoDB PutItem"]
	target("commit ≤ 1 transaction + 1 S3 PUT + its reads", commitWrites <= 1 && cw["S3 PUT"] <= 1,
		fmt.Sprintf("%d transaction + %d PutItem (the intent written before the metadata file: the orphan sweep's), %d PUT, %d reads",
			cw["DynamoDB TransactWriteItems"], cw["DynamoDB PutItem"], cw["S3 PUT"], cw["DynamoDB GetItem"]+cw["DynamoDB Query"]+cw["S3 GET"]))

	reval := byName[loadRevalidated]
	target("revalidated load: 0 S3 GET (SPEC §8, per-request reads)", reval.u.calls["S3 GET"] == 0,
		fmt.Sprintf("%s S3 GET, %s DynamoDB reads", trim(float64(reval.u.calls["S3 GET"])/reval.div), trim(float64(reval.u.sum("DynamoDB "))/reval.div)))
	glue := prices.glueRequestsPerM
	target(fmt.Sprintf("revalidated load on the HTTP API ≤ 1.5 × Glue's $%.2f per 1M", glue), reval.cost(httpAPI)*1e6 <= 1.5*glue,
		fmt.Sprintf("$%.2f per 1M; behind the REST API $%.2f; a full load $%.2f", reval.cost(httpAPI)*1e6, reval.cost(restAPI)*1e6, load.cost(httpAPI)*1e6))

	workloads(byName, fixed, idleLogBytes, target)
}

// workloads prints two reference workloads' monthly cost behind each
// front door, beside Glue Data Catalog's request prices and a per-file
// delete loop for the purges, and the front door's targets (SPEC §8).
func workloads(op map[string]opRow, fixed, idleLogBytes float64, target func(string, bool, string)) {
	type workload struct {
		name                  string
		tables                float64
		loads, commits        float64
		purges, filesPerPurge float64
	}
	ws := []workload{
		{name: "small: 100 tables, 1M loads, 20K commits", tables: 100, loads: 1e6, commits: 20e3},
		{name: "large: 10,000 tables, 100M loads, 2M commits, 1,000 purges of 100K files", tables: 10_000, loads: 100e6, commits: 2e6, purges: 1000, filesPerPurge: 100e3},
	}
	// A process reads its grants again once per TTL: a load in every
	// 5 s of each warm environment; counted here as 1 in 100 loads.
	loadCost := func(d frontDoor) float64 {
		return 0.99*op["load (grants cached)"].cost(d) + 0.01*op[loadRefreshed].cost(d)
	}
	purgeRow, commitRow := op["drop + purge, per 1,000 files"], op["commit"]
	monitoring := stackDashboards*prices.dashboardMonth + stackAlarms*prices.alarmMonth
	fmt.Printf("\n== monthly cost of reference workloads, USD (list prices %s, no free tier) ==\n", prices.date)
	fmt.Printf("%-80s %9s %9s %9s %9s %9s %9s\n", "", "loads", "commits", "purges", "fixed", "watch", "total")
	type month struct{ total, purges, glue, glueCatalog, loop float64 }
	months := map[string]month{}
	for _, w := range ws {
		purgeUnits := w.purges * w.filesPerPurge / 1000
		storage := w.tables * 10e3 / 1e9 * prices.dynamoGBMonth // ~10 KB of items a table
		logGB := (w.loads*op["load (grants cached)"].logBytes() + w.commits*commitRow.logBytes() + purgeUnits*purgeRow.logBytes() + idleLogBytes) / 1e9
		watch := monitoring + logGB*prices.logsPerGB
		// Glue: a load is a GetTable, a commit a GetTable and an UpdateTable
		// (Iceberg's GlueTableOperations), a table and its database objects.
		glueObj := (w.tables + w.tables/100) / 100e3 * prices.glueObjectsPer100K
		glueCatalog := (w.loads+2*w.commits)*prices.glueRequestsPerM/1e6 + glueObj
		// A per-file delete loop (iceberg-go's Table.PurgeFiles): a HEAD and a
		// DELETE a file (DELETE is free; HEAD a GET-class request), run by the
		// client at the rate bench/s3model measured (338 files/s).
		loopUSD := w.purges * w.filesPerPurge * prices.s3Tier2PerK / 1e3
		loopHours := w.purges * w.filesPerPurge / 338 / 3600
		for _, d := range doors {
			loads, commits, purges := w.loads*loadCost(d), w.commits*commitRow.cost(d), purgeUnits*purgeRow.cost(d)
			total := loads + commits + purges + fixed + storage + watch
			fmt.Printf("%-80s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f\n", "icehold, "+d.name+", "+w.name, loads, commits, purges, fixed+storage, watch, total)
			months[d.name+" "+w.name] = month{total: total, purges: purges, glue: glueCatalog + loopUSD, glueCatalog: glueCatalog, loop: loopUSD}
		}
		fmt.Printf("%-80s %9.2f %9.2f %9s %9.2f %9.2f %9.2f\n", "  Glue Data Catalog requests + objects (purges by the client)", w.loads*prices.glueRequestsPerM/1e6,
			2*w.commits*prices.glueRequestsPerM/1e6, fmt.Sprintf("%.2f", loopUSD), glueObj, 0.0, glueCatalog+loopUSD)
		if w.purges > 0 {
			fmt.Printf("  the purges through a per-file delete loop: %.0f HEAD + %.0f DELETE requests, $%.2f of S3 requests and %.0f client-hours at 338 files/s; icehold: $%.2f\n",
				w.purges*w.filesPerPurge, w.purges*w.filesPerPurge, loopUSD, loopHours, purgeUnits*purgeRow.cost(httpAPI))
		}
	}
	fmt.Printf("(fixed: the schedules' idle runs, the delete queue's idle polling and ~10 KB of DynamoDB items a table; watch: %d dashboard ($%.2f),\n"+
		" %d alarms ($%.2f each) and CloudWatch Logs ingestion at $%.2f/GB of %d bytes an API request (access log) and %d an invocation\n"+
		" (Lambda's lines); CloudWatch's always-free tier (3 dashboards, 10 alarms, 5 GB of logs a month) would cover them in an account\n"+
		" without others. Glue bills no compute for a catalog, and its purges are the client's: the loop's requests and the hours of\n"+
		" whatever runs it)\n", stackDashboards, prices.dashboardMonth, stackAlarms, prices.alarmMonth, prices.logsPerGB, accessLogBytes, lambdaLogBytes)
	small, large := months["HTTP API "+ws[0].name], months["HTTP API "+ws[1].name]
	target("small workload's month on the HTTP API ≤ 2 × Glue's", small.total <= 2*small.glue,
		fmt.Sprintf("$%.2f, Glue $%.2f; %.2f of it the dashboard and alarms", small.total, small.glue, monitoring))
	saved := large.loop - large.purges
	target("large workload's month on the HTTP API ≤ Glue's + what its purges save", large.total <= large.glueCatalog+saved,
		fmt.Sprintf("$%.2f; Glue's requests and objects $%.2f + $%.2f (the loop's S3 requests less icehold's purges; its client-hours not priced)", large.total, large.glueCatalog, saved))
}
