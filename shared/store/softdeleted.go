package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Soft-deleted tables (SPEC §4). Three items per record, written and removed
// in the transaction that changes the table's state:
//
//	SOFT#<catalog> / U#<table uuid>                 the record (by uuid: legal hold, undrop with a uuid)
//	SOFT#<catalog> / N#<namespace>␞<name>␞<uuid>    the same record by name (listing, generations)
//	SOFTEXP        / <purge-at>#<catalog>#<uuid>    the expiry index: "expired before T" is one query
//
// A legal-held record has no expiry item, so the sweep never meets it.

// SoftDeleted is a soft-deleted table: the entry as it was when dropped and
// what the drop decided.
type SoftDeleted struct {
	Catalog    string            `dynamodbav:"catalog"`
	Entry      TableEntry        `dynamodbav:"entry"`
	Properties map[string]string `dynamodbav:"props"`
	DroppedAt  string            `dynamodbav:"dropped_at"`
	DroppedBy  string            `dynamodbav:"dropped_by"`
	// PurgeAt (RFC 3339, UTC, seconds) and the hold that made it: fixed at
	// drop time.
	PurgeAt       string `dynamodbav:"purge_at"`
	HoldPeriod    string `dynamodbav:"hold_period"`
	PurgeOnExpiry bool   `dynamodbav:"purge_on_expiry"`
	LegalHold     bool   `dynamodbav:"legal_hold"`
}

// ErrLegalHold: the record is under legal hold.
var ErrLegalHold = errors.New("under legal hold")

// recordSep separates the parts of a name-index key; identifiers never hold
// control characters.
const recordSep = "\x1e"

func softPK(cat string) string { return "SOFT#" + cat }

func softKeys(r SoftDeleted) (uuidSK, nameSK string) {
	return "U#" + r.Entry.TableUUID, "N#" + strings.Join(r.Entry.Namespace, levelSep) + recordSep + r.Entry.Name + recordSep + r.Entry.TableUUID
}

func expiryKey(r SoftDeleted) (string, string) {
	return "SOFTEXP", r.PurgeAt + "#" + r.Catalog + "#" + r.Entry.TableUUID
}

// ExpiryTime formats a purge time as the expiry index sorts it.
func ExpiryTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

func (s *Store) softItems(r SoftDeleted) ([]ddbtypes.TransactWriteItem, error) {
	uk, nk := softKeys(r)
	var items []ddbtypes.TransactWriteItem
	for i, sk := range []string{uk, nk} {
		item, err := withKey(r, softPK(r.Catalog), sk)
		if err != nil {
			return nil, err
		}
		put := &ddbtypes.Put{TableName: aws.String(s.table), Item: item}
		if i == 0 {
			put.ConditionExpression = aws.String("attribute_not_exists(pk)")
		}
		items = append(items, ddbtypes.TransactWriteItem{Put: put})
	}
	if !r.LegalHold {
		epk, esk := expiryKey(r)
		item, err := withKey(struct {
			Catalog string `dynamodbav:"catalog"`
			UUID    string `dynamodbav:"table_uuid"`
		}{r.Catalog, r.Entry.TableUUID}, epk, esk)
		if err != nil {
			return nil, err
		}
		items = append(items, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item}})
	}
	return items, nil
}

// softRemoveItems deletes a record's items; the uuid item must exist (the
// guard that makes undrop, purge-now and expiry happen once).
func (s *Store) softRemoveItems(r SoftDeleted) []ddbtypes.TransactWriteItem {
	uk, nk := softKeys(r)
	epk, esk := expiryKey(r)
	return []ddbtypes.TransactWriteItem{
		{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(softPK(r.Catalog), uk), ConditionExpression: aws.String("attribute_exists(pk)")}},
		{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(softPK(r.Catalog), nk)}},
		{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(epk, esk)}},
	}
}

