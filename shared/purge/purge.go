// Package purge deletes dropped tables' files asynchronously: the drop writes
// a durable job and starts a workflow; the plan step splits the table's
// manifests into batches; the delete step (behind the SQS queue) streams a
// batch's manifests and bulk-deletes what they reference; the finalize step
// removes manifests, manifest lists, statistics and metadata files last.
// Every step checkpoints in DynamoDB, so any crash resumes without loss or
// double counting.
package purge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/store"
)

// Workflow is the Step Functions calls the pipeline makes; *sfn.Client
// satisfies it, and so does the local engine's HTTP API through it.
type Workflow interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, optFns ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
	SendTaskSuccess(ctx context.Context, in *sfn.SendTaskSuccessInput, optFns ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error)
	SendTaskHeartbeat(ctx context.Context, in *sfn.SendTaskHeartbeatInput, optFns ...func(*sfn.Options)) (*sfn.SendTaskHeartbeatOutput, error)
}

// Sender enqueues batch messages on the delete queue (the plan step, and the
// delete step continuing a batch it stopped before its deadline).
type Sender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// BulkDeleter is the S3 calls of the delete function: DeleteObjects, the one
// call that deletes, and the listing of a purged table's location (finalize);
// only the delete and finalize steps hold it (and only their role may delete).
//
// On a versioned bucket (versions.go) it also reads the bucket's
// versioning and lists versions, to delete every version and delete
// marker of what it deletes.
type BulkDeleter interface {
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
	GetBucketVersioning(ctx context.Context, in *s3.GetBucketVersioningInput, optFns ...func(*s3.Options)) (*s3.GetBucketVersioningOutput, error)
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, optFns ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
}

// Lease extends an SQS message's visibility while its batch runs.
type Lease interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Service runs the purge pipeline's steps.
type Service struct {
	Store   *store.Store
	Catalog *catalog.Service
	// Workflow and StateMachineARN start executions (drop, reconcile).
	Workflow        Workflow
	StateMachineARN string
	// S3 deletes (delete and finalize steps only).
	S3 BulkDeleter
	// IOProps configure iceberg-go's FileIO for reading manifest lists and
	// manifests (locally: the embedded S3's endpoint and keys).
	IOProps map[string]string
	// Pacer paces DeleteObjects per prefix (AIMD); nil uses a default.
	Pacer *Pacer
	// Backoff is the first wait after a SlowDown (doubling; 0: 25 ms).
	Backoff time.Duration
	// MaxAttempts bounds workflow restarts before a job is FAILED.
	MaxAttempts int
	// Sender and Queue: the delete queue (URL, visibility, maxReceiveCount).
	Sender Sender
	Queue  QueueConfig
	// DeadlineMargin is how long before its invocation's deadline the
	// delete step stops and continues the batch in a new message (0: 15 s).
	DeadlineMargin time.Duration
	// Metrics receives CloudWatch EMF lines (stdout in Lambda); nil: none.
	Metrics Writer
	// BatchFiles and BatchManifests size the batches (0: the defaults).
	BatchFiles, BatchManifests int
	// Now is the clock of the orphan sweep and of the leases reconcile
	// checks (tests advance it); nil: time.Now.
	Now func() time.Time
	// Planners plan the jobs of a kind in steps of their own (the storage
	// sweep): the plan step calls it until it answers planned.
	Planners map[string]Planner
	// FileChecks decide, for the batches of a kind that name their files
	// and is neither orphans nor expire, which files may go.
	FileChecks map[string]FileCheck
	crashHook  atomic.Pointer[func(string) error]
	// versioning caches each bucket's versioning (versions.go).
	versioning sync.Map
}

// Planner runs one bounded step of planning a job (at most a few minutes
// of work) and says whether the job is planned: its batches written,
// Planned and BatchesTotal set on the job. An error wrapping ErrRefused
// fails the job with its message; any other is retried.
type Planner func(ctx context.Context, j store.Job) (planned bool, err error)

// FileCheck returns, for one batch, the check of each of its files (by
// its index in the batch): whether it may go now.
type FileCheck func(ctx context.Context, j store.Job, b store.Batch) (func(ctx context.Context, i int) (objects.Location, bool, error), error)

// ErrRefused: a job's input is refused (a planner found it unusable): the
// job fails with the reason and deletes nothing.
var ErrRefused = errors.New("refused")

// SetCrash installs a hook called at the pipeline's crash points; an error it
// returns stops the step there, as a crashed Lambda would (tests). nil clears.
func (s *Service) SetCrash(fn func(point string) error) {
	if fn == nil {
		s.crashHook.Store(nil)
		return
	}
	s.crashHook.Store(&fn)
}

// crash runs the crash hook at a named point.
func (s *Service) crash(point string) error {
	if fn := s.crashHook.Load(); fn != nil {
		return (*fn)(point)
	}
	return nil
}

// Errors of the pipeline.
var (
	ErrLegalHold = errors.New("table is under legal hold")
)

// Input is what every workflow step receives and passes on.
type Input struct {
	Catalog string `json:"catalog"`
	JobID   string `json:"job_id"`
	Cursor  int    `json:"cursor,omitempty"`
}

// BatchMessage is the body of one delete-queue message.
type BatchMessage struct {
	Catalog string `json:"catalog"`
	JobID   string `json:"job_id"`
	Batch   int    `json:"batch"`
}

