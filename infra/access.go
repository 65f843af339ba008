package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// What each function's role may do, in one place. Every grant follows from
// the function's code (docs/design/infra.md, "Least privilege"); the stack tests
// pin the exact set per role, and infra/oracle_test.go runs each function's
// code against the local emulators and checks every AWS call it makes
// against the synthesized policy of its role.

// DynamoDB. IAM has no TransactWriteItems action: a transaction needs the
// action of each of its items (Put → PutItem, Update → UpdateItem, Delete →
// DeleteItem, ConditionCheck → ConditionCheckItem). The store
// (shared/store.DynamoDB) calls GetItem, PutItem, UpdateItem, DeleteItem,
// Query, TransactWriteItems and BatchWriteItem; Scan only in the one-off
// migration run by the CLI, never by a function. No role holds Scan,
// BatchGetItem, DescribeTable, the stream actions or any table management.
var (
	// routerTableActions: the api and drop functions serve the router,
	// which reads and writes every record kind but never batch-writes.
	routerTableActions = []string{"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"}
	// planTableActions: reads the job and its catalog, writes the batches
	// (BatchWriteItem), moves the job (a transaction of updates; on a
	// permanent failure also the deletes of its marker and tombstone, the
	// release of its claim and the Put of its PurgeFailed event). No Query.
	planTableActions = []string{"GetItem", "PutItem", "BatchWriteItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"}
	// progressTableActions: the WaitForBatches task stores its callback token
	// on the job (a guarded update).
	progressTableActions = []string{"GetItem", "UpdateItem"}
	// deleteTableActions: reads jobs, batches and location claims, lists a
	// job's batches (finalize), moves checkpoints and counters, and ends the
	// job (deletes its marker and tombstone, releases its claim).
	// It also records each batch's delivery (PutItem of the in-flight marker).
	deleteTableActions = []string{"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"}
	// A step that changes a job (the plan when it fails one, the delete
	// step, reconcile, hold expiry) records the change's lifecycle event in
	// the same transaction: a Put of an OUTBOX item (docs/design/purge.md, "Events").
	// reconcileTableActions: lists the active-job markers and in-flight
	// batches, reads jobs and batches, renames executions, marks batches
	// dead, fails jobs past their attempts. The orphan sweep in the same
	// run queries stale intents, writes an orphans job (a transaction of
	// Puts) with its batches (BatchWriteItem) and deletes the intents. Then
	// it relays what the outbox still holds (Query, DeleteItem, PutEvents).
	reconcileTableActions = []string{"GetItem", "Query", "PutItem", "BatchWriteItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"}
)

// Partition keys of the record kinds (docs/design/store.md, the record store),
// as dynamodb:LeadingKeys patterns. The four pipeline functions are held
// to the kinds they touch; the router functions touch every kind.
const (
	pkJob       = "JOB#*"      // purge jobs
	pkBatch     = "BATCH#*"    // delete batches
	pkActiveJob = "ACTIVEJOB"  // markers of unfinished jobs
	pkTable     = "TBL#*"      // tombstones (and table entries: one partition per namespace)
	pkClaim     = "LOC#*"      // location claims
	pkCatalog   = "CATALOG#*"  // catalogs (the plan reads purge.delete-scope)
	pkInFlight  = "INFLIGHT#*" // deliveries of batches not finished yet
	pkSoft      = "SOFT#*"     // soft-deleted records
	pkExpiry    = "SOFTEXP"    // their expiry index
	pkPace      = "PACE#*"     // the delete fleet's shared per-prefix pace
	pkIntent    = "INTENT#*"   // pending metadata writes (the orphan sweep)
	pkNamespace = "NS#*"       // namespaces (a missing entry's namespace is looked up)
	pkOutbox    = "OUTBOX"     // lifecycle events not yet relayed to the bus
	pkFailedJob = "FAILEDJOB"  // FAILED jobs keeping their claims (plan's finalize and reconcile fail jobs)
	// partition retention policies and the sweep's cursor
	pkRetention, pkRetentionSweep = "RETENTION", "RETSWEEP"
)

// holdExpiryTableActions: reads due records (a query of the expiry index),
// ends each in a transaction that may create a purge job (Put) and moves
// or releases its location claim.
var holdExpiryTableActions = []string{"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"}

