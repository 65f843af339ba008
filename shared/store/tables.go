package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GetTable loads a table entry; ErrNotFound if missing (or a view holds
// the name: GetEntry tells).
func (s *Store) GetTable(ctx context.Context, cat string, ns []string, name string) (TableEntry, error) {
	return s.getKind(ctx, cat, ns, name, false)
}

// GetView loads a view's entry; ErrNotFound if missing (or a table holds
// the name).
func (s *Store) GetView(ctx context.Context, cat string, ns []string, name string) (TableEntry, error) {
	return s.getKind(ctx, cat, ns, name, true)
}

// GetEntry loads the entry at a name, table or view; ErrNotFound if none.
func (s *Store) GetEntry(ctx context.Context, cat string, ns []string, name string) (TableEntry, error) {
	var e TableEntry
	pk, sk := tableKey(cat, ns, name)
	err := s.get(ctx, pk, sk, &e)
	return e, err
}

func (s *Store) getKind(ctx context.Context, cat string, ns []string, name string, view bool) (TableEntry, error) {
	e, err := s.GetEntry(ctx, cat, ns, name)
	if err == nil && e.IsView() != view {
		return TableEntry{}, ErrNotFound
	}
	return e, err
}

// ListTables pages through the tables of one namespace.
func (s *Store) ListTables(ctx context.Context, cat string, ns []string, token string, limit int) ([]TableEntry, string, error) {
	return s.listKind(ctx, cat, ns, token, limit, false)
}

// ListViews pages through the views of one namespace.
func (s *Store) ListViews(ctx context.Context, cat string, ns []string, token string, limit int) ([]TableEntry, string, error) {
	return s.listKind(ctx, cat, ns, token, limit, true)
}

// listKind pages through one namespace's entries of one kind. Tables and
// views share the key range (one name space), so a page holds up to limit
// entries of both and keeps those of the kind asked for: a page may be
// short, or empty with a next token (clients follow next-page-token).
func (s *Store) listKind(ctx context.Context, cat string, ns []string, token string, limit int, view bool) ([]TableEntry, string, error) {
	items, next, err := s.query(ctx, tablePK(cat, ns), "T#", token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]TableEntry, 0, len(items))
	for _, it := range items {
		var e TableEntry
		if err := unmarshal(it, &e); err != nil {
			return nil, "", err
		}
		if e.IsView() == view {
			out = append(out, e)
		}
	}
	return out, next, nil
}

// TableWrite is one table's part of an atomic catalog change.
type TableWrite struct {
	Entry TableEntry
	// Expected is the metadata location the entry must still point at; empty
	// means the entry must not exist yet (a create).
	Expected string
	// Claim is a location claim the write takes (create, register,
	// set-location); Release the holds it lets go (old locations no
	// retained snapshot reaches).
	Claim   *Claim
	Release []Hold
	// Intent is the pending-write record of the entry's new metadata file,
	// retired by this write (several writes of one request share one).
	Intent *Intent
	// Events the write reports (the outbox: written in its transaction).
	Events []OutboxEvent
	// Job, when set, is created by the write (snapshot expiry's delete
	// job); it takes over the holds in its Extra (retagged, not released).
	Job *Job
}

func (s *Store) nsCheck(cat string, ns []string) ddbtypes.TransactWriteItem {
	pk, sk := nsKey(cat, ns)
	return ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{
		TableName: aws.String(s.table), Key: key(pk, sk), ConditionExpression: aws.String("attribute_exists(pk)"),
	}}
}

// nsCount changes a namespace's count of children by delta in a
// transaction, requiring the namespace to exist (delta 0: only that).
func (s *Store) nsCount(cat string, ns []string, delta int) ddbtypes.TransactWriteItem {
	if delta == 0 {
		return s.nsCheck(cat, ns)
	}
	pk, sk := nsKey(cat, ns)
	return ddbtypes.TransactWriteItem{Update: &ddbtypes.Update{
		TableName: aws.String(s.table), Key: key(pk, sk),
		UpdateExpression:          aws.String("ADD children :d"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":d": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(delta)}},
	}}
}

