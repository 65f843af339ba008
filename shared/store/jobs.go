package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Purge job states (SPEC §3).
const (
	JobPending      = "PENDING"
	JobRunning      = "RUNNING"
	JobDeadLettered = "DEAD_LETTERED"
	JobSucceeded    = "SUCCEEDED"
	JobFailed       = "FAILED"
	JobCancelled    = "CANCELLED"
)

// Job kinds: a table's purge; the orphan sweep's deletion of metadata
// files no table references; snapshot expiry's deletion of the files only
// expired snapshots referenced; a view's permanent delete (its metadata
// files: no batches, the final listing of its location and its current
// metadata file); the storage sweep's deletion of orphan files and
// expired noncurrent versions an inventory report found.
// Orphans, expire and sweep batches name their files.
const (
	KindPurge   = "purge"
	KindOrphans = "orphans"
	KindExpire  = "expire"
	KindView    = "view"
	KindSweep   = "sweep"
)

// Kinds are the job kinds, for filters.
var Kinds = []string{KindPurge, KindOrphans, KindExpire, KindView, KindSweep}

// ListsFiles reports whether a kind's batches name their files (planned at
// creation, or by the sweep's own steps) instead of manifests to stream,
// and whether it has no metadata layer to finalize.
func ListsFiles(kind string) bool {
	return kind == KindOrphans || kind == KindExpire || kind == KindSweep
}

// Terminal reports whether a job state is final (it no longer blocks the name).
func Terminal(state string) bool {
	return state == JobSucceeded || state == JobFailed || state == JobCancelled
}

// ErrTombstoned: a create or register found a purge tombstone at the name.
var ErrTombstoned = errors.New("tombstoned by a purge job")