// retentionTableActions: reads policies (Query), entries and namespaces
// (GetItem), writes the sweep's cursor (PutItem), commits (UpdateItem of the
// entry's pointer) and marks policies applied (UpdateItem). A commit first
// records its metadata file's intent (PutItem) and retires it in the commit's
// transaction (DeleteItem). Snapshot expiry writes its job's batches
// (BatchWriteItem; deletes them when its commit is refused), reads the
// catalog (purge.delete-scope) and creates the job and its marker in the
// commit's transaction (PutItem).
var retentionTableActions = []string{"GetItem", "Query", "PutItem", "BatchWriteItem", "UpdateItem", "DeleteItem"}

var (
	planKeys     = []string{pkJob, pkBatch, pkCatalog, pkActiveJob, pkTable, pkClaim, pkOutbox, pkFailedJob}
	progressKeys = []string{pkJob}
	// The delete step of an orphans job reads the owner of each file (a
	// table entry, a soft-deleted record or a job) before deleting it.
	deleteKeys    = []string{pkJob, pkBatch, pkActiveJob, pkTable, pkClaim, pkInFlight, pkPace, pkSoft, pkOutbox}
	reconcileKeys = []string{pkJob, pkBatch, pkActiveJob, pkTable, pkClaim, pkInFlight, pkIntent, pkOutbox, pkFailedJob}
	expiryKeys    = []string{pkSoft, pkExpiry, pkJob, pkActiveJob, pkClaim, pkCatalog, pkOutbox}
	retentionKeys = []string{pkRetention, pkRetentionSweep, pkTable, pkNamespace, pkIntent, pkJob, pkBatch, pkActiveJob, pkCatalog, pkOutbox}
	// The outbox function reads pending events and deletes each once sent.
	outboxTableActions = []string{"Query", "DeleteItem"}
	outboxKeys         = []string{pkOutbox}
)

// metadataObjects: the only objects the catalog writes, and the only ones
// engines may not (`<location>/metadata/<version>-<uuid>.metadata.json`;
// Iceberg's gzip codec names them `….gz.metadata.json`).
const metadataObjects = "*.metadata.json"

// metadataFolders: what sits in a table's metadata/ folder (metadata files,
// manifest lists, manifests), at any depth of the warehouse.
const metadataFolders = "*/metadata/*"

// legacyGzipMetadata: Iceberg's older gzip name, which register may be
// given. The two are every name register reads as metadata
// (credentials.MetadataSuffixes): engines may write neither.
const legacyGzipMetadata = "*.metadata.json.gz"

// Delete function concurrency (docs/design/infra.md, Delete function
// concurrency). The event source mapping runs at most deleteMaxConcurrency
// batches at once (SPEC §3: it bounds the deleters on one prefix). By
// default the function reserves nothing: Lambda refuses a reservation that
// leaves the account less than 100 unreserved, which a new account's quota
// cannot give. A reservation, where an account wants one (to cap the purge's
// share of the account, or to guarantee it), must leave room for the state
// machine's finalize and mark-failed invocations of the same function
// (finalizeHeadroom) beside the mapping's, so that the mapping is never
// throttled by its own function (a throttled SQS invocation counts a receive
// and could dead-letter a healthy batch): the mapping's maximum shrinks to
// fit a small one.
const (
	deleteMaxConcurrency = 50
	finalizeHeadroom     = 10
)

// deleteConcurrency is the delete function's reserved concurrency (0: none)
// and its event source mapping's maximum concurrency.
func deleteConcurrency(reserved int) (int, int) {
	if reserved == 0 {
		return 0, deleteMaxConcurrency
	}
	return reserved, min(deleteMaxConcurrency, reserved-finalizeHeadroom)
}

func actions(service string, names ...string) *[]*string {
	out := make([]*string, len(names))
	for i, n := range names {
		out[i] = jsii.String(service + ":" + n)
	}
	return &out
}

// allow adds one Allow statement to a function's role.
func allow(fn awslambda.Function, acts *[]*string, resources ...string) awsiam.PolicyStatement {
	st := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: acts, Resources: jsii.Strings(resources...)})
	fn.AddToRolePolicy(st)
	return st
}

// grantTable gives a function the DynamoDB actions on the one table,
// limited to partition keys matching leadingKeys when given.
func (s *Stack) grantTable(fn awslambda.Function, acts []string, leadingKeys []string) {
	st := allow(fn, actions("dynamodb", acts...), *s.Table.TableArn())
	if len(leadingKeys) > 0 {
		st.AddCondition(jsii.String("ForAllValues:StringLike"), map[string]any{"dynamodb:LeadingKeys": leadingKeys})
	}
}