func (s *Store) tombCheck(cat string, ns []string, name string) ddbtypes.TransactWriteItem {
	tpk, tsk := tombKey(cat, ns, name)
	return ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{
		TableName: aws.String(s.table), Key: key(tpk, tsk), ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}
}

func (s *Store) tablePut(cat string, w TableWrite) (ddbtypes.TransactWriteItem, error) {
	w.Entry.UpdatedAt = now()
	pk, sk := tableKey(cat, w.Entry.Namespace, w.Entry.Name)
	item, err := withKey(w.Entry, pk, sk)
	if err != nil {
		return ddbtypes.TransactWriteItem{}, err
	}
	put := &ddbtypes.Put{TableName: aws.String(s.table), Item: item}
	switch {
	case w.Expected == "":
		put.ConditionExpression = aws.String("attribute_not_exists(pk)")
	default:
		put.ConditionExpression = aws.String("metadata_location = :old")
		put.ExpressionAttributeValues = map[string]ddbtypes.AttributeValue{":old": &ddbtypes.AttributeValueMemberS{Value: w.Expected}}
	}
	return ddbtypes.TransactWriteItem{Put: put}, nil
}

// WriteTables applies table writes atomically (one DynamoDB transaction): the
// compare-and-swap of every metadata pointer, creates guarded by the
// namespace's existence and the absence of a purge tombstone, and the
// location claims the writes take and release. On a lost guard it returns
// ErrNotFound (a namespace of a create is gone), ErrTombstoned, ErrExists (a
// create found the name taken), ErrConditionFailed (a pointer moved) or
// ErrLocationTaken, with the index of the failed write.
func (s *Store) WriteTables(ctx context.Context, cat string, writes []TableWrite) (int, error) {
	var items []ddbtypes.TransactWriteItem
	owner := []int{} // which write each transaction item belongs to
	isNS := []bool{} // whether the item is a namespace guard
	isTomb := []bool{}
	// One item per namespace (DynamoDB refuses two operations on one item):
	// its count of children grows by the creates into it.
	creates := map[string]int{}
	var order []int
	for i, w := range writes {
		if w.Expected == "" {
			nsk := strings.Join(w.Entry.Namespace, levelSep)
			if creates[nsk] == 0 {
				order = append(order, i)
			}
			creates[nsk]++
		}
	}
	for _, i := range order {
		ns := writes[i].Entry.Namespace
		items = append(items, s.nsCount(cat, ns, creates[strings.Join(ns, levelSep)]))
		owner, isNS, isTomb = append(owner, i), append(isNS, true), append(isTomb, false)
	}
	var lc locChange
	firstClaim := -1
	for i, w := range writes {
		if w.Expected == "" {
			// A name held by a purge job cannot be created or registered.
			items = append(items, s.tombCheck(cat, w.Entry.Namespace, w.Entry.Name))
			owner, isNS, isTomb = append(owner, i), append(isNS, false), append(isTomb, true)
		}
		it, err := s.tablePut(cat, w)
		if err != nil {
			return i, err
		}
		items = append(items, it)
		owner, isNS, isTomb = append(owner, i), append(isNS, false), append(isTomb, false)
		lc.ReleaseAll(w.Release)
		if w.Job != nil {
			j := *w.Job
			j.CreatedAt, j.UpdatedAt = now(), now()
			ji, err := s.jobCreateItems(j, nil)
			if err != nil {
				return i, err
			}
			for _, it := range ji {
				items = append(items, it)
				owner, isNS, isTomb = append(owner, i), append(isNS, false), append(isTomb, false)
			}
			o := w.Entry.owner(cat)
			o.JobID = j.ID
			lc.RetagAll(j.Extra, o)
		}
		if w.Claim != nil {
			if firstClaim < 0 {
				firstClaim = i
			}
			if err := lc.Take(*w.Claim); err != nil {
				return i, err
			}
		}
	}
	retired := map[string]bool{}
	for i, w := range writes {
		if w.Intent != nil && !retired[w.Intent.ID] {
			retired[w.Intent.ID] = true
			items = append(items, s.intentDone(*w.Intent)) // unconditional: never the cause
			owner, isNS, isTomb = append(owner, i), append(isNS, false), append(isTomb, false)
		}
	}
	for i, w := range writes {
		puts, err := s.outboxPuts(w.Events)
		if err != nil {
			return i, err
		}
		for _, p := range puts {
			items = append(items, p) // unconditional: never the cause
			owner, isNS, isTomb = append(owner, i), append(isNS, false), append(isTomb, false)
		}
	}
	first := len(items)
	loc, err := s.locItems(&lc)
	if err != nil {
		return max(firstClaim, 0), err
	}
	items = append(items, loc...)
	if len(items) > MaxTransactItems {
		return 0, fmt.Errorf("%w: %d items, at most %d", ErrTooManyItems, len(items), MaxTransactItems)
	}
	err = s.transactWrite(ctx, items)
	if reasons := cancelReasons(err); reasons != nil {
		for j, failed := range reasons {
			if !failed {
				continue
			}
			if j >= first {
				return max(firstClaim, 0), ErrLocationTaken
			}
			w := writes[owner[j]]
			switch {
			case isTomb[j]:
				return owner[j], ErrTombstoned
			case isNS[j]:
				return owner[j], ErrNotFound
			case w.Expected == "":
				return owner[j], ErrExists
			default:
				return owner[j], ErrConditionFailed
			}
		}
		return 0, ErrConditionFailed
	}
	return 0, err
}

