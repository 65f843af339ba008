// Package store keeps icehold's records in one DynamoDB table: catalogs,
// namespaces, table entries (the metadata pointer), grants and idempotency
// receipts. Every write that guards an invariant is a conditional write or a
// transaction, so the rules hold under concurrent Lambdas.
package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB lists the SDK calls the store makes; *dynamodb.Client satisfies it.
type DynamoDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// TableCreator is only needed where icehold creates its own table (locally).
type TableCreator interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: a record with that key exists already.
	ErrExists = errors.New("already exists")
	// ErrConditionFailed: a guard of a conditional write or transaction failed.
	ErrConditionFailed = errors.New("condition failed")
	// ErrBadPageToken: a paging token that this store did not hand out.
	ErrBadPageToken = errors.New("invalid page token")
)

// Store is the DynamoDB-backed record store.
type Store struct {
	db    DynamoDB
	table string
}

// New returns a store over the named DynamoDB table.
func New(db DynamoDB, table string) *Store {
	return &Store{db: db, table: table}
}

// TableName is the DynamoDB table the store uses.
func (s *Store) TableName() string { return s.table }

// CreateTable creates the store's table (pk/sk strings, on-demand). Locally
// only: in AWS the CDK stack owns the table.
func CreateTable(ctx context.Context, db TableCreator, name string) error {
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
			{AttributeName: aws.String("sk"), AttributeType: ddbtypes.ScalarAttributeTypeS},
		},
		KeySchema: []ddbtypes.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: ddbtypes.KeyTypeRange},
		},
		BillingMode: ddbtypes.BillingModePayPerRequest,
	})
	var inUse *ddbtypes.ResourceInUseException
	if errors.As(err, &inUse) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return nil
}

func key(pk, sk string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: pk},
		"sk": &ddbtypes.AttributeValueMemberS{Value: sk},
	}
}

// conditionFailed reports whether err is a failed condition of a single-item write.
func conditionFailed(err error) bool {
	var ccf *ddbtypes.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// cancelReasons returns, for a cancelled transaction, which items failed their
// condition (by index); nil when err is not a cancellation.
func cancelReasons(err error) []bool {
	var tce *ddbtypes.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	failed := make([]bool, len(tce.CancellationReasons))
	for i, r := range tce.CancellationReasons {
		failed[i] = aws.ToString(r.Code) == "ConditionalCheckFailed"
	}
	return failed
}

// transactWrite runs a transaction. DynamoDB cancels a transaction that
// collides with another one in flight on the same items (reason
// TransactionConflict, no condition failed); that is retried here, so
// callers see only the outcome of their own conditions.
func (s *Store) transactWrite(ctx context.Context, items []ddbtypes.TransactWriteItem) error {
	for attempt := 0; ; attempt++ {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			s.tidy(ctx, emptied(items))
		}
		if attempt >= 8 || !conflictOnly(err) {
			return err
		}
		d := time.Duration(5<<attempt)*time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// conflictOnly: a cancellation for a conflicting transaction, no failed condition.
func conflictOnly(err error) bool {
	var tce *ddbtypes.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	conflict := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "ConditionalCheckFailed":
			return false
		case "TransactionConflict":
			conflict = true
		}
	}
	return conflict
}

func (s *Store) get(ctx context.Context, pk, sk string, out any) error {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(pk, sk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return err
	}
	if res.Item == nil {
		return ErrNotFound
	}
	return unmarshal(res.Item, out)
}

// exists is a cheap existence probe used for guards that need a message.
func (s *Store) exists(ctx context.Context, pk, sk string) (bool, error) {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            aws.String(s.table),
		Key:                  key(pk, sk),
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String("pk"),
	})
	if err != nil {
		return false, err
	}
	return res.Item != nil, nil
}

// putNew writes an item that must not exist yet.
func (s *Store) putNew(ctx context.Context, item map[string]ddbtypes.AttributeValue) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if conditionFailed(err) {
		return ErrExists
	}
	return err
}

// query pages through items of one partition whose sort key starts with prefix.
func (s *Store) query(ctx context.Context, pk, prefix, token string, limit int) ([]map[string]ddbtypes.AttributeValue, string, error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":pk": &ddbtypes.AttributeValueMemberS{Value: pk},
			":p":  &ddbtypes.AttributeValueMemberS{Value: prefix},
		},
		ConsistentRead: aws.Bool(true),
	}
	if prefix == "" {
		// DynamoDB refuses an empty string as a key value, in a key
		// condition too (moto showed it; the embedded emulator accepts it).
		in.KeyConditionExpression = aws.String("pk = :pk")
		delete(in.ExpressionAttributeValues, ":p")
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	if token != "" {
		sk, err := decodeToken(token, pk, prefix)
		if err != nil {
			return nil, "", err
		}
		in.ExclusiveStartKey = key(pk, sk)
	}
	res, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if res.LastEvaluatedKey != nil && len(res.Items) > 0 {
		var k struct {
			SK string `dynamodbav:"sk"`
		}
		if err := unmarshal(res.LastEvaluatedKey, &k); err != nil {
			return nil, "", err
		}
		next = encodeToken(pk, prefix, k.SK)
	}
	return res.Items, next, nil
}