// KMS (with a customer managed key, Props.KMSKeyARN): the services whose
// calls use the key on a role's behalf, each held to its service by
// kms:ViaService. DynamoDB decrypts the table key with the caller's
// authority on every read or write of the table or its stream (it encrypts
// items with that key itself: no kms:Encrypt); S3 decrypts an object read
// (and the parts of a multipart upload) and generates a data key for an
// object written; SQS generates a data key for a message sent and decrypts
// one received or sent (its data key is reused for a while). Deleting an
// object or a message, listing and queue attributes use no key.
const (
	viaDynamoDB = "dynamodb"
	viaS3       = "s3"
	viaSQS      = "sqs"
)

// grantKey gives fn the KMS actions its calls through those services need;
// nothing without a customer managed key.
func (s *Stack) grantKey(fn awslambda.Function, decryptVia, generateVia []string) {
	for _, st := range s.keyStatements(decryptVia, generateVia) {
		fn.AddToRolePolicy(st)
	}
}

func (s *Stack) keyStatements(decryptVia, generateVia []string) []awsiam.PolicyStatement {
	if s.Key == nil {
		return nil
	}
	var out []awsiam.PolicyStatement
	for _, g := range []struct {
		action string
		via    []string
	}{{"Decrypt", decryptVia}, {"GenerateDataKey", generateVia}} {
		if len(g.via) == 0 {
			continue
		}
		services := make([]string, len(g.via))
		for i, v := range g.via {
			services[i] = v + "." + *s.Stack.Region() + ".amazonaws.com"
		}
		st := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{Actions: actions("kms", g.action), Resources: jsii.Strings(*s.Key.KeyArn())})
		st.AddCondition(jsii.String("StringEquals"), map[string]any{"kms:ViaService": services})
		out = append(out, st)
	}
	return out
}

func via(services ...string) []string { return services }

// objects are the ARNs of the warehouse buckets' objects matching pattern.
func (s *Stack) objects(pattern string) []string {
	out := make([]string, len(s.Buckets))
	for i, b := range s.Buckets {
		out[i] = *b.ArnForObjects(jsii.String(pattern))
	}
	return out
}

// bucketArns are the warehouse buckets' ARNs.
func (s *Stack) bucketArns() []string {
	out := make([]string, len(s.Buckets))
	for i, b := range s.Buckets {
		out[i] = *b.BucketArn()
	}
	return out
}

