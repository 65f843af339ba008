package store

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The event outbox. A lifecycle event is written in the same transaction as
// the state change it reports, so neither exists without the other; a relay
// publishes pending events oldest first and deletes each once published (at
// least once: a consumer dedupes on the event id).
//
//	OUTBOX / <created, unix ns, 20 digits>#<event id>
//
// One partition: the relay reads it in order, and in AWS its stream is one
// ordered shard lineage. Lifecycle events are few (a handful per drop).

// OutboxEvent is one pending event: its type and its encoded detail.
type OutboxEvent struct {
	ID      string `dynamodbav:"id"`
	Type    string `dynamodbav:"type"`
	Payload string `dynamodbav:"payload"`
	Created int64  `dynamodbav:"created,string"` // unix nanoseconds, a string: past 2^53 (docs/design/local.md)
}

// OutboxPK is the partition of pending events (the stream filter names it).
const OutboxPK = "OUTBOX"

func outboxKey(e OutboxEvent) (string, string) {
	return OutboxPK, fmt.Sprintf("%020d#%s", e.Created, e.ID)
}

// outboxPuts are the transaction items that record events.
func (s *Store) outboxPuts(events []OutboxEvent) ([]ddbtypes.TransactWriteItem, error) {
	items := make([]ddbtypes.TransactWriteItem, 0, len(events))
	for _, e := range events {
		pk, sk := outboxKey(e)
		item, err := withKey(e, pk, sk)
		if err != nil {
			return nil, err
		}
		items = append(items, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item}})
	}
	return items, nil
}

// withEvents appends the puts of events to a transaction's items.
func (s *Store) withEvents(items []ddbtypes.TransactWriteItem, events []OutboxEvent) ([]ddbtypes.TransactWriteItem, error) {
	puts, err := s.outboxPuts(events)
	return append(items, puts...), err
}

// PendingEvents returns up to limit unpublished events, oldest first.
func (s *Store) PendingEvents(ctx context.Context, limit int) ([]OutboxEvent, error) {
	items, _, err := s.query(ctx, OutboxPK, "", "", limit)
	if err != nil {
		return nil, err
	}
	out := make([]OutboxEvent, len(items))
	for i, it := range items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DeleteEvent removes a published event.
func (s *Store) DeleteEvent(ctx context.Context, e OutboxEvent) error {
	pk, sk := outboxKey(e)
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)})
	return err
}

// RecordEvents records events that report a change made outside the store
// (a repair's restored objects): one put each, after the change.
func (s *Store) RecordEvents(ctx context.Context, events ...OutboxEvent) error {
	puts, err := s.outboxPuts(events)
	if err != nil {
		return err
	}
	for _, p := range puts {
		if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.Put.TableName, Item: p.Put.Item}); err != nil {
			return err
		}
	}
	return nil
}