// Job is a purge job: the durable record of a table being deleted.
type Job struct {
	ID               string   `dynamodbav:"id"`
	Kind             string   `dynamodbav:"kind"` // "" (jobs from before kinds): purge
	Catalog          string   `dynamodbav:"catalog"`
	Namespace        []string `dynamodbav:"ns"`
	Table            string   `dynamodbav:"table"`
	TableUUID        string   `dynamodbav:"table_uuid"`
	MetadataLocation string   `dynamodbav:"metadata_location"`
	State            string   `dynamodbav:"state"`
	// Tombstoned: the job holds the name (a drop with purge; not a hold expiry).
	Tombstoned bool `dynamodbav:"tombstoned"`
	// Hold: the table's location claim, held by the job until it ends. The
	// purge deletes only under it; nil: the table owned nothing.
	Hold *Hold `dynamodbav:"hold,omitempty"`
	// Extra: more claims the job holds until it ends: a purged table's old
	// locations its snapshots reach (TableEntry.Extra), or those an
	// expire job's commit let go of (its files may lie there).
	Extra []Hold `dynamodbav:"extra_holds,omitempty"`
	// Claim: an expire job's table's location claim (its id) when the job
	// was made. The job does not hold it (the table keeps it); a file is
	// deleted only while that claim is what covers it.
	Claim string `dynamodbav:"claim,omitempty"`
	// ClaimLocation: the location (s3://bucket/prefix) that claim covers.
	// Under it nothing but that claim lets a file go ("": a job from before
	// it was recorded, whose files go only under that claim).
	ClaimLocation string `dynamodbav:"claim_location,omitempty"`
	// Claims: the table's other claims (its old locations, TableEntry.Extra)
	// when the job was made; a file covered by one of them goes too.
	Claims    []string `dynamodbav:"claims,omitempty"`
	Execution string   `dynamodbav:"execution"`
	// TaskToken is the waiting workflow's callback token (set while the
	// execution waits for the batches; the delete function that completes the
	// last one returns it).
	TaskToken string `dynamodbav:"task_token"`
	Attempts  int    `dynamodbav:"attempts"`
	LastError string `dynamodbav:"last_error"`
	// RecoveredError: the last retry error of a job that then succeeded.
	RecoveredError string `dynamodbav:"recovered_error"`
	// ClaimsKept: the job FAILED and keeps its claims until an operator
	// retries or abandons it (failed.go); Retries: how often one retried
	// it; Abandoned*: who let its claims go, and when.
	ClaimsKept  bool   `dynamodbav:"claims_kept"`
	Retries     int    `dynamodbav:"retries"`
	AbandonedBy string `dynamodbav:"abandoned_by"`
	AbandonedAt string `dynamodbav:"abandoned_at"`
	CreatedBy   string `dynamodbav:"created_by"`
	CreatedAt   string `dynamodbav:"created_at"`
	UpdatedAt   string `dynamodbav:"updated_at"`
	// Plan results.
	Planned bool `dynamodbav:"planned"`
	// ExpiredWriters: snapshots gone from the metadata whose manifests an
	// older retained snapshot still lists and the current one does not
	// (their ADDED entries count their files, so the current snapshot's
	// EXISTING entries must not). Decimal
	// strings: the local DynamoDB's update expressions round numbers past
	// 2^53 (a snapshot id is any int64).
	ExpiredWriters []string `dynamodbav:"expired_writers,omitempty"`
	Location       string   `dynamodbav:"location"`
	Scope          string   `dynamodbav:"scope"` // objects outside it are skipped
	GCEnabled      bool     `dynamodbav:"gc_enabled"`
	BatchesTotal   int      `dynamodbav:"batches_total"`
	// Counters, incremented in the same transaction as the checkpoint they
	// follow, so duplicate deliveries never double-count.
	BatchesDone  int   `dynamodbav:"batches_done"`
	BatchesDead  int   `dynamodbav:"batches_dead"`
	FilesDeleted int64 `dynamodbav:"files_deleted"`
	// FilesDeleted by kind: data files, delete files (from the manifests'
	// entries) and the metadata layer (manifests, manifest lists, metadata
	// files; all of an orphans job).
	DataFilesDeleted     int64 `dynamodbav:"data_files_deleted"`
	DeleteFilesDeleted   int64 `dynamodbav:"delete_files_deleted"`
	MetadataFilesDeleted int64 `dynamodbav:"metadata_files_deleted"`
	FilesMissing         int64 `dynamodbav:"files_missing"`
	FilesSkipped         int64 `dynamodbav:"files_skipped"`
	// FilesUnreferenced: objects under the location the table owned alone
	// that no metadata reached (failed commits, engines' uncommitted
	// writes), deleted by the purge's final listing; not in FilesDeleted.
	FilesUnreferenced int64 `dynamodbav:"files_unreferenced"`
	Bytes             int64 `dynamodbav:"bytes"`
	// Finalize progress: objects of the metadata layer deleted so far.
	FinalizeTotal  int `dynamodbav:"finalize_total"`
	FinalizeOffset int `dynamodbav:"finalize_offset"`
	// The final listing of the table's location: keys up to SweepAfter are
	// done; SweepPending: the page (SweepFrom, SweepAfter] is counted, its
	// deletion not confirmed; SweepDone: the listing reached the end.
	// SweepHold: which of the job's holds (Holds(), in order) is listed now.
	SweepHold    int    `dynamodbav:"sweep_hold"`
	SweepAfter   string `dynamodbav:"sweep_after"`
	SweepFrom    string `dynamodbav:"sweep_from"`
	SweepPending bool   `dynamodbav:"sweep_pending"`
	SweepDone    bool   `dynamodbav:"sweep_done"`
	// StorageSweep: a storage sweep job's report and progress (kind
	// sweep); StorageSweepStep counts its steps (each step's change is
	// guarded by it, so a retried step applies once).
	StorageSweep     *StorageSweep `dynamodbav:"storage_sweep,omitempty"`
	StorageSweepStep int           `dynamodbav:"storage_sweep_step"`
}

// Holds are all the claims the job holds.
func (j Job) Holds() []Hold { return holds(j.Hold, j.Extra) }

// ManifestRef is what a delete batch needs to stream one manifest.
type ManifestRef struct {
	Path            string `dynamodbav:"p"`
	Length          int64  `dynamodbav:"l"`
	SpecID          int32  `dynamodbav:"s"`
	AddedSnapshotID int64  `dynamodbav:"a,string"` // a string: the local DynamoDB refuses numbers past 2^53 (docs/design/local.md)
	SequenceNum     int64  `dynamodbav:"q"`
	MinSequenceNum  int64  `dynamodbav:"m"`
	Content         int    `dynamodbav:"c"`
	Version         int    `dynamodbav:"v"`
	Files           int64  `dynamodbav:"f"`
	// Current: the manifest is in the current snapshot's list, where each
	// live file is named once: it deletes and counts the files it carries
	// over (EXISTING) from snapshots that expired.
	Current bool `dynamodbav:"cur,omitempty"`
}

