package store

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Partition retention policies (SPEC §5). All policies of all catalogs sit
// in one partition, so the scheduled sweep walks them with one paged query
// (a policy is written rarely and read once per sweep: no hot item):
//
//	RETENTION / <catalog>#<namespace levels joined by 0x1F>␞<table name>   the policy
//	RETSWEEP  / CURSOR                                                        where the sweep goes on

// Retention is one table's partition retention policy. It belongs to the
// table generation it was set on (TableUUID): a table dropped and created
// again, or renamed, needs its policy set again.
type Retention struct {
	Catalog   string   `dynamodbav:"catalog"`
	Namespace []string `dynamodbav:"ns"`
	Name      string   `dynamodbav:"name"`
	TableUUID string   `dynamodbav:"table_uuid"`
	// Field is a partition field of the table's spec; Keep an ISO-8601
	// duration as the client sent it.
	Field     string `dynamodbav:"field"`
	Keep      string `dynamodbav:"keep"`
	CreatedAt string `dynamodbav:"created_at"`
	CreatedBy string `dynamodbav:"created_by"`
	// AppliedCutoff (RFC 3339) is the last cutoff a sweep applied to the
	// table: partitions that end at or before it were dropped.
	AppliedCutoff string `dynamodbav:"applied_cutoff,omitempty"`
	AppliedAt     string `dynamodbav:"applied_at,omitempty"`
}

const retentionPK = "RETENTION"

func retentionSK(cat string, ns []string, name string) string {
	return cat + "#" + strings.Join(ns, levelSep) + recordSep + name
}

// Position is the policy's place in the sweep's order (a cursor value).
func (r Retention) Position() string { return retentionSK(r.Catalog, r.Namespace, r.Name) }

// PutRetention sets a table's policy (replacing the one it had).
func (s *Store) PutRetention(ctx context.Context, r Retention) error {
	item, err := withKey(r, retentionPK, retentionSK(r.Catalog, r.Namespace, r.Name))
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	return err
}

// GetRetention reads a table's policy (ErrNotFound: none).
func (s *Store) GetRetention(ctx context.Context, cat string, ns []string, name string) (Retention, error) {
	var r Retention
	err := s.get(ctx, retentionPK, retentionSK(cat, ns, name), &r)
	return r, err
}

// DeleteRetention removes a table's policy (ErrNotFound: it had none).
func (s *Store) DeleteRetention(ctx context.Context, cat string, ns []string, name string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:           aws.String(s.table),
		Key:                 key(retentionPK, retentionSK(cat, ns, name)),
		ConditionExpression: aws.String("attribute_exists(pk)"),
	})
	if conditionFailed(err) {
		return ErrNotFound
	}
	return err
}

// MarkRetentionApplied records the cutoff a sweep applied, if the policy is
// still the one it worked from (same table generation, field and keep).
func (s *Store) MarkRetentionApplied(ctx context.Context, r Retention, cutoff, at string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 key(retentionPK, retentionSK(r.Catalog, r.Namespace, r.Name)),
		UpdateExpression:    aws.String("SET applied_cutoff = :c, applied_at = :at"),
		ConditionExpression: aws.String("#u = :u AND #f = :f AND #k = :k"),
		// Names, not words: FIELD and KEEP may be reserved in expressions.
		ExpressionAttributeNames: map[string]string{"#u": "table_uuid", "#f": "field", "#k": "keep"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":c": &ddbtypes.AttributeValueMemberS{Value: cutoff}, ":at": &ddbtypes.AttributeValueMemberS{Value: at},
			":u": &ddbtypes.AttributeValueMemberS{Value: r.TableUUID}, ":f": &ddbtypes.AttributeValueMemberS{Value: r.Field},
			":k": &ddbtypes.AttributeValueMemberS{Value: r.Keep},
		},
	})
	if conditionFailed(err) {
		return ErrConditionFailed
	}
	return err
}

// ListRetention returns up to limit policies after the sort key after ("":
// from the first), and the sort key of the last one returned ("" at the
// end). A range condition rather than ExclusiveStartKey: the policy at the
// cursor may have been deleted since (minidyn ends such a query early).
func (s *Store) ListRetention(ctx context.Context, after string, limit int) ([]Retention, string, error) {
	res, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("pk = :pk AND sk > :a"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":pk": &ddbtypes.AttributeValueMemberS{Value: retentionPK},
			":a":  &ddbtypes.AttributeValueMemberS{Value: after},
		},
		Limit:          aws.Int32(int32(limit)),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, "", err
	}
	out := make([]Retention, 0, len(res.Items))
	last := ""
	for _, item := range res.Items {
		var r Retention
		if err := unmarshal(item, &r); err != nil {
			return nil, "", err
		}
		out = append(out, r)
		last = r.Position()
	}
	if res.LastEvaluatedKey == nil {
		last = ""
	}
	return out, last, nil
}

// RetentionCursor is where the last bounded sweep stopped ("": start over).
func (s *Store) RetentionCursor(ctx context.Context) (string, error) {
	var c struct {
		After string `dynamodbav:"after"`
	}
	err := s.get(ctx, "RETSWEEP", "CURSOR", &c)
	if err == ErrNotFound {
		return "", nil
	}
	return c.After, err
}

// SetRetentionCursor records where the next sweep goes on.
func (s *Store) SetRetentionCursor(ctx context.Context, after string) error {
	item, err := withKey(struct {
		After string `dynamodbav:"after"`
	}{after}, "RETSWEEP", "CURSOR")
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	return err
}