// CommitTable swaps one table's metadata pointer from expected to the entry's
// new location: one conditional write (with done, a transaction that also
// retires the intent of the new file). ErrNotFound if the entry is gone,
// ErrConditionFailed if another commit won.
func (s *Store) CommitTable(ctx context.Context, cat string, e TableEntry, expected string, done *Intent, events ...OutboxEvent) error {
	return s.commitTable(ctx, cat, e, expected, done, nil, events)
}

// CommitTableWithJob is CommitTable that also creates a job (and its active
// marker) in the same transaction: the job exists exactly when the commit
// landed. Snapshot expiry uses it, so that no crash can separate the removal
// of snapshots from the job that deletes their files.
func (s *Store) CommitTableWithJob(ctx context.Context, cat string, e TableEntry, expected string, done *Intent, j Job, events ...OutboxEvent) error {
	if done == nil {
		return errors.New("a commit with a job needs the intent of its metadata file")
	}
	j.CreatedAt, j.UpdatedAt = now(), now()
	items, err := s.jobCreateItems(j, nil)
	if err != nil {
		return err
	}
	return s.commitTable(ctx, cat, e, expected, done, items, events)
}

func (s *Store) commitTable(ctx context.Context, cat string, e TableEntry, expected string, done *Intent, also []ddbtypes.TransactWriteItem, events []OutboxEvent) error {
	pk, sk := tableKey(cat, e.Namespace, e.Name)
	update := ddbtypes.Update{
		TableName:           aws.String(s.table),
		Key:                 key(pk, sk),
		UpdateExpression:    aws.String("SET metadata_location = :new, updated_at = :now, legal_hold = :lh, hold_period = :hp"),
		ConditionExpression: aws.String("metadata_location = :old"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":new": &ddbtypes.AttributeValueMemberS{Value: e.MetadataLocation},
			":old": &ddbtypes.AttributeValueMemberS{Value: expected},
			":now": &ddbtypes.AttributeValueMemberS{Value: now()},
			":lh":  &ddbtypes.AttributeValueMemberBOOL{Value: e.LegalHold},
			":hp":  &ddbtypes.AttributeValueMemberS{Value: e.HoldPeriod},
		},
	}
	if done != nil || len(also) > 0 || len(events) > 0 {
		items := []ddbtypes.TransactWriteItem{{Update: &update}}
		if done != nil {
			items = append(items, s.intentDone(*done))
		}
		items, err := s.withEvents(append(items, also...), events)
		if err != nil {
			return err
		}
		err = s.transactWrite(ctx, items)
		if cancelReasons(err) == nil {
			return err
		}
		if _, gerr := s.GetEntry(ctx, cat, e.Namespace, e.Name); errors.Is(gerr, ErrNotFound) {
			return ErrNotFound
		}
		return ErrConditionFailed
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: update.TableName, Key: update.Key, UpdateExpression: update.UpdateExpression,
		ConditionExpression: update.ConditionExpression, ExpressionAttributeValues: update.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *ddbtypes.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			return ErrNotFound
		}
		return ErrConditionFailed
	}
	return err
}