// Batch is one unit of the delete queue: some manifests whose entries one
// delete invocation removes, with its checkpoint.
type Batch struct {
	JobID     string        `dynamodbav:"job_id"`
	Number    int           `dynamodbav:"number"`
	Manifests []ManifestRef `dynamodbav:"manifests"`
	// Files: an orphans or expire batch's objects (full URIs, one bucket).
	// Sizes and Kinds, when set, are each file's bytes and kind (FileData,
	// FileDeletes, FileMetadata) as the table's metadata gave them.
	Files []string `dynamodbav:"files,omitempty"`
	Sizes []int64  `dynamodbav:"sizes,omitempty"`
	Kinds []string `dynamodbav:"kinds,omitempty"`
	// Versions, when set, are the version ids to delete, one per file
	// ("null": the null version); Sweep what a storage sweep's batch
	// checks again before it deletes.
	Versions []string    `dynamodbav:"versions,omitempty"`
	Sweep    *SweepBatch `dynamodbav:"storage_sweep,omitempty"`
	// Checkpoint: entries of the manifest at Manifest already handled.
	Manifest int    `dynamodbav:"cp_manifest"`
	Entry    int    `dynamodbav:"cp_entry"`
	Done     bool   `dynamodbav:"done"`
	Dead     bool   `dynamodbav:"dead"`
	Error    string `dynamodbav:"error"`
}

// ListedFile is a file a batch names, with what the table's metadata says
// of it (Size 0, Kind "": it does not say).
type ListedFile struct {
	Path string
	Size int64
	Kind string
}

// The kinds of a ListedFile.
const (
	FileData     = "data"
	FileDeletes  = "deletes"
	FileMetadata = "metadata"
)

func jobKey(cat, id string) (string, string) { return "JOB#" + cat, "J#" + id }
func activeKey(id string) (string, string)   { return "ACTIVEJOB", id }
func batchKey(job string, n int) (string, string) {
	return "BATCH#" + job, fmt.Sprintf("B#%08d", n)
}
func tombKey(cat string, ns []string, name string) (string, string) {
	return tablePK(cat, ns), "X#" + name
}
func inflightKey(job string, n int) (string, string) {
	return "INFLIGHT#" + job, fmt.Sprintf("B#%08d", n)
}

// InFlight is a batch a delete invocation has received and not finished:
// which receive it is and until when its lease holds. A batch whose last
// receive's lease ran out unfinished went to the DLQ without its handler
// saying so (a timeout, an out-of-memory kill): reconcile marks it dead.
type InFlight struct {
	Batch      int   `dynamodbav:"batch"`
	Receives   int   `dynamodbav:"receives"`
	LeaseUntil int64 `dynamodbav:"lease_until"` // epoch seconds
	// Message is the SQS message id of the delivery.
	Message string `dynamodbav:"message"`
}

// PutInFlight records (or refreshes) a batch's delivery.
func (s *Store) PutInFlight(ctx context.Context, job string, f InFlight) error {
	pk, sk := inflightKey(job, f.Batch)
	item, err := withKey(f, pk, sk)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	return err
}

// ListInFlight pages through a job's in-flight batches.
func (s *Store) ListInFlight(ctx context.Context, job, token string, limit int) ([]InFlight, string, error) {
	pk, _ := inflightKey(job, 0)
	items, next, err := s.query(ctx, pk, "B#", token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]InFlight, len(items))
	for i, it := range items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// DeleteInFlight forgets a batch's delivery (reconcile, for a batch found
// done or dead).
func (s *Store) DeleteInFlight(ctx context.Context, job string, n int) error {
	pk, sk := inflightKey(job, n)
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)})
	return err
}

// ForgetInFlight forgets a batch's delivery while the record is still that
// of message: a delivery that continued its batch in a new message ended
// healthy, and the new message's own receives must not be forgotten with it.
func (s *Store) ForgetInFlight(ctx context.Context, job string, n int, message string) error {
	pk, sk := inflightKey(job, n)
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: key(pk, sk),
		ConditionExpression:       aws.String("message = :m"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":m": &ddbtypes.AttributeValueMemberS{Value: message}},
	})
	if conditionFailed(err) {
		return nil
	}
	return err
}

func (s *Store) inflightDelete(job string, n int) ddbtypes.TransactWriteItem {
	pk, sk := inflightKey(job, n)
	return ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(pk, sk)}}
}

// Tombstone marks a name held by a purge job.
type Tombstone struct {
	JobID string `dynamodbav:"job_id"`
}

