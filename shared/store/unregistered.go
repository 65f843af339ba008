package store

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Unregistered is a table the catalog forgot (unregisterTable) while its
// files stay: its entry, as it was, keeps the table's claims, so that no
// other table takes its prefixes and no purge reaches its files while no
// table owns them; a register of its metadata takes them back.
type Unregistered struct {
	Catalog          string     `dynamodbav:"catalog"`
	Entry            TableEntry `dynamodbav:"entry"`
	UnregisteredAt   string     `dynamodbav:"unregistered_at"`
	UnregisteredBy   string     `dynamodbav:"unregistered_by"`
	MetadataLocation string     `dynamodbav:"metadata_location"`
}

func unregisteredKey(cat, tableUUID string) (string, string) { return "UNREG#" + cat, "U#" + tableUUID }

// unregisteredOwner is how the claims of an unregistered table name it.
func unregisteredOwner(cat string, e TableEntry) Owner {
	return Owner{Kind: OwnerTable, Catalog: cat, Namespace: e.Namespace, Name: e.Name, Unregistered: true}
}

// UnregisterTable removes an entry still at the pointer it was read with and
// keeps its claims under the record of the unregistered table, in one
// transaction. ErrConditionFailed: the pointer moved; ErrExists: a table of
// the same uuid is already unregistered in the catalog.
func (s *Store) UnregisterTable(ctx context.Context, cat string, e TableEntry, by string) error {
	pk, sk := tableKey(cat, e.Namespace, e.Name)
	rec := Unregistered{Catalog: cat, Entry: e, UnregisteredAt: now(), UnregisteredBy: by, MetadataLocation: e.MetadataLocation}
	upk, usk := unregisteredKey(cat, e.TableUUID)
	item, err := withKey(rec, upk, usk)
	if err != nil {
		return err
	}
	items := []ddbtypes.TransactWriteItem{
		{Delete: &ddbtypes.Delete{
			TableName: aws.String(s.table), Key: key(pk, sk),
			ConditionExpression:       aws.String("metadata_location = :m"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":m": &ddbtypes.AttributeValueMemberS{Value: e.MetadataLocation}},
		}},
		s.nsCount(cat, e.Namespace, -1),
		{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	}
	if hs := e.Holds(); len(hs) > 0 {
		var lc locChange
		lc.RetagAll(hs, unregisteredOwner(cat, e))
		loc, err := s.locItems(&lc)
		if err != nil {
			return err
		}
		items = append(items, loc...)
	}
	return failedAt(s.transactWrite(ctx, items), map[int]error{0: ErrConditionFailed, 1: ErrNotFound, 2: ErrExists})
}

// GetUnregistered reads the record of an unregistered table; ErrNotFound
// if the catalog holds none of that uuid.
func (s *Store) GetUnregistered(ctx context.Context, cat, tableUUID string) (Unregistered, error) {
	var u Unregistered
	pk, sk := unregisteredKey(cat, tableUUID)
	err := s.get(ctx, pk, sk, &u)
	return u, err
}

// ListUnregistered pages through a catalog's unregistered tables (by
// table uuid).
func (s *Store) ListUnregistered(ctx context.Context, cat, token string, limit int) ([]Unregistered, string, error) {
	pk, _ := unregisteredKey(cat, "")
	items, next, err := s.query(ctx, pk, "U#", token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]Unregistered, len(items))
	for i, it := range items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// UnregisteredByClaim finds the unregistered table of a catalog that holds
// the claim of id (a claim item names an unregistered owner by its name,
// which a new table may have taken since); ErrNotFound if none does.
func (s *Store) UnregisteredByClaim(ctx context.Context, cat, id string) (Unregistered, error) {
	for token := ""; ; {
		page, next, err := s.ListUnregistered(ctx, cat, token, 100)
		if err != nil {
			return Unregistered{}, err
		}
		for _, u := range page {
			for _, h := range u.Entry.Holds() {
				if h.ID == id {
					return u, nil
				}
			}
		}
		if token = next; token == "" {
			return Unregistered{}, ErrNotFound
		}
	}
}

// Reregister ends an unregistered table's record and creates its entry e,
// whose holds are the record's claims (retagged to it), in one transaction
// guarded as a create is (the namespace exists, no purge tombstone, the
// name is free).
func (s *Store) Reregister(ctx context.Context, u Unregistered, e TableEntry) error {
	put, err := s.tablePut(u.Catalog, TableWrite{Entry: e})
	if err != nil {
		return err
	}
	upk, usk := unregisteredKey(u.Catalog, u.Entry.TableUUID)
	items := []ddbtypes.TransactWriteItem{
		{Delete: &ddbtypes.Delete{
			TableName: aws.String(s.table), Key: key(upk, usk),
			ConditionExpression:       aws.String("metadata_location = :m"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":m": &ddbtypes.AttributeValueMemberS{Value: u.MetadataLocation}},
		}},
		s.nsCount(u.Catalog, e.Namespace, 1),
		s.tombCheck(u.Catalog, e.Namespace, e.Name),
		put,
	}
	if hs := e.Holds(); len(hs) > 0 {
		var lc locChange
		lc.RetagAll(hs, Owner{Kind: OwnerTable, Catalog: u.Catalog, Namespace: e.Namespace, Name: e.Name})
		loc, err := s.locItems(&lc)
		if err != nil {
			return err
		}
		items = append(items, loc...)
	}
	return failedAt(s.transactWrite(ctx, items), map[int]error{0: ErrConditionFailed, 1: ErrNotFound, 2: ErrTombstoned, 3: ErrExists})
}

// failedAt maps the first failed condition of a cancelled transaction to
// the error its item means (a claim item: ErrConditionFailed).
func failedAt(err error, by map[int]error) error {
	failed := cancelReasons(err)
	if failed == nil {
		return err
	}
	for i, f := range failed {
		if f {
			if e, ok := by[i]; ok {
				return e
			}
			return ErrConditionFailed
		}
	}
	return ErrConditionFailed
}
