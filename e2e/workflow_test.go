package e2e

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// memoryDir asks ownServer for a server that keeps nothing on disk.
const memoryDir = ":memory:"

// ownServer starts a local server of the test's own (its clock, timeouts).
func ownServer(t *testing.T, o server.Options) (*server.Server, *rest.Catalog) {
	t.Helper()
	switch o.Dir {
	case "":
		o.Dir = t.TempDir()
	case memoryDir:
		o.Dir = ""
	}
	srv, err := server.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	cat, err := rest.NewCatalog(context.Background(), "icehold", srv.Info.RESTURL,
		rest.WithOAuthToken(srv.Info.AdminToken), rest.WithWarehouseLocation(srv.Info.Catalog))
	if err != nil {
		t.Fatal(err)
	}
	return srv, cat
}

// jobOf reads a job of the server's catalog straight from the store.
func jobOf(t *testing.T, srv *server.Server, id string) store.Job {
	t.Helper()
	j, err := srv.Catalog.Store().GetJob(context.Background(), srv.Info.Catalog, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func waitFor(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
	}
}

// dropOn drops a table with purge on a server and returns its job.
func dropOn(t *testing.T, srv *server.Server, cat *rest.Catalog, ns string) store.Job {
	t.Helper()
	if err := cat.PurgeTable(context.Background(), table.Identifier{ns, "t"}); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := srv.Catalog.Store().ListJobs(context.Background(), srv.Info.Catalog, "", 100)
	if err != nil || len(jobs) == 0 {
		t.Fatalf("no job: %v", err)
	}
	return jobs[len(jobs)-1]
}

// historyLen counts an execution's events through GetExecutionHistory.
func historyLen(t *testing.T, srv *server.Server, execution string) int {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{SFN: srv.Info.StepFns, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	p := sfn.NewGetExecutionHistoryPaginator(awsconfig.SFN(cfg, ep), &sfn.GetExecutionHistoryInput{
		ExecutionArn: aws.String(purge.ExecutionARN(srv.Purge.StateMachineARN, execution)), MaxResults: 1000,
	})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Events)
	}
	return n
}