// DropForPurge removes a table entry and creates its purge job and (when
// tombstone) the tombstone, in one transaction; the entry's location claim
// passes to the job. ErrNotFound if the entry moved or vanished since it was
// read; ErrTombstoned if a job already holds the name.
func (s *Store) DropForPurge(ctx context.Context, e TableEntry, j Job, tombstone bool, events ...OutboxEvent) error {
	j.CreatedAt, j.UpdatedAt = now(), now()
	j.Tombstoned = tombstone
	j.Hold, j.Extra = e.Hold, e.Extra
	items, err := s.jobCreateItems(j, events)
	if err != nil {
		return err
	}
	tpk, tsk := tableKey(j.Catalog, e.Namespace, e.Name)
	items = append(items, ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{
		TableName: aws.String(s.table), Key: key(tpk, tsk),
		ConditionExpression:       aws.String("metadata_location = :m"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":m": &ddbtypes.AttributeValueMemberS{Value: e.MetadataLocation}},
	}}, s.nsCount(j.Catalog, e.Namespace, -1))
	tombAt := -1
	if tombstone {
		xpk, xsk := tombKey(j.Catalog, e.Namespace, e.Name)
		item, err := withKey(Tombstone{JobID: j.ID}, xpk, xsk)
		if err != nil {
			return err
		}
		tombAt = len(items)
		items = append(items, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{
			TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	if hs := e.Holds(); len(hs) > 0 {
		var lc locChange
		o := e.owner(j.Catalog)
		o.JobID = j.ID
		lc.RetagAll(hs, o)
		loc, err := s.locItems(&lc)
		if err != nil {
			return err
		}
		items = append(items, loc...)
	}
	err = s.transactWrite(ctx, items)
	if reasons := cancelReasons(err); reasons != nil {
		if tombAt >= 0 && tombAt < len(reasons) && reasons[tombAt] {
			return ErrTombstoned
		}
		return ErrNotFound
	}
	return err
}

// CreateJob stores a job without touching a table entry (the orphan sweep),
// with the events that announce it.
func (s *Store) CreateJob(ctx context.Context, j Job, events ...OutboxEvent) error {
	j.CreatedAt, j.UpdatedAt = now(), now()
	items, err := s.jobCreateItems(j, events)
	if err != nil {
		return err
	}
	err = s.transactWrite(ctx, items)
	if cancelReasons(err) != nil {
		return ErrExists
	}
	return err
}

func (s *Store) jobCreateItems(j Job, events []OutboxEvent) ([]ddbtypes.TransactWriteItem, error) {
	pk, sk := jobKey(j.Catalog, j.ID)
	item, err := withKey(j, pk, sk)
	if err != nil {
		return nil, err
	}
	apk, ask := activeKey(j.ID)
	active, err := withKey(struct {
		Catalog string `dynamodbav:"catalog"`
	}{j.Catalog}, apk, ask)
	if err != nil {
		return nil, err
	}
	return s.withEvents([]ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: active}},
	}, events)
}

// GetJob loads a job; ErrNotFound if unknown.
func (s *Store) GetJob(ctx context.Context, cat, id string) (Job, error) {
	var j Job
	pk, sk := jobKey(cat, id)
	err := s.get(ctx, pk, sk, &j)
	return j, err
}

// ListJobs pages through a catalog's jobs, oldest first.
func (s *Store) ListJobs(ctx context.Context, cat, token string, limit int) ([]Job, string, error) {
	pk, _ := jobKey(cat, "")
	items, next, err := s.query(ctx, pk, "J#", token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]Job, len(items))
	for i, it := range items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// ActiveJob names a job that is not terminal yet.
type ActiveJob struct{ Catalog, ID string }

// ActiveJobs lists jobs not yet terminal (what the reconcile sweep walks).
func (s *Store) ActiveJobs(ctx context.Context, token string, limit int) ([]ActiveJob, string, error) {
	pk, _ := activeKey("")
	return s.jobMarkers(ctx, pk, token, limit)
}

// jobMarkers pages through a partition of job markers (active, failed):
// each names its job's catalog and id.
func (s *Store) jobMarkers(ctx context.Context, pk, token string, limit int) ([]ActiveJob, string, error) {
	items, next, err := s.query(ctx, pk, "", token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]ActiveJob, len(items))
	for i, it := range items {
		var a struct {
			Catalog string `dynamodbav:"catalog"`
			SK      string `dynamodbav:"sk"`
		}
		if err := unmarshal(it, &a); err != nil {
			return nil, "", err
		}
		out[i] = ActiveJob{Catalog: a.Catalog, ID: a.SK}
	}
	return out, next, nil
}

