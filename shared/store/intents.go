package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Pending metadata writes. A request that writes metadata files records them
// first in one intent item; the transaction that makes them current deletes
// it. An intent that outlives every request (a lost create, a lost commit, a
// crash between the file and the transaction) names files nothing
// references: the orphan sweep sends them through the delete pipeline.
//
//	INTENT#<shard> / <created, unix ns, 20 digits>#<id>
//
// Eight shards spread the writes; "older than T" is one query per shard.

// IntentShards is how many partitions the intents are spread over.
const IntentShards = 8

// Intent is one request's pending metadata files.
type Intent struct {
	ID      string   `dynamodbav:"id"`
	Catalog string   `dynamodbav:"catalog"`
	Files   []string `dynamodbav:"files"`
	Created int64    `dynamodbav:"created,string"` // unix nanoseconds, a string: past 2^53 (docs/design/local.md)
}

func intentKey(in Intent) (string, string) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(in.ID))
	return fmt.Sprintf("INTENT#%d", h.Sum32()%IntentShards), fmt.Sprintf("%020d#%s", in.Created, in.ID)
}

// PutIntent records (or grows) a request's intent, before its next file is
// written.
func (s *Store) PutIntent(ctx context.Context, in Intent) error {
	pk, sk := intentKey(in)
	item, err := withKey(in, pk, sk)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	return err
}

// intentDone is the transaction item that retires an intent with the write
// that makes its files current.
func (s *Store) intentDone(in Intent) ddbtypes.TransactWriteItem {
	pk, sk := intentKey(in)
	return ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(pk, sk)}}
}

// DeleteIntent retires an intent outside a transaction (the sweep, once its
// files are in a job).
func (s *Store) DeleteIntent(ctx context.Context, in Intent) error {
	pk, sk := intentKey(in)
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)})
	return err
}

// StaleIntents returns up to limit intents created before t, oldest first
// within each shard.
func (s *Store) StaleIntents(ctx context.Context, t time.Time, limit int) ([]Intent, error) {
	var out []Intent
	for shard := 0; shard < IntentShards && len(out) < limit; shard++ {
		// BETWEEN, not ExclusiveStartKey: the sweep deletes what it read, so
		// every query starts again from the oldest left.
		res, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(s.table),
			KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":pk":   &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("INTENT#%d", shard)},
				":from": &ddbtypes.AttributeValueMemberS{Value: "0"},
				":to":   &ddbtypes.AttributeValueMemberS{Value: fmt.Sprintf("%020d", t.UnixNano())},
			},
			ConsistentRead: aws.Bool(true),
			Limit:          aws.Int32(int32(limit - len(out))),
		})
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			var in Intent
			if err := unmarshal(it, &in); err != nil {
				return nil, err
			}
			out = append(out, in)
		}
	}
	return out, nil
}