// grantAccess is every function's role.
func (s *Stack) grantAccess() {
	objects := s.objects("*")
	buckets := s.bucketArns()

	// api: the catalog. Writes metadata files only (commit, register) and
	// never deletes; reads them, and the manifest lists and manifests in
	// a metadata/ folder (a commit's path check reads the new snapshots';
	// docs/design/store.md), never a data file. ListBucket makes a missing
	// metadata file a 404 (register answers 400) instead of a 403.
	metadata := s.objects(metadataObjects)
	s.grantTable(s.APIFn, routerTableActions, nil)
	allow(s.APIFn, actions("s3", "GetObject"), append(append(s.objects(metadataObjects), s.objects(legacyGzipMetadata)...), s.objects(metadataFolders)...)...)
	// AbortMultipartUpload: the SDK's uploader writes a file over 5 MB in
	// parts and aborts the upload when a part fails; without it the parts
	// stay (and are billed) until a lifecycle rule clears them.
	allow(s.APIFn, actions("s3", "PutObject", "AbortMultipartUpload"), metadata...)
	allow(s.APIFn, actions("s3", "ListBucket"), buckets...)
	s.grantKey(s.APIFn, via(viaDynamoDB, viaS3), via(viaS3))

	// drop: one transaction (with its two events), a StartExecution. No S3.
	s.grantTable(s.DropFn, routerTableActions, nil)
	s.PurgeMachine.GrantStartExecution(s.DropFn)
	s.grantKey(s.DropFn, via(viaDynamoDB), nil)

	// purge-plan: reads the metadata and manifest lists (ListBucket: a
	// missing metadata file fails the job at once, not after retries).
	s.grantTable(s.PlanFn, planTableActions, planKeys)
	allow(s.PlanFn, actions("s3", "GetObject"), objects...)
	allow(s.PlanFn, actions("s3", "ListBucket"), buckets...)
	// It enqueues the batches (SendMessageBatch is authorized as SendMessage).
	allow(s.PlanFn, actions("sqs", "SendMessage"), *s.DeleteQueue.QueueArn())
	s.grantKey(s.PlanFn, via(viaDynamoDB, viaS3, viaSQS), via(viaSQS))

	// purge-progress (the WaitForBatches task): stores the callback token.
	s.grantTable(s.ProgressFn, progressTableActions, progressKeys)
	s.grantKey(s.ProgressFn, via(viaDynamoDB), nil)

	// delete: the only role that deletes objects. Reads manifests and
	// metadata, deletes with DeleteObjects (authorized per key as
	// s3:DeleteObject), extends its message's lease; the event source
	// mapping polls with the function's role (ReceiveMessage,
	// DeleteMessage, GetQueueAttributes).
	s.grantTable(s.DeleteFn, deleteTableActions, deleteKeys)
	allow(s.DeleteFn, actions("s3", "GetObject", "DeleteObject"), objects...)
	// ListBucket: finalize lists a purged table's location and deletes
	// what no metadata reached (SPEC §3: SUCCEEDED means nothing is left).
	allow(s.DeleteFn, actions("s3", "ListBucket"), buckets...)
	// A versioned warehouse (shared/purge/versions.go): it reads the
	// bucket's versioning, lists versions and deletes them by id (the
	// bucket's guard lets this role alone delete versions).
	allow(s.DeleteFn, actions("s3", "DeleteObjectVersion"), objects...)
	allow(s.DeleteFn, actions("s3", "ListBucketVersions", "GetBucketVersioning"), buckets...)
	// SendMessage: a batch stopped before the function's deadline continues
	// in a new message. SendTaskSuccess: the invocation that completes the
	// last batch returns the waiting workflow's token.
	allow(s.DeleteFn, actions("sqs", "ReceiveMessage", "DeleteMessage", "GetQueueAttributes", "ChangeMessageVisibility", "SendMessage"), *s.DeleteQueue.QueueArn())
	allow(s.DeleteFn, actions("states", taskResponses...), s.purgeMachineARN())
	s.grantKey(s.DeleteFn, via(viaDynamoDB, viaS3, viaSQS), via(viaSQS))

	// reconcile: starts and inspects executions of the purge state machine
	// only (execution:<machine name>:*), fails jobs past their attempts.
	s.grantTable(s.ReconcileFn, reconcileTableActions, reconcileKeys)
	s.PurgeMachine.GrantStartExecution(s.ReconcileFn)
	s.PurgeMachine.GrantExecution(s.ReconcileFn, jsii.String("states:DescribeExecution"))
	// Heartbeats for a waiting execution, and a lost callback sent again.
	allow(s.ReconcileFn, actions("states", taskResponses...), s.purgeMachineARN())
	s.Bus.GrantPutEventsTo(s.ReconcileFn, nil) // the outbox backstop
	s.grantKey(s.ReconcileFn, via(viaDynamoDB), nil)

	// undrop: the router on the soft-delete routes (undrop puts the entry
	// back, purge-now makes a job and starts it). No S3 at all.
	s.grantTable(s.UndropFn, routerTableActions, nil)
	s.PurgeMachine.GrantStartExecution(s.UndropFn)
	s.grantKey(s.UndropFn, via(viaDynamoDB), nil)

	// hold-expiry: ends expired records and starts their purge jobs. No S3.
	s.grantTable(s.HoldExpiryFn, holdExpiryTableActions, expiryKeys)
	s.PurgeMachine.GrantStartExecution(s.HoldExpiryFn)
	s.grantKey(s.HoldExpiryFn, via(viaDynamoDB), nil)

	// partition-drop: the router on the partition routes (and verify,
	// repair). Reads the
	// metadata, manifest list and manifests and writes new manifests, a
	// manifest list and a metadata file, all under a table's metadata/
	// folder, where Iceberg writers put them: IAM as well as the code keeps
	// it from every data and delete file. Never deletes.
	s.grantTable(s.PartitionDropFn, routerTableActions, nil)
	tableMetadata := s.objects(metadataFolders)
	allow(s.PartitionDropFn, actions("s3", "GetObject", "PutObject", "AbortMultipartUpload"), tableMetadata...)
	allow(s.PartitionDropFn, actions("s3", "ListBucket"), buckets...)
	// verify and repair (the same routes' function; shared/partitions/
	// integrity.go): verify heads a referenced file outside the table's
	// prefixes; repair lists a damaged file's versions, reads one and
	// copies it back over the key. PutObject here is a copy only (the
	// x-amz-copy-source header is present): the function writes no new
	// bytes to a data file.
	allow(s.PartitionDropFn, actions("s3", "GetObject", "GetObjectVersion"), objects...)
	allow(s.PartitionDropFn, actions("s3", "ListBucketVersions"), buckets...)
	allow(s.PartitionDropFn, actions("s3", "PutObject"), objects...).
		AddCondition(jsii.String("Null"), map[string]any{"s3:x-amz-copy-source": "false"})
	s.grantKey(s.PartitionDropFn, via(viaDynamoDB, viaS3), via(viaS3))

	// retention: walks the policies (a query, its cursor), reads each
	// table's entry (and its namespace when the entry is gone) and drops
	// through the catalog's commit (an update of the entry) like the route;
	// marks the policy applied. The same S3 as the partition-drop function.
	// Snapshot expiry deletes nothing either: it commits the removal with a
	// job of kind expire and starts the purge machine on it, whose plan
	// step enqueues the batches and whose delete function deletes.
	s.grantTable(s.RetentionFn, retentionTableActions, retentionKeys)
	allow(s.RetentionFn, actions("s3", "GetObject", "PutObject", "AbortMultipartUpload"), tableMetadata...)
	allow(s.RetentionFn, actions("s3", "ListBucket"), buckets...)
	s.PurgeMachine.GrantStartExecution(s.RetentionFn)
	s.grantKey(s.RetentionFn, via(viaDynamoDB, viaS3), via(viaS3))

	// outbox: woken by the table's stream, publishes pending events and
	// deletes each once sent. The only role besides reconcile that may put
	// events on the bus: every other function records them in DynamoDB.
	// The stream's actions are Table.grantStreamRead's, without the
	// unconditioned kms:Decrypt it adds for an encrypted table.
	s.grantTable(s.OutboxFn, outboxTableActions, outboxKeys)
	allow(s.OutboxFn, actions("dynamodb", "ListStreams"), "*")
	allow(s.OutboxFn, actions("dynamodb", "DescribeStream", "GetRecords", "GetShardIterator"), *s.Table.TableStreamArn())
	s.Bus.GrantPutEventsTo(s.OutboxFn, nil)
	s.grantKey(s.OutboxFn, via(viaDynamoDB), nil)

	// The state machine invokes the three step functions (the plan function
	// enqueues the batches itself: the workflow's role sends nothing).
	for _, fn := range []awslambda.Function{s.PlanFn, s.ProgressFn, s.DeleteFn} {
		fn.GrantInvoke(s.PurgeMachine)
	}
}