// GetTombstone returns the job holding a name; ErrNotFound when free.
func (s *Store) GetTombstone(ctx context.Context, cat string, ns []string, name string) (Tombstone, error) {
	var t Tombstone
	pk, sk := tombKey(cat, ns, name)
	err := s.get(ctx, pk, sk, &t)
	return t, err
}

// JobUpdate is a guarded change of one job: an UpdateExpression with its
// values, applied only while the job is in one of States (any when empty).
type JobUpdate struct {
	Set    map[string]any   // attribute → new value
	Add    map[string]int64 // counter → delta
	States []string
	// Finish: the job becomes terminal: its tombstone and active marker go
	// too, and its location claim is released (unless KeepHold: the claim
	// goes back to a restored entry).
	Finish   bool
	KeepHold bool
	// Extra guard on the job, e.g. "finalize_offset = :fo" with its values.
	Cond       string
	CondValues map[string]any
	// Events the update reports (the outbox: written in its transaction).
	Events []OutboxEvent
}

func (s *Store) jobUpdateItems(j Job, u JobUpdate) ([]ddbtypes.TransactWriteItem, error) {
	pk, sk := jobKey(j.Catalog, j.ID)
	expr := "SET updated_at = :now"
	vals := map[string]ddbtypes.AttributeValue{":now": &ddbtypes.AttributeValueMemberS{Value: now()}}
	names := map[string]string{}
	i := 0
	for k, v := range u.Set {
		av, err := marshalValue(v)
		if err != nil {
			return nil, err
		}
		i++
		expr += fmt.Sprintf(", #s%d = :s%d", i, i)
		names[fmt.Sprintf("#s%d", i)] = k
		vals[fmt.Sprintf(":s%d", i)] = av
	}
	if len(u.Add) > 0 {
		expr += " ADD "
		first := true
		for k, v := range u.Add {
			i++
			if !first {
				expr += ", "
			}
			first = false
			expr += fmt.Sprintf("#a%d :a%d", i, i)
			names[fmt.Sprintf("#a%d", i)] = k
			vals[fmt.Sprintf(":a%d", i)] = &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
		}
	}
	cond := "attribute_exists(pk)"
	if len(u.States) > 0 {
		cond += " AND #state IN ("
		names["#state"] = "state"
		for n, st := range u.States {
			if n > 0 {
				cond += ", "
			}
			cond += fmt.Sprintf(":st%d", n)
			vals[fmt.Sprintf(":st%d", n)] = &ddbtypes.AttributeValueMemberS{Value: st}
		}
		cond += ")"
	}
	if u.Cond != "" {
		cond += " AND " + u.Cond
		for k, v := range u.CondValues {
			av, err := marshalValue(v)
			if err != nil {
				return nil, err
			}
			vals[k] = av
		}
	}
	up := &ddbtypes.Update{
		TableName: aws.String(s.table), Key: key(pk, sk),
		UpdateExpression: aws.String(expr), ConditionExpression: aws.String(cond),
		ExpressionAttributeValues: vals,
	}
	if len(names) > 0 {
		up.ExpressionAttributeNames = names
	}
	items := []ddbtypes.TransactWriteItem{{Update: up}}
	if u.Finish {
		apk, ask := activeKey(j.ID)
		items = append(items, ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(apk, ask)}})
		if j.Tombstoned {
			tpk, tsk := tombKey(j.Catalog, j.Namespace, j.Table)
			items = append(items, ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{
				TableName: aws.String(s.table), Key: key(tpk, tsk),
				ConditionExpression:       aws.String("attribute_not_exists(pk) OR job_id = :jid"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":jid": &ddbtypes.AttributeValueMemberS{Value: j.ID}},
			}})
		}
		if hs := j.Holds(); len(hs) > 0 && !u.KeepHold {
			var lc locChange
			lc.ReleaseAll(hs)
			loc, err := s.locItems(&lc)
			if err != nil {
				return nil, err
			}
			items = append(items, loc...)
		}
	}
	return s.withEvents(items, u.Events)
}