// RenameTable moves an entry to a new identifier atomically; its location
// claim follows it. ErrNotFound: the source is gone or the destination
// namespace is missing (second value tells which: true for the namespace);
// ErrExists: destination taken; ErrTombstoned: a purge job holds the
// destination name.
func (s *Store) RenameTable(ctx context.Context, cat string, from TableEntry, to TableEntry) (bool, error) {
	fpk, fsk := tableKey(cat, from.Namespace, from.Name)
	if tpk, tsk := tableKey(cat, to.Namespace, to.Name); tpk == fpk && tsk == fsk {
		// The name is taken (by the entry itself), as Iceberg's catalogs
		// answer: one transaction cannot move an item onto itself.
		return false, ErrExists
	}
	put, err := s.tablePut(cat, TableWrite{Entry: to})
	if err != nil {
		return false, err
	}
	items := []ddbtypes.TransactWriteItem{
		{Delete: &ddbtypes.Delete{
			TableName: aws.String(s.table), Key: key(fpk, fsk),
			ConditionExpression:       aws.String("metadata_location = :old"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":old": &ddbtypes.AttributeValueMemberS{Value: from.MetadataLocation}},
		}},
		s.nsCount(cat, to.Namespace, 1),
		s.tombCheck(cat, to.Namespace, to.Name),
		put,
	}
	if sameNS := strings.Join(from.Namespace, levelSep) == strings.Join(to.Namespace, levelSep); sameNS {
		items[1] = s.nsCheck(cat, to.Namespace)
	} else {
		items = append(items, s.nsCount(cat, from.Namespace, -1))
	}
	if hs := from.Holds(); len(hs) > 0 {
		var lc locChange
		lc.RetagAll(hs, to.owner(cat))
		loc, err := s.locItems(&lc)
		if err != nil {
			return false, err
		}
		items = append(items, loc...)
	}
	err = s.transactWrite(ctx, items)
	if reasons := cancelReasons(err); reasons != nil {
		switch {
		case reasons[0]:
			return false, ErrNotFound
		case len(reasons) > 1 && reasons[1]:
			return true, ErrNotFound
		case len(reasons) > 2 && reasons[2]:
			return false, ErrTombstoned
		case len(reasons) > 3 && reasons[3]:
			return false, ErrExists
		default:
			return false, ErrConditionFailed
		}
	}
	return false, err
}

// DeleteTable removes an entry still at the pointer it was read with and
// releases its location claim (a drop that keeps the files: nobody owns them
// any more). ErrConditionFailed when the entry moved or vanished.
func (s *Store) DeleteTable(ctx context.Context, cat string, e TableEntry) error {
	pk, sk := tableKey(cat, e.Namespace, e.Name)
	items := []ddbtypes.TransactWriteItem{{Delete: &ddbtypes.Delete{
		TableName: aws.String(s.table), Key: key(pk, sk),
		ConditionExpression:       aws.String("metadata_location = :m"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":m": &ddbtypes.AttributeValueMemberS{Value: e.MetadataLocation}},
	}}, s.nsCount(cat, e.Namespace, -1)}
	if hs := e.Holds(); len(hs) > 0 {
		var lc locChange
		lc.ReleaseAll(hs)
		loc, err := s.locItems(&lc)
		if err != nil {
			return err
		}
		items = append(items, loc...)
	}
	return s.transact(ctx, items)
}

// SetTableHold records a backfilled claim on an entry still at the pointer
// it was read with, taking the claim in the same transaction.
func (s *Store) SetTableHold(ctx context.Context, cat string, e TableEntry, claim Claim, extra ...Claim) error {
	pk, sk := tableKey(cat, e.Namespace, e.Name)
	return s.setHold(ctx, pk, sk, "metadata_location = :m", nil,
		map[string]ddbtypes.AttributeValue{":m": &ddbtypes.AttributeValueMemberS{Value: e.MetadataLocation}}, claim, extra)
}