// SoftDelete moves an entry still at the pointer it was read with out of
// the active view into a soft-deleted record, in one transaction; the
// entry's location stays claimed (by the record). ErrNotFound when the entry
// moved or vanished.
func (s *Store) SoftDelete(ctx context.Context, cat string, e TableEntry, r SoftDeleted, events ...OutboxEvent) error {
	r.Catalog, r.Entry = cat, e
	pk, sk := tableKey(cat, e.Namespace, e.Name)
	items := []ddbtypes.TransactWriteItem{{Delete: &ddbtypes.Delete{
		TableName: aws.String(s.table), Key: key(pk, sk),
		ConditionExpression:       aws.String("metadata_location = :m"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":m": &ddbtypes.AttributeValueMemberS{Value: e.MetadataLocation}},
	}}, s.nsCount(cat, e.Namespace, -1)}
	soft, err := s.softItems(r)
	if err != nil {
		return err
	}
	items = append(items, soft...)
	if hs := e.Holds(); len(hs) > 0 {
		var lc locChange
		lc.RetagAll(hs, Owner{Kind: OwnerTable, Catalog: cat, Namespace: e.Namespace, Name: e.Name, SoftDeleted: true})
		loc, err := s.locItems(&lc)
		if err != nil {
			return err
		}
		items = append(items, loc...)
	}
	if items, err = s.withEvents(items, events); err != nil {
		return err
	}
	err = s.transactWrite(ctx, items)
	if reasons := cancelReasons(err); reasons != nil {
		if reasons[0] {
			return ErrNotFound
		}
		return ErrConditionFailed
	}
	return err
}

// SoftDeletedByUUID loads one record; ErrNotFound if none.
func (s *Store) SoftDeletedByUUID(ctx context.Context, cat, uuid string) (SoftDeleted, error) {
	var r SoftDeleted
	err := s.get(ctx, softPK(cat), "U#"+uuid, &r)
	return r, err
}

// SoftDeletedByName lists the soft-deleted generations of one name.
func (s *Store) SoftDeletedByName(ctx context.Context, cat string, ns []string, name string) ([]SoftDeleted, error) {
	var out []SoftDeleted
	prefix := "N#" + strings.Join(ns, levelSep) + recordSep + name + recordSep
	token := ""
	for {
		page, next, err := s.softPage(ctx, cat, prefix, token, 100)
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

// ListSoftDeleted pages through a catalog's soft-deleted tables, of one
// namespace when ns is given.
func (s *Store) ListSoftDeleted(ctx context.Context, cat string, ns []string, token string, limit int) ([]SoftDeleted, string, error) {
	prefix := "N#"
	if ns != nil {
		prefix += strings.Join(ns, levelSep) + recordSep
	}
	return s.softPage(ctx, cat, prefix, token, limit)
}

func (s *Store) softPage(ctx context.Context, cat, prefix, token string, limit int) ([]SoftDeleted, string, error) {
	items, next, err := s.query(ctx, softPK(cat), prefix, token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]SoftDeleted, len(items))
	for i, it := range items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// Undrop puts a soft-deleted table back as the entry to (its original
// identifier or another), removing the record, in one transaction; its
// location claim follows it. ErrExists: the name is taken (by a table);
// ErrTombstoned: a purge job holds the name; ErrNotFound with nsMissing: the
// namespace is gone; ErrConditionFailed: the record is gone (undropped,
// purged or expired meanwhile).
func (s *Store) Undrop(ctx context.Context, r SoftDeleted, to TableEntry, events ...OutboxEvent) (nsMissing bool, err error) {
	to.Hold, to.Extra = r.Entry.Hold, r.Entry.Extra
	put, err := s.tablePut(r.Catalog, TableWrite{Entry: to})
	if err != nil {
		return false, err
	}
	items := []ddbtypes.TransactWriteItem{
		put,
		s.nsCount(r.Catalog, to.Namespace, 1),
		s.tombCheck(r.Catalog, to.Namespace, to.Name),
	}
	items = append(items, s.softRemoveItems(r)...)
	if hs := r.Entry.Holds(); len(hs) > 0 {
		var lc locChange
		lc.RetagAll(hs, Owner{Kind: OwnerTable, Catalog: r.Catalog, Namespace: to.Namespace, Name: to.Name})
		loc, err := s.locItems(&lc)
		if err != nil {
			return false, err
		}
		items = append(items, loc...)
	}
	if items, err = s.withEvents(items, events); err != nil {
		return false, err
	}
	err = s.transactWrite(ctx, items)
	if reasons := cancelReasons(err); reasons != nil {
		switch {
		case reasons[0]:
			return false, ErrExists
		case reasons[1]:
			return true, ErrNotFound
		case reasons[2]:
			return false, ErrTombstoned
		default:
			return false, ErrConditionFailed
		}
	}
	return false, err
}

// PermanentlyDelete removes a soft-deleted record for good: with a job, the
// job (no tombstone: the name was freed at the soft drop) takes the
// location claim in the same transaction; without, the claim is released
// (the files stay, owned by nobody). ErrConditionFailed when the record is
// gone (another sweep, a purge-now or an undrop got there first);
// ErrLegalHold when it is under legal hold.
func (s *Store) PermanentlyDelete(ctx context.Context, r SoftDeleted, job *Job, events ...OutboxEvent) error {
	items := s.softRemoveItems(r)
	// Legal hold is checked by the transaction, not by the read before it.
	items[0].Delete.ConditionExpression = aws.String("attribute_exists(pk) AND legal_hold = :f")
	items[0].Delete.ExpressionAttributeValues = map[string]ddbtypes.AttributeValue{":f": &ddbtypes.AttributeValueMemberBOOL{Value: false}}
	var lc locChange
	if job != nil {
		job.CreatedAt, job.UpdatedAt = now(), now()
		job.Hold, job.Extra = r.Entry.Hold, r.Entry.Extra
		ji, err := s.jobCreateItems(*job, nil)
		if err != nil {
			return err
		}
		items = append(items, ji...)
		lc.RetagAll(r.Entry.Holds(), Owner{Kind: OwnerTable, Catalog: r.Catalog, Namespace: r.Entry.Namespace, Name: r.Entry.Name, JobID: job.ID})
	} else {
		lc.ReleaseAll(r.Entry.Holds())
	}
	loc, err := s.locItems(&lc)
	if err != nil {
		return err
	}
	items = append(items, loc...)
	if items, err = s.withEvents(items, events); err != nil {
		return err
	}
	err = s.transactWrite(ctx, items)
	if reasons := cancelReasons(err); reasons != nil {
		if reasons[0] {
			if cur, gerr := s.SoftDeletedByUUID(ctx, r.Catalog, r.Entry.TableUUID); gerr == nil && cur.LegalHold {
				return ErrLegalHold
			}
		}
		return ErrConditionFailed
	}
	return err
}

// SetLegalHold sets or clears a record's legal hold: held records leave the
// expiry index, cleared ones come back to it (at their purge time; a time
// already past makes them due at the next sweep). ErrNotFound when the
// record is gone.
func (s *Store) SetLegalHold(ctx context.Context, r SoftDeleted, on bool, events ...OutboxEvent) (SoftDeleted, error) {
	uk, nk := softKeys(r)
	var items []ddbtypes.TransactWriteItem
	for i, sk := range []string{uk, nk} {
		up := &ddbtypes.Update{
			TableName: aws.String(s.table), Key: key(softPK(r.Catalog), sk),
			UpdateExpression:          aws.String("SET legal_hold = :h"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":h": &ddbtypes.AttributeValueMemberBOOL{Value: on}},
		}
		if i == 0 {
			up.ConditionExpression = aws.String("attribute_exists(pk)")
		}
		items = append(items, ddbtypes.TransactWriteItem{Update: up})
	}
	epk, esk := expiryKey(r)
	if on {
		items = append(items, ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(epk, esk)}})
	} else {
		item, err := withKey(struct {
			Catalog string `dynamodbav:"catalog"`
			UUID    string `dynamodbav:"table_uuid"`
		}{r.Catalog, r.Entry.TableUUID}, epk, esk)
		if err != nil {
			return r, err
		}
		items = append(items, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item}})
	}
	items, err := s.withEvents(items, events)
	if err != nil {
		return r, err
	}
	err = s.transactWrite(ctx, items)
	if cancelReasons(err) != nil {
		return r, ErrNotFound
	}
	r.LegalHold = on
	return r, err
}