// A batch sits in the DLQ for 72 hours (the engine's clock advanced, with
// reconcile's heartbeats every 5 minutes): the execution waits on one task,
// its history does not grow, no restart is spent; after the redrive the same
// execution finishes with exact counters.
func TestPurgeWaitsSeventyTwoHoursOnADeadLetter(t *testing.T) {
	embeddedAWS(t)
	ctx := context.Background()
	clock := emulators.NewManualClock(time.Now())
	srv, cat := ownServer(t, server.Options{
		Visibility: time.Second, MaxReceives: 2, TimeScale: 1, Clock: clock,
		ReconcileEvery: time.Hour, // driven by hand here
		DeleteWorkers:  2,
	})
	ns := uniq("wait")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl := writtenTableOn(t, cat, ns)
	data, meta := reachable(t, tbl)
	srv.S3Emulator.SetFault(&emulators.Fault{Match: emulators.IsDeleteObjects, Status: http.StatusForbidden, Code: "AccessDenied"})
	job := dropOn(t, srv, cat, ns)
	waitFor(t, "the job to be dead-lettered", 30*time.Second, func() bool { return jobOf(t, srv, job.ID).State == store.JobDeadLettered })
	waitFor(t, "the workflow to wait on its token", 10*time.Second, func() bool { return jobOf(t, srv, job.ID).TaskToken != "" })
	before := historyLen(t, srv, job.ID)
	for range 72 * 12 { // 72 hours, a reconcile every 5 minutes
		clock.Advance(5 * time.Minute)
		if _, err := srv.Purge.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after := historyLen(t, srv, job.ID)
	j := jobOf(t, srv, job.ID)
	t.Logf("history: %d events before the 72 hours, %d after; attempts %d", before, after, j.Attempts)
	if after != before || j.Attempts != 1 || j.State != store.JobDeadLettered {
		t.Fatalf("after 72 hours: %d events (was %d), attempts %d, state %s", after, before, j.Attempts, j.State)
	}
	srv.S3Emulator.SetFault(nil)
	waitFor(t, "the dead batch to reach the DLQ", 10*time.Second, func() bool {
		n, _ := srv.QueueDepth(ctx, true)
		return n > 0
	})
	if err := srv.Redrive(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to succeed after the redrive", 30*time.Second, func() bool { return jobOf(t, srv, job.ID).State == store.JobSucceeded })
	done := jobOf(t, srv, job.ID)
	if want := int64(len(data) + len(meta)); done.FilesDeleted != want || done.BatchesDead != 0 || done.Attempts != 1 || done.Execution != job.ID {
		t.Errorf("counters: deleted %d (want %d), dead %d, attempts %d, execution %s", done.FilesDeleted, want, done.BatchesDead, done.Attempts, done.Execution)
	}
}

// writtenTableOn makes ns.t with a few appends (several manifests).
func writtenTableOn(t *testing.T, cat *rest.Catalog, ns string) *table.Table {
	t.Helper()
	tbl, err := cat.CreateTable(context.Background(), table.Identifier{ns, "t"}, eventSchema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		tbl = appendRows(t, tbl, rows(t, i*5, 5, false))
	}
	return tbl
}

// A delete invocation that never answers (a Lambda timeout, an out-of-memory
// kill) on every receive: SQS dead-letters the message without the handler
// marking anything. One reconcile run shows the job DEAD_LETTERED with the
// reason and publishes PurgeDeadLettered once; the redrive completes it.
func TestBatchDeadLetteredByTimeoutShowsOnTheJob(t *testing.T) {
	ctx := context.Background()
	srv, cat := ownServer(t, server.Options{
		Visibility: time.Second, MaxReceives: 2, TimeScale: 0.01, DeleteTimeout: 500 * time.Millisecond,
		ReconcileEvery: time.Hour, DeleteWorkers: 2, BatchManifests: 100,
	})
	ns := uniq("hang")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	writtenTableOn(t, cat, ns)
	var hangs atomic.Bool
	hangs.Store(true)
	srv.Purge.SetCrash(func(point string) error {
		if point == "delete.start" && hangs.Load() {
			select {} // never answers; the poller's timeout abandons it
		}
		return nil
	})
	job := dropOn(t, srv, cat, ns)
	waitFor(t, "the message in the DLQ", 30*time.Second, func() bool {
		n, _ := srv.QueueDepth(ctx, true)
		return n > 0
	})
	if j := jobOf(t, srv, job.ID); j.State == store.JobDeadLettered {
		t.Fatalf("the job was dead-lettered by a handler that never answered")
	}
	time.Sleep(1100 * time.Millisecond) // the last receive's lease runs out
	rep, err := srv.Purge.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j := jobOf(t, srv, job.ID)
	if rep.DeadLettered != 1 || j.State != store.JobDeadLettered || j.BatchesDead != 1 || j.LastError == "" {
		t.Fatalf("after one reconcile: %+v, job %s dead %d error %q", rep, j.State, j.BatchesDead, j.LastError)
	}
	t.Logf("last-error: %s", j.LastError)
	if rep, _ := srv.Purge.Reconcile(ctx); rep.DeadLettered != 0 {
		t.Errorf("a second reconcile marked it again")
	}
	hangs.Store(false)
	if err := srv.Redrive(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to succeed after the redrive", 30*time.Second, func() bool { return jobOf(t, srv, job.ID).State == store.JobSucceeded })
	if j := jobOf(t, srv, job.ID); j.BatchesDead != 0 || j.BatchesDone != j.BatchesTotal {
		t.Errorf("after the redrive: dead %d, done %d of %d", j.BatchesDead, j.BatchesDone, j.BatchesTotal)
	}
}

// Defect: a redriven batch that checkpointed once and then failed lost the
// dead counter (the checkpoint cleared its dead flag, the job's count stayed),
// so the job could never finish. The step that revives a batch now drops
// the count in the same transaction.
func TestRedrivenBatchPartialRetryKeepsTheDeadCount(t *testing.T) {
	embeddedAWS(t)
	ctx := context.Background()
	srv, cat := ownServer(t, server.Options{
		Visibility: time.Second, MaxReceives: 2, TimeScale: 0.01, ReconcileEvery: time.Hour,
		DeleteWorkers: 1, BatchManifests: 100, // one batch of several manifests: a checkpoint each
	})
	ns := uniq("partial")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	writtenTableOn(t, cat, ns)
	srv.S3Emulator.SetFault(&emulators.Fault{Match: emulators.IsDeleteObjects, Status: http.StatusForbidden, Code: "AccessDenied"})
	job := dropOn(t, srv, cat, ns)
	waitFor(t, "the job to be dead-lettered", 30*time.Second, func() bool { return jobOf(t, srv, job.ID).State == store.JobDeadLettered })
	waitFor(t, "the dead batch in the DLQ", 10*time.Second, func() bool {
		n, _ := srv.QueueDepth(ctx, true)
		return n > 0
	})
	srv.S3Emulator.SetFault(nil)
	// The redriven delivery checkpoints once, then fails; the next finishes.
	var checkpoints atomic.Int32
	srv.Purge.SetCrash(func(point string) error {
		if point == "delete.before-checkpoint" && checkpoints.Add(1) == 2 {
			return errors.New("crash after the first checkpoint")
		}
		return nil
	})
	if err := srv.Redrive(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to succeed", 30*time.Second, func() bool { return jobOf(t, srv, job.ID).State == store.JobSucceeded })
	if j := jobOf(t, srv, job.ID); j.BatchesDead != 0 || checkpoints.Load() < 3 {
		t.Errorf("batches-dead %d after %d checkpoints, want 0 after at least 3", j.BatchesDead, checkpoints.Load())
	}
}

// A batch longer than the delete function's timeout is not dead-lettered
// for being long: before the deadline the delete step checkpoints and
// continues the batch in a new message. With one receive allowed, a batch
// that timed out even once would be dead.
func TestLongBatchContinuesBeforeTheDeadline(t *testing.T) {
	ctx := context.Background()
	srv, cat := ownServer(t, server.Options{
		Visibility: 2 * time.Second, MaxReceives: 1, TimeScale: 0.01, DeleteTimeout: 1200 * time.Millisecond, DeleteMargin: 500 * time.Millisecond,
		ReconcileEvery: time.Hour, DeleteWorkers: 1, BatchManifests: 100, // one batch of many manifests
	})
	ns := uniq("long")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.CreateTable(ctx, table.Identifier{ns, "t"}, eventSchema)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 16 { // 16 manifests: a checkpoint each
		tbl = appendRows(t, tbl, rows(t, i, 1, false))
	}
	data, meta := reachable(t, tbl)
	var checkpoints atomic.Int32
	srv.Purge.SetCrash(func(point string) error {
		if point == "delete.before-checkpoint" {
			checkpoints.Add(1)
			time.Sleep(100 * time.Millisecond) // 16 of them: longer than the timeout
		}
		return nil
	})
	job := dropOn(t, srv, cat, ns)
	waitFor(t, "the job to end", 60*time.Second, func() bool { return store.Terminal(jobOf(t, srv, job.ID).State) })
	j := jobOf(t, srv, job.ID)
	if j.State != store.JobSucceeded || j.BatchesDead != 0 || j.BatchesTotal != 1 || j.FilesDeleted != int64(len(data)+len(meta)) {
		t.Errorf("a long batch: %s, %d of %d batches done, %d dead, %d files deleted (want %d)", j.State, j.BatchesDone, j.BatchesTotal, j.BatchesDead, j.FilesDeleted, len(data)+len(meta))
	}
	t.Logf("%d checkpoints across the deliveries of one batch", checkpoints.Load())
}

// Defect: a batch whose last allowed receive continued into a new message
// (its deadline near) left its in-flight record behind; when the new message
// waited in the queue longer than the visibility timeout, reconcile took the
// record for a delivery that died and marked the healthy batch dead (the
// job DEAD_LETTERED, PurgeDeadLettered published). The test plays the event
// source mapping, so the new message waits as long as it likes.
func TestContinuedLastReceiveIsNotDeadLettered(t *testing.T) {
	ctx := context.Background()
	var ahead atomic.Int64 // how far the pipeline's clock runs ahead
	srv, cat := ownServer(t, server.Options{
		Visibility: time.Second, MaxReceives: 1, TimeScale: 0.01, ReconcileEvery: time.Hour,
		DeleteWorkers: -1, BatchManifests: 100, DeleteMargin: time.Hour,
		Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) },
	})
	ns := uniq("cont")
	if err := cat.CreateNamespace(ctx, table.Identifier{ns}, nil); err != nil {
		t.Fatal(err)
	}
	tbl := writtenTableOn(t, cat, ns)
	data, meta := reachable(t, tbl)
	job := dropOn(t, srv, cat, ns)
	ep := awsconfig.Endpoints{SQS: srv.Info.SQS, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, _ := awsconfig.Load(ctx, ep)
	queue := awsconfig.SQS(cfg, ep)
	deliver := func(dl time.Time) {
		t.Helper()
		out, err := queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(srv.Info.DeleteQueue), MaxNumberOfMessages: 1,
			WaitTimeSeconds: 10, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount}})
		if err != nil || len(out.Messages) != 1 {
			t.Fatalf("receive: %v, %d messages", err, len(out.Messages))
		}
		m := out.Messages[0]
		attrs := map[string]string{}
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		hctx, cancel := context.WithDeadline(ctx, dl)
		defer cancel()
		res, err := srv.Purge.HandleSQS(hctx, queue, srv.Purge.Queue, events.SQSEvent{Records: []events.SQSMessage{{
			MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body), Attributes: attrs,
		}}})
		if err != nil || len(res.BatchItemFailures) != 0 {
			t.Fatalf("delivery failed: %v %+v", err, res)
		}
		if _, err := queue.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(srv.Info.DeleteQueue), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	// The only receive allowed: its deadline is within the margin at once,
	// so it checkpoints and continues in a new message.
	deliver(time.Now().Add(time.Minute))
	if j := jobOf(t, srv, job.ID); j.BatchesDone != 0 || j.BatchesTotal != 1 {
		t.Fatalf("the first delivery did not continue: %d of %d batches done", j.BatchesDone, j.BatchesTotal)
	}
	// The new message waits longer than the visibility timeout.
	ahead.Store(int64(5 * time.Second))
	rep, err := srv.Purge.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j := jobOf(t, srv, job.ID); rep.DeadLettered != 0 || j.State != store.JobRunning || j.BatchesDead != 0 {
		t.Fatalf("reconcile while the continuation waits: %d marked dead, job %s with %d dead batches (%q)", rep.DeadLettered, j.State, j.BatchesDead, j.LastError)
	}
	deliver(time.Now().Add(time.Hour * 2)) // the continuation finishes the batch
	waitFor(t, "the job to end", 30*time.Second, func() bool { return store.Terminal(jobOf(t, srv, job.ID).State) })
	if j := jobOf(t, srv, job.ID); j.State != store.JobSucceeded || j.BatchesDead != 0 || j.FilesDeleted != int64(len(data)+len(meta)) {
		t.Errorf("job %s, %d dead batches, %d files deleted (want %d)", j.State, j.BatchesDead, j.FilesDeleted, len(data)+len(meta))
	}
}
