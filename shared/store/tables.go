package store

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GetTable loads a table entry; ErrNotFound if missing.
func (s *Store) GetTable(ctx context.Context, cat string, ns []string, name string) (TableEntry, error) {
	var e TableEntry
	pk, sk := tableKey(cat, ns, name)
	err := s.get(ctx, pk, sk, &e)
	return e, err
}

// ListTables pages through the tables of one namespace.
func (s *Store) ListTables(ctx context.Context, cat string, ns []string, token string, limit int) ([]TableEntry, string, error) {
	items, next, err := s.query(ctx, tablePK(cat, ns), "T#", token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]TableEntry, len(items))
	for i, it := range items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, "", err
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
	// Overwrite (register with overwrite) replaces whatever entry is there.
	Overwrite bool
}

func (s *Store) nsCheck(cat string, ns []string) ddbtypes.TransactWriteItem {
	pk, sk := nsKey(cat, ns)
	return ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{
		TableName: aws.String(s.table), Key: key(pk, sk), ConditionExpression: aws.String("attribute_exists(pk)"),
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
	case w.Overwrite:
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
// namespace's existence and the absence of a purge tombstone. On a lost guard
// it returns ErrNotFound (a namespace of a create is gone), ErrTombstoned,
// ErrExists (a create found the name taken) or ErrConditionFailed (a pointer
// moved), with the index of the failed write.
func (s *Store) WriteTables(ctx context.Context, cat string, writes []TableWrite) (int, error) {
	var items []ddbtypes.TransactWriteItem
	owner := []int{} // which write each transaction item belongs to
	isNS := []bool{} // whether the item is a namespace guard
	isTomb := []bool{}
	checked := map[string]bool{} // one guard per namespace: DynamoDB refuses two operations on one item
	for i, w := range writes {
		if nsk := strings.Join(w.Entry.Namespace, levelSep); w.Expected == "" && !checked[nsk] {
			checked[nsk] = true
			items = append(items, s.nsCheck(cat, w.Entry.Namespace))
			owner, isNS, isTomb = append(owner, i), append(isNS, true), append(isTomb, false)
		}
		if w.Expected == "" {
			// A name held by a purge job cannot be created or registered.
			tpk, tsk := tombKey(cat, w.Entry.Namespace, w.Entry.Name)
			items = append(items, ddbtypes.TransactWriteItem{ConditionCheck: &ddbtypes.ConditionCheck{
				TableName: aws.String(s.table), Key: key(tpk, tsk), ConditionExpression: aws.String("attribute_not_exists(pk)"),
			}})
			owner, isNS, isTomb = append(owner, i), append(isNS, false), append(isTomb, true)
		}
		it, err := s.tablePut(cat, w)
		if err != nil {
			return i, err
		}
		items = append(items, it)
		owner, isNS, isTomb = append(owner, i), append(isNS, false), append(isTomb, false)
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if reasons := cancelReasons(err); reasons != nil {
		for j, failed := range reasons {
			if !failed || j >= len(owner) {
				continue
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
// new location: one conditional write. ErrNotFound if the entry is gone,
// ErrConditionFailed if another commit won.
func (s *Store) CommitTable(ctx context.Context, cat string, e TableEntry, expected string) error {
	pk, sk := tableKey(cat, e.Namespace, e.Name)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 key(pk, sk),
		UpdateExpression:    aws.String("SET metadata_location = :new, updated_at = :now"),
		ConditionExpression: aws.String("metadata_location = :old"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":new": &ddbtypes.AttributeValueMemberS{Value: e.MetadataLocation},
			":old": &ddbtypes.AttributeValueMemberS{Value: expected},
			":now": &ddbtypes.AttributeValueMemberS{Value: now()},
		},
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

// RenameTable moves an entry to a new identifier atomically. ErrNotFound:
// the source is gone or the destination namespace is missing (second value
// tells which: true for the namespace); ErrExists: destination taken.
func (s *Store) RenameTable(ctx context.Context, cat string, from TableEntry, to TableEntry) (bool, error) {
	fpk, fsk := tableKey(cat, from.Namespace, from.Name)
	put, err := s.tablePut(cat, TableWrite{Entry: to})
	if err != nil {
		return false, err
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
		{Delete: &ddbtypes.Delete{
			TableName: aws.String(s.table), Key: key(fpk, fsk),
			ConditionExpression:       aws.String("metadata_location = :old"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":old": &ddbtypes.AttributeValueMemberS{Value: from.MetadataLocation}},
		}},
		s.nsCheck(cat, to.Namespace),
		put,
	}})
	if reasons := cancelReasons(err); reasons != nil {
		switch {
		case reasons[0]:
			return false, ErrNotFound
		case len(reasons) > 1 && reasons[1]:
			return true, ErrNotFound
		default:
			return false, ErrExists
		}
	}
	return false, err
}

// DeleteTable removes an entry and returns it; ErrNotFound if missing.
func (s *Store) DeleteTable(ctx context.Context, cat string, ns []string, name string) (TableEntry, error) {
	pk, sk := tableKey(cat, ns, name)
	res, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:           aws.String(s.table),
		Key:                 key(pk, sk),
		ConditionExpression: aws.String("attribute_exists(pk)"),
		ReturnValues:        ddbtypes.ReturnValueAllOld,
	})
	if conditionFailed(err) {
		return TableEntry{}, ErrNotFound
	}
	if err != nil {
		return TableEntry{}, err
	}
	var e TableEntry
	return e, unmarshal(res.Attributes, &e)
}