// NewJobID returns a job id that sorts by creation time.
func NewJobID() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return fmt.Sprintf("pj-%013x-%s", time.Now().UnixMilli(), hex.EncodeToString(b))
}

// Drop is DELETE …?purgeRequested=true: one transaction (entry out, job
// PENDING in, tombstone in) and a StartExecution named after the job. O(1)
// whatever the table's size: no S3 call on the request path.
func (s *Service) Drop(ctx context.Context, cat string, id catalog.Ident) (store.Job, error) {
	var j store.Job
	for attempt := 0; ; attempt++ {
		e, err := s.Catalog.Entry(ctx, cat, id)
		if err != nil {
			return store.Job{}, err
		}
		switch held, err := s.Catalog.Held(ctx, cat, id.Namespace, e.LegalHold); {
		case err != nil:
			return store.Job{}, fmt.Errorf("drop %s with purge: %w", id, err)
		case held:
			return store.Job{}, fmt.Errorf("drop %s with purge: %s is set on it, one of its namespaces or its catalog: %w", id, catalog.PropLegalHold, ErrLegalHold)
		}
		j = store.Job{
			ID: NewJobID(), Kind: store.KindPurge, Catalog: cat, Namespace: id.Namespace, Table: id.Name, TableUUID: e.TableUUID,
			MetadataLocation: e.MetadataLocation, State: store.JobPending, Attempts: 1, CreatedBy: authz.Principal(ctx),
		}
		j.Execution = j.ID
		err = s.Store.DropForPurge(ctx, e, j, true, outbox.Records(
			JobEvent(eventbus.TablePermanentlyDeleted, j, map[string]any{"purge": true}), JobEvent(eventbus.PurgeStarted, j, nil))...)
		if errors.Is(err, store.ErrNotFound) && attempt < 5 {
			continue // a commit moved the pointer (or the entry went): drop what is there now
		}
		if errors.Is(err, store.ErrNotFound) {
			return store.Job{}, fmt.Errorf("drop %s: %w", id, catalog.ErrNoSuchTable)
		}
		if err != nil {
			return store.Job{}, fmt.Errorf("drop %s: %w", id, err)
		}
		break
	}
	// The job (and its events) are durable already: if this fails, the reconcile sweep starts it.
	if err := s.crash("drop.before-start"); err != nil {
		return j, nil
	}
	if err := s.Start(ctx, j); err != nil {
		slog.Warn("start purge execution; reconcile will retry", "job", j.ID, "error", err)
	}
	return j, nil
}

// Started starts the execution of a job made outside Drop (purge-now, hold
// expiry, the orphan sweep), whose creating transaction recorded its
// PurgeStarted event; if starting fails, reconcile starts it.
func (s *Service) Started(ctx context.Context, j store.Job) {
	if err := s.Start(ctx, j); err != nil {
		slog.Warn("start purge execution; reconcile will retry", "job", j.ID, "error", err)
	}
}

// Start starts the job's workflow execution (named after the job: idempotent).
func (s *Service) Start(ctx context.Context, j store.Job) error {
	if s.Workflow == nil {
		return errors.New("no workflow configured")
	}
	if err := s.crash("start"); err != nil {
		return err
	}
	in, _ := json.Marshal(Input{Catalog: j.Catalog, JobID: j.ID})
	_, err := s.Workflow.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(s.StateMachineARN),
		Name:            aws.String(j.Execution),
		Input:           aws.String(string(in)),
	})
	return err
}

// Job loads a job for a step; a job that is gone is an error worth failing.
func (s *Service) job(ctx context.Context, in Input) (store.Job, error) {
	j, err := s.Store.GetJob(ctx, in.Catalog, in.JobID)
	if err != nil {
		return j, fmt.Errorf("job %s/%s: %w", in.Catalog, in.JobID, err)
	}
	return j, nil
}

// Fail marks a job FAILED with the reason (the workflow's catch path, or
// attempts exhausted); the tombstone is lifted, and the job keeps its
// claims until an operator retries or abandons it (Retry, Abandon): its
// files may still be there, and no other table may take their prefix.
func (s *Service) Fail(ctx context.Context, in Input, reason string) error {
	j, err := s.job(ctx, in)
	if err != nil {
		return err
	}
	if store.Terminal(j.State) {
		return nil
	}
	err = s.Store.FailJob(ctx, j, reason, outbox.Records(JobEvent(eventbus.PurgeFailed, j, map[string]any{"reason": reason}))...)
	if errors.Is(err, store.ErrConditionFailed) {
		return nil // already terminal
	}
	if err == nil {
		s.emit(map[string]float64{"JobsFailed": 1})
	}
	return err
}

// JobEvent is a job's lifecycle event (recorded in the outbox by the
// transaction that makes the change it reports).
func JobEvent(typ string, j store.Job, detail map[string]any) eventbus.Event {
	if j.Kind != "" && j.Kind != store.KindPurge {
		if detail == nil {
			detail = map[string]any{}
		}
		detail["kind"] = j.Kind
	}
	return eventbus.Event{
		Type: typ, Actor: j.CreatedBy, Catalog: j.Catalog, Namespace: j.Namespace, Table: j.Table,
		TableUUID: j.TableUUID, JobID: j.ID, Detail: detail,
	}
}