// taskResponses answer a waiting Task's token.
var taskResponses = []string{"SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"}

// purgeMachineARN is the purge state machine's ARN built from its fixed
// name (no reference to the machine: see the machine's props).
func (s *Stack) purgeMachineARN() string {
	return *awscdk.Stack_Of(s.PurgeMachine).FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("states"), Resource: jsii.String("stateMachine"), ResourceName: jsii.String(purgeMachineName(awscdk.Stack_Of(s.PurgeMachine))),
		ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// engineStatements: the engines' policy (Spark, Trino, …). They read and
// write data files, manifests and manifest lists; the catalog alone writes
// metadata files (a commit is a REST call), and nothing but the delete
// function deletes.
func (s *Stack) engineStatements() *[]awsiam.PolicyStatement {
	objects := s.objects("*")
	out := []awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("execute-api:Invoke"),
			Resources: jsii.Strings(s.executeAPIArns()...),
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload"),
			Resources: jsii.Strings(objects...),
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("s3:ListBucket", "s3:GetBucketLocation"),
			Resources: jsii.Strings(s.bucketArns()...),
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Effect:    awsiam.Effect_DENY,
			Actions:   jsii.Strings("s3:DeleteObject", "s3:DeleteObjectVersion"),
			Resources: jsii.Strings(objects...),
		}),
		// A metadata file is the table: overwriting one would change a
		// table behind the catalog's compare-and-swap and its grants.
		// PutObject also authorizes multipart uploads and copies into a key.
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Effect:    awsiam.Effect_DENY,
			Actions:   jsii.Strings("s3:PutObject"),
			Resources: jsii.Strings(append(s.objects(metadataObjects), s.objects(legacyGzipMetadata)...)...),
		}),
	}
	// Engines read and write objects under the key (SSE-KMS).
	out = append(out, s.keyStatements(via(viaS3), via(viaS3))...)
	return &out
}