// Expired is one due entry of the expiry index.
type Expired struct {
	Catalog   string `dynamodbav:"catalog"`
	TableUUID string `dynamodbav:"table_uuid"`
}

// ExpiredBefore pages through the records whose purge time is before t,
// oldest first: one query on the expiry index. A page resumes after the key
// start with a range condition rather than ExclusiveStartKey: the sweep
// deletes what it reads, and a start key whose item is gone ends a query in
// the local emulator (minidyn 0.8.2) though not in DynamoDB.
func (s *Store) ExpiredBefore(ctx context.Context, t time.Time, start string, limit int) ([]Expired, string, error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :t"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":pk":   &ddbtypes.AttributeValueMemberS{Value: "SOFTEXP"},
			":from": &ddbtypes.AttributeValueMemberS{Value: start + "\u0001"},
			// Purge times sort as text; "<" is "up to the second before t".
			":t": &ddbtypes.AttributeValueMemberS{Value: ExpiryTime(t.Add(-time.Second)) + "$"},
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(int32(limit)),
	}
	res, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", err
	}
	out := make([]Expired, len(res.Items))
	for i, it := range res.Items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, "", err
		}
	}
	next := ""
	if len(res.LastEvaluatedKey) > 0 && len(res.Items) > 0 {
		var k struct {
			SK string `dynamodbav:"sk"`
		}
		if err := unmarshal(res.Items[len(res.Items)-1], &k); err != nil {
			return nil, "", err
		}
		next = k.SK
	}
	return out, next, nil
}
