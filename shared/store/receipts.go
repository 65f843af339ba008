package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Receipt is the stored outcome of a request made with an Idempotency-Key.
type Receipt struct {
	Key         string `dynamodbav:"key"`
	Fingerprint string `dynamodbav:"fingerprint"`
	Done        bool   `dynamodbav:"done"`
	Status      int    `dynamodbav:"status"`
	ContentType string `dynamodbav:"content_type"`
	// Headers the answer carried beside its body (a drop's Location and
	// job id): a replay must hand out the same handle.
	Headers map[string]string `dynamodbav:"headers,omitempty"`
	Body    []byte            `dynamodbav:"body"`
	// ExpiresAt is epoch seconds; the table's TTL attribute in AWS.
	ExpiresAt int64 `dynamodbav:"expires_at"`
}

func receiptKey(scope, k string) (string, string) { return "IDEM#" + scope, "K#" + k }

// ClaimReceipt claims key for a request in flight. It returns (nil, nil) when
// the claim is new, or the receipt already there (done or in flight).
// An expired receipt is claimed over.
func (s *Store) ClaimReceipt(ctx context.Context, scope string, r Receipt, at time.Time) (*Receipt, error) {
	pk, sk := receiptKey(scope, r.Key)
	item, err := withKey(r, pk, sk)
	if err != nil {
		return nil, err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_not_exists(pk) OR expires_at < :now"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":now": &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(at.Unix(), 10)},
		},
	})
	if !conditionFailed(err) {
		return nil, err
	}
	var prev Receipt
	if err := s.get(ctx, pk, sk, &prev); err != nil {
		return nil, fmt.Errorf("read receipt: %w", err)
	}
	return &prev, nil
}

// CompleteReceipt stores the answer of a claimed request.
func (s *Store) CompleteReceipt(ctx context.Context, scope string, r Receipt) error {
	r.Done = true
	pk, sk := receiptKey(scope, r.Key)
	item, err := withKey(r, pk, sk)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	return err
}

// ReleaseReceipt drops a claim whose request failed in a way worth retrying.
func (s *Store) ReleaseReceipt(ctx context.Context, scope, k string) error {
	pk, sk := receiptKey(scope, k)
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pk, sk)})
	return err
}
