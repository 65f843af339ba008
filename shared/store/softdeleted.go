package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Soft-deleted tables (SPEC §4). Three items per record, written and removed
// in the transaction that changes the table's state:
//
//	SOFT#<catalog> / U#<uuid>␞<gen>                    the record (by uuid: legal hold, undrop with a uuid)
//	SOFT#<catalog> / N#<namespace>␞<name>␞<uuid>␞<gen> the same record by name (listing, generations)
//	SOFTEXP        / <purge-at>#<catalog>#<uuid>#<gen> the expiry index: "expired before T" is one query
//
// <gen> is the record's generation, new at every soft drop: several records
// of one table uuid (dropped, undropped and dropped again; or two tables
// registered from copies of one metadata file) never share a key, so a
// stale reader's transition, conditioned on its record's key and version,
// never ends a newer generation (SPEC §2 "Generations"). Records from before
// generations have none (keys without "␞<gen>"); no new record is keyed so.
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
	// Generation tells this soft drop apart from every other of the same
	// table uuid (NewGeneration; SoftDelete sets one when empty). "" on a
	// record from before generations.
	Generation string `dynamodbav:"generation"`
	// Version counts the record's changes (1 when dropped; 0: a record
	// from before versions). Every transition is conditioned on the
	// version it read.
	Version int64 `dynamodbav:"version"`
}

// NewGeneration names a new soft-deleted generation: its time (so one
// table's generations list oldest first) and 6 random bytes.
func NewGeneration() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%013x-%s", time.Now().UnixMilli(), hex.EncodeToString(b))
}

// ErrLegalHold: the record is under legal hold.
var ErrLegalHold = errors.New("under legal hold")

// recordSep separates the parts of a name-index key; identifiers never hold
// control characters.
const recordSep = "\x1e"

func softPK(cat string) string { return "SOFT#" + cat }

// recordID is a record's uuid and generation as its keys end.
func recordID(uuid, gen string) string {
	if gen == "" {
		return uuid // from before generations
	}
	return uuid + recordSep + gen
}

func softKeys(r SoftDeleted) (uuidSK, nameSK string) {
	id := recordID(r.Entry.TableUUID, r.Generation)
	return "U#" + id, "N#" + strings.Join(r.Entry.Namespace, levelSep) + recordSep + r.Entry.Name + recordSep + id
}

func expiryKey(r SoftDeleted) (string, string) {
	sk := r.PurgeAt + "#" + r.Catalog + "#" + r.Entry.TableUUID
	if r.Generation != "" {
		sk += "#" + r.Generation
	}
	return "SOFTEXP", sk
}

// expiryItem is an expiry index item's content: the record it names.
type expiryItem struct {
	Catalog    string `dynamodbav:"catalog"`
	UUID       string `dynamodbav:"table_uuid"`
	Generation string `dynamodbav:"generation,omitempty"`
}

// versionGuard conditions a write of r's uuid item on r's version as read.
func versionGuard(r SoftDeleted) (string, map[string]string, map[string]ddbtypes.AttributeValue) {
	names := map[string]string{"#ver": "version"}
	if r.Version == 0 {
		return "attribute_exists(pk) AND attribute_not_exists(#ver)", names, map[string]ddbtypes.AttributeValue{}
	}
	return "attribute_exists(pk) AND #ver = :ver", names, map[string]ddbtypes.AttributeValue{
		":ver": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(r.Version)},
	}
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
		item, err := withKey(expiryItem{r.Catalog, r.Entry.TableUUID, r.Generation}, epk, esk)
		if err != nil {
			return nil, err
		}
		items = append(items, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item}})
	}
	return items, nil
}

// softRemoveItems deletes a record's items; the uuid item must exist at
// the version read (the guard that makes undrop, purge-now and expiry
// happen once, and only to the generation that was read).
func (s *Store) softRemoveItems(r SoftDeleted) []ddbtypes.TransactWriteItem {
	uk, nk := softKeys(r)
	epk, esk := expiryKey(r)
	cond, names, vals := versionGuard(r)
	guard := &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(softPK(r.Catalog), uk), ConditionExpression: aws.String(cond), ExpressionAttributeNames: names}
	if len(vals) > 0 {
		guard.ExpressionAttributeValues = vals
	}
	return []ddbtypes.TransactWriteItem{
		{Delete: guard},
		{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(softPK(r.Catalog), nk)}},
		{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(epk, esk)}},
	}
}