// UpdateJob applies a guarded job change; ErrConditionFailed when the guard
// does not hold (another step got there first).
func (s *Store) UpdateJob(ctx context.Context, j Job, u JobUpdate) error {
	items, err := s.jobUpdateItems(j, u)
	if err != nil {
		return err
	}
	return s.transact(ctx, items)
}

func (s *Store) transact(ctx context.Context, items []ddbtypes.TransactWriteItem) error {
	err := s.transactWrite(ctx, items)
	if cancelReasons(err) != nil {
		return ErrConditionFailed
	}
	return err
}

// PutBatches writes planned batches (idempotent: the plan is deterministic).
func (s *Store) PutBatches(ctx context.Context, batches []Batch) error {
	reqs := make([]ddbtypes.WriteRequest, 0, len(batches))
	for _, b := range batches {
		bpk, bsk := batchKey(b.JobID, b.Number)
		item, err := withKey(b, bpk, bsk)
		if err != nil {
			return err
		}
		reqs = append(reqs, ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
	}
	return s.batchWrite(ctx, reqs)
}

// DeleteBatches removes batches 0 to n-1 of a job that was never created
// (an expiry whose commit lost its race).
func (s *Store) DeleteBatches(ctx context.Context, job string, n int) error {
	reqs := make([]ddbtypes.WriteRequest, n)
	for i := range reqs {
		pk, sk := batchKey(job, i)
		reqs[i] = ddbtypes.WriteRequest{DeleteRequest: &ddbtypes.DeleteRequest{Key: key(pk, sk)}}
	}
	return s.batchWrite(ctx, reqs)
}

// batchWrite sends writes 25 at a time (BatchWriteItem's limit), again for
// what DynamoDB leaves unprocessed.
func (s *Store) batchWrite(ctx context.Context, reqs []ddbtypes.WriteRequest) error {
	for len(reqs) > 0 {
		page := reqs[:min(25, len(reqs))]
		reqs = reqs[len(page):]
		for len(page) > 0 {
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]ddbtypes.WriteRequest{s.table: page}})
			if err != nil {
				return err
			}
			page = out.UnprocessedItems[s.table]
		}
	}
	return nil
}

// GetBatch loads one batch.
func (s *Store) GetBatch(ctx context.Context, job string, n int) (Batch, error) {
	var b Batch
	pk, sk := batchKey(job, n)
	err := s.get(ctx, pk, sk, &b)
	return b, err
}

// ListBatches pages through a job's batches in order.
func (s *Store) ListBatches(ctx context.Context, job, token string, limit int) ([]Batch, string, error) {
	pk, _ := batchKey(job, 0)
	items, next, err := s.query(ctx, pk, "B#", token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]Batch, len(items))
	for i, it := range items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// BatchStep is a checkpoint move of a batch with the job counters it adds,
// applied together only if the batch is still at the expected checkpoint.
type BatchStep struct {
	From     [2]int // expected (manifest, entry) checkpoint
	To       [2]int
	Done     bool
	Counters map[string]int64
	// WasDead: the batch is dead-lettered (redriven): this step brings it
	// back to life, so the job's dead counter drops by one in the same
	// transaction, whatever delivery takes the step and whether or not it
	// finishes the batch.
	WasDead bool
}

// StepBatch applies one checkpoint move; ErrConditionFailed when another
// delivery of the same message already moved it (a duplicate: count nothing).
func (s *Store) StepBatch(ctx context.Context, j Job, b Batch, st BatchStep) error {
	pk, sk := batchKey(b.JobID, b.Number)
	items := []ddbtypes.TransactWriteItem{{Update: &ddbtypes.Update{
		TableName: aws.String(s.table), Key: key(pk, sk),
		UpdateExpression:    aws.String("SET cp_manifest = :tm, cp_entry = :te, done = :done, dead = :f"),
		ConditionExpression: aws.String("cp_manifest = :fm AND cp_entry = :fe AND done = :f AND dead = :wd"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":tm": num(st.To[0]), ":te": num(st.To[1]), ":fm": num(st.From[0]), ":fe": num(st.From[1]),
			":done": &ddbtypes.AttributeValueMemberBOOL{Value: st.Done}, ":f": &ddbtypes.AttributeValueMemberBOOL{Value: false},
			":wd": &ddbtypes.AttributeValueMemberBOOL{Value: st.WasDead},
		},
	}}}
	add := map[string]int64{}
	for k, v := range st.Counters {
		add[k] = v
	}
	if st.Done {
		add["batches_done"]++
		items = append(items, s.inflightDelete(b.JobID, b.Number))
	}
	if st.WasDead {
		add["batches_dead"]--
	}
	if len(add) > 0 {
		ju, err := s.jobUpdateItems(j, JobUpdate{Add: add})
		if err != nil {
			return err
		}
		items = append(items, ju...)
	}
	return s.transact(ctx, items)
}

