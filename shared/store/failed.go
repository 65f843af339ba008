package store

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A FAILED job keeps its claims (SPEC §2: no prefix it was deleting under
// becomes anyone's while its files may still be there) until an operator
// retries it to SUCCEEDED or abandons it, which lets them go and leaves
// its files in the bucket, owned by nobody. A FAILED job that keeps its
// claims has a marker (FAILEDJOB / <job id>), so that teardown-check lists
// it without a scan.

func failedKey(id string) (string, string) { return "FAILEDJOB", id }

// Holding reports whether the job holds its claims now: while it runs,
// and once FAILED until it is retried or abandoned (a job that FAILED
// before claims were kept let them go).
func (j Job) Holding() bool { return !Terminal(j.State) || j.State == JobFailed && j.ClaimsKept }

// FailJob ends a job FAILED with the reason, keeping its claims: its
// tombstone and active marker go (the name is free), its failed marker
// comes. ErrConditionFailed when the job is terminal already.
func (s *Store) FailJob(ctx context.Context, j Job, reason string, events ...OutboxEvent) error {
	items, err := s.jobUpdateItems(j, JobUpdate{
		Set:    map[string]any{"state": JobFailed, "last_error": reason, "claims_kept": len(j.Holds()) > 0},
		States: []string{JobPending, JobRunning, JobDeadLettered}, Finish: true, KeepHold: true, Events: events,
	})
	if err != nil {
		return err
	}
	if len(j.Holds()) > 0 {
		fpk, fsk := failedKey(j.ID)
		marker, err := withKey(struct {
			Catalog string `dynamodbav:"catalog"`
		}{j.Catalog}, fpk, fsk)
		if err != nil {
			return err
		}
		items = append(items, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: marker}})
	}
	return s.transact(ctx, items)
}

// FailedJobs pages through the FAILED jobs that keep their claims.
func (s *Store) FailedJobs(ctx context.Context, token string, limit int) ([]ActiveJob, string, error) {
	pk, _ := failedKey("")
	return s.jobMarkers(ctx, pk, token, limit)
}

// RetryJob sets a FAILED job running again under a new execution name
// (attempts counted afresh), in one transaction with its claims checked
// (each still this job's, generation included): ErrConditionFailed when
// the job is no longer FAILED as read, ErrLocationTaken when a claim is
// gone (a job that FAILED before claims were kept: its prefixes may be
// another's now, and its guard deletes under its holds unasked).
func (s *Store) RetryJob(ctx context.Context, j Job, execution string, events ...OutboxEvent) error {
	items, err := s.jobUpdateItems(j, JobUpdate{
		Set: map[string]any{"state": JobRunning, "execution": execution, "attempts": 1, "task_token": "", "claims_kept": false},
		Add: map[string]int64{"retries": 1}, States: []string{JobFailed},
		Cond: "updated_at = :read", CondValues: map[string]any{":read": j.UpdatedAt}, Events: events,
	})
	if err != nil {
		return err
	}
	fpk, fsk := failedKey(j.ID)
	apk, ask := activeKey(j.ID)
	active, err := withKey(struct {
		Catalog string `dynamodbav:"catalog"`
	}{j.Catalog}, apk, ask)
	if err != nil {
		return err
	}
	items = append(items,
		ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(fpk, fsk)}},
		ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: active}})
	first := len(items)
	var lc locChange
	for _, h := range j.Holds() {
		lc.Held(h)
	}
	loc, err := s.locItems(&lc)
	if err != nil {
		return err
	}
	return s.runLoc(ctx, append(items, loc...), first)
}

// AbandonJob lets a FAILED job's claims go, its files staying in the
// bucket owned by nobody, and records who did it; the job stays FAILED.
// ErrConditionFailed when it is no longer FAILED with its claims as read.
func (s *Store) AbandonJob(ctx context.Context, j Job, by string) error {
	items, err := s.jobUpdateItems(j, JobUpdate{
		Set:    map[string]any{"claims_kept": false, "abandoned_by": by, "abandoned_at": now()},
		States: []string{JobFailed}, Cond: "claims_kept = :t AND updated_at = :read",
		CondValues: map[string]any{":t": true, ":read": j.UpdatedAt},
	})
	if err != nil {
		return err
	}
	fpk, fsk := failedKey(j.ID)
	items = append(items, ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(fpk, fsk)}})
	var lc locChange
	lc.ReleaseAll(j.Holds())
	loc, err := s.locItems(&lc)
	if err != nil {
		return err
	}
	return s.transact(ctx, append(items, loc...))
}