// SoftDelete moves an entry still at the pointer it was read with out of
// the active view into a soft-deleted record (a new generation: r's, or a
// new one when r names none), in one transaction; the entry's location
// stays claimed (by the record). ErrNotFound when the entry moved or
// vanished.
func (s *Store) SoftDelete(ctx context.Context, cat string, e TableEntry, r SoftDeleted, events ...OutboxEvent) error {
	r.Catalog, r.Entry, r.Version = cat, e, 1
	if r.Generation == "" {
		r.Generation = NewGeneration()
	}
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
		o := e.owner(cat)
		o.SoftDeleted = true
		lc.RetagAll(hs, o)
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

// SoftDeletedRecord loads one generation of a table uuid's records
// (generation "": the record from before generations); ErrNotFound if none.
func (s *Store) SoftDeletedRecord(ctx context.Context, cat, uuid, gen string) (SoftDeleted, error) {
	var r SoftDeleted
	err := s.get(ctx, softPK(cat), "U#"+recordID(uuid, gen), &r)
	return r, err
}

// SoftDeletedByUUID lists the soft-deleted generations of a table uuid.
func (s *Store) SoftDeletedByUUID(ctx context.Context, cat, uuid string) ([]SoftDeleted, error) {
	var out []SoftDeleted
	token := ""
	for {
		page, next, err := s.softPage(ctx, cat, "U#"+uuid, token, 100)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if r.Entry.TableUUID == uuid { // not a longer uuid that starts alike
				out = append(out, r)
			}
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
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
// purged or expired meanwhile) or changed since it was read.
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
		lc.RetagAll(hs, to.owner(r.Catalog))
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
// gone (another sweep, a purge-now or an undrop got there first) or changed
// since it was read; ErrLegalHold when it is under legal hold.
func (s *Store) PermanentlyDelete(ctx context.Context, r SoftDeleted, job *Job, events ...OutboxEvent) error {
	items := s.softRemoveItems(r)
	// Legal hold is checked by the transaction, not by the read before it.
	guard := items[0].Delete
	guard.ConditionExpression = aws.String(aws.ToString(guard.ConditionExpression) + " AND legal_hold = :f")
	if guard.ExpressionAttributeValues == nil {
		guard.ExpressionAttributeValues = map[string]ddbtypes.AttributeValue{}
	}
	guard.ExpressionAttributeValues[":f"] = &ddbtypes.AttributeValueMemberBOOL{Value: false}
	var lc locChange
	if job != nil {
		job.CreatedAt, job.UpdatedAt = now(), now()
		job.Hold, job.Extra = r.Entry.Hold, r.Entry.Extra
		ji, err := s.jobCreateItems(*job, nil)
		if err != nil {
			return err
		}
		items = append(items, ji...)
		o := r.Entry.owner(r.Catalog)
		o.JobID = job.ID
		lc.RetagAll(r.Entry.Holds(), o)
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
			if cur, gerr := s.SoftDeletedRecord(ctx, r.Catalog, r.Entry.TableUUID, r.Generation); gerr == nil && cur.LegalHold {
				return ErrLegalHold
			}
		}
		return ErrConditionFailed
	}
	return err
}

// SetLegalHold sets or clears a record's legal hold: held records leave the
// expiry index, cleared ones come back to it (at their purge time; a time
// already past makes them due at the next sweep). ErrConditionFailed when
// the record is gone or changed since it was read.
func (s *Store) SetLegalHold(ctx context.Context, r SoftDeleted, on bool, events ...OutboxEvent) (SoftDeleted, error) {
	uk, nk := softKeys(r)
	next := r.Version + 1
	var items []ddbtypes.TransactWriteItem
	for i, sk := range []string{uk, nk} {
		up := &ddbtypes.Update{
			TableName: aws.String(s.table), Key: key(softPK(r.Catalog), sk),
			UpdateExpression:         aws.String("SET legal_hold = :h, #ver = :next"),
			ExpressionAttributeNames: map[string]string{"#ver": "version"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":h":    &ddbtypes.AttributeValueMemberBOOL{Value: on},
				":next": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(next)},
			},
		}
		if i == 0 {
			cond, _, vals := versionGuard(r)
			up.ConditionExpression = aws.String(cond)
			for k, v := range vals {
				up.ExpressionAttributeValues[k] = v
			}
		}
		items = append(items, ddbtypes.TransactWriteItem{Update: up})
	}
	epk, esk := expiryKey(r)
	if on {
		items = append(items, ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(epk, esk)}})
	} else {
		item, err := withKey(expiryItem{r.Catalog, r.Entry.TableUUID, r.Generation}, epk, esk)
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
		return r, ErrConditionFailed
	}
	if err != nil {
		return r, err
	}
	r.LegalHold, r.Version = on, next
	return r, nil
}