// MarkBatchDead records that a batch exhausted its receives; the job becomes
// DEAD_LETTERED with the reason. Idempotent. read, when set, is the
// delivery the caller found spent (reconcile): the change is conditioned on
// its in-flight record being still that one, since a redrive makes the
// batch alive again under a new delivery (SPEC §2 "Generations").
func (s *Store) MarkBatchDead(ctx context.Context, j Job, b Batch, reason string, read *InFlight, events ...OutboxEvent) error {
	pk, sk := batchKey(b.JobID, b.Number)
	items := []ddbtypes.TransactWriteItem{{Update: &ddbtypes.Update{
		TableName: aws.String(s.table), Key: key(pk, sk),
		UpdateExpression:         aws.String("SET dead = :t, #e = :e"),
		ConditionExpression:      aws.String("done = :f AND dead = :f"),
		ExpressionAttributeNames: map[string]string{"#e": "error"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":t": &ddbtypes.AttributeValueMemberBOOL{Value: true}, ":f": &ddbtypes.AttributeValueMemberBOOL{Value: false},
			":e": &ddbtypes.AttributeValueMemberS{Value: reason},
		},
	}}}
	ju, err := s.jobUpdateItems(j, JobUpdate{
		Set: map[string]any{"state": JobDeadLettered, "last_error": reason}, Add: map[string]int64{"batches_dead": 1},
		States: []string{JobRunning, JobDeadLettered}, Events: events,
	})
	if err != nil {
		return err
	}
	del := s.inflightDelete(b.JobID, b.Number)
	if read != nil {
		del.Delete.ConditionExpression = aws.String("receives = :r AND (message = :m OR attribute_not_exists(message))")
		del.Delete.ExpressionAttributeValues = map[string]ddbtypes.AttributeValue{
			":r": num(read.Receives), ":m": &ddbtypes.AttributeValueMemberS{Value: read.Message},
		}
		if read.Message == "" { // a record from before message ids
			del.Delete.ConditionExpression = aws.String("receives = :r AND attribute_not_exists(message)")
			delete(del.Delete.ExpressionAttributeValues, ":m")
		}
	}
	return s.transact(ctx, append(append(items, ju...), del))
}

// RestoreFromJob cancels a PENDING job and puts its table entry back, lifting
// the tombstone: register as recovery. The job's location claim goes back to
// the entry. ErrConditionFailed when the job is no longer PENDING or the name
// was taken.
func (s *Store) RestoreFromJob(ctx context.Context, j Job, e TableEntry) error {
	items, err := s.jobUpdateItems(j, JobUpdate{Set: map[string]any{"state": JobCancelled}, States: []string{JobPending}, Finish: true, KeepHold: true})
	if err != nil {
		return err
	}
	e.Hold, e.Extra = j.Hold, j.Extra
	put, err := s.tablePut(j.Catalog, TableWrite{Entry: e})
	if err != nil {
		return err
	}
	items = append(items, s.nsCount(j.Catalog, e.Namespace, 1), put)
	if hs := j.Holds(); len(hs) > 0 {
		var lc locChange
		lc.RetagAll(hs, e.owner(j.Catalog))
		loc, err := s.locItems(&lc)
		if err != nil {
			return err
		}
		items = append(items, loc...)
	}
	return s.transact(ctx, items)
}

// SetJobHold records a backfilled claim on a job still unfinished (a
// finished one would never release it), taking it in the same transaction.
func (s *Store) SetJobHold(ctx context.Context, j Job, claim Claim) error {
	pk, sk := jobKey(j.Catalog, j.ID)
	return s.setHold(ctx, pk, sk, "attribute_exists(pk) AND #st IN (:p, :r, :d)", map[string]string{"#st": "state"},
		map[string]ddbtypes.AttributeValue{
			":p": &ddbtypes.AttributeValueMemberS{Value: JobPending}, ":r": &ddbtypes.AttributeValueMemberS{Value: JobRunning},
			":d": &ddbtypes.AttributeValueMemberS{Value: JobDeadLettered},
		}, claim, nil)
}

func num(n int) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(n)}
}