// Expired is one due entry of the expiry index.
type Expired struct {
	Catalog    string `dynamodbav:"catalog"`
	TableUUID  string `dynamodbav:"table_uuid"`
	Generation string `dynamodbav:"generation"`
	Key        string `dynamodbav:"sk"`
}

// Of reports whether the entry is r's own while r is due to expire: r is
// not held and the entry is at r's purge time. Anything else is a stale
// entry (RemoveStale).
func (e Expired) Of(r SoftDeleted) bool {
	_, sk := expiryKey(r)
	return !r.LegalHold && e.Key == sk
}

// RemoveStale deletes an expiry entry that names no due record: r is the
// record it names as read (nil: there was none). The delete is conditioned
// on that read (no record; or the record at the version read), so a hold
// cleared meanwhile, whose transaction puts the entry back, keeps it.
// ErrConditionFailed when the record changed.
func (s *Store) RemoveStale(ctx context.Context, e Expired, r *SoftDeleted) error {
	check := &ddbtypes.ConditionCheck{
		TableName: aws.String(s.table), Key: key(softPK(e.Catalog), "U#"+recordID(e.TableUUID, e.Generation)),
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}
	if r != nil {
		cond, names, vals := versionGuard(*r)
		check.ConditionExpression, check.ExpressionAttributeNames = aws.String(cond), names
		if len(vals) > 0 {
			check.ExpressionAttributeValues = vals
		}
	}
	return s.transact(ctx, []ddbtypes.TransactWriteItem{
		{ConditionCheck: check},
		{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key("SOFTEXP", e.Key)}},
	})
}

// ExpiredBefore pages through the records whose purge time is before t,
// oldest first: one query on the expiry index. A page resumes after the key
// start with a range condition (the sweep deletes what it reads; DynamoDB,
// and the local emulator, continue after a deleted ExclusiveStartKey too).
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

// SetSoftDeletedHold records a backfilled claim on a record still at the
// version it was read with (both its items: an undrop or a permanent
// delete carries the claim on), taking the claim in the same transaction.
// ErrConditionFailed: the record changed or already holds a claim;
// ErrLocationTaken: the claim overlaps another owner's.
func (s *Store) SetSoftDeletedHold(ctx context.Context, r SoftDeleted, claim Claim, extra ...Claim) error {
	h, err := marshalValue(claim.Hold)
	if err != nil {
		return err
	}
	loc, set, x, err := s.takeAll(claim, extra, "#e.#h = :h", "#e.#x = :x")
	if err != nil {
		return err
	}
	uk, nk := softKeys(r)
	var items []ddbtypes.TransactWriteItem
	for i, sk := range []string{uk, nk} {
		up := &ddbtypes.Update{
			TableName: aws.String(s.table), Key: key(softPK(r.Catalog), sk),
			UpdateExpression:         aws.String(set + ", #ver = :next"),
			ExpressionAttributeNames: map[string]string{"#e": "entry", "#h": "hold", "#ver": "version"},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":h": h, ":next": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(r.Version + 1)},
			},
		}
		if x != nil {
			up.ExpressionAttributeNames["#x"], up.ExpressionAttributeValues[":x"] = "extra_holds", x
		}
		if i == 0 {
			cond, _, vals := versionGuard(r)
			up.ConditionExpression = aws.String(cond + " AND attribute_not_exists(#e.#h)")
			for k, v := range vals {
				up.ExpressionAttributeValues[k] = v
			}
		}
		items = append(items, ddbtypes.TransactWriteItem{Update: up})
	}
	return s.runLoc(ctx, append(items, loc...), len(items))
}
