package store

import (
	"context"
	"errors"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Scanner is the one optional capability migrations need: a walk over the
// whole table (catalogs have no index of their own). *dynamodb.Client has it.
type Scanner interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// ErrNoScan: the DynamoDB client given to the store cannot scan.
var ErrNoScan = errors.New("the DynamoDB client cannot scan")

// ListCatalogs returns every catalog (a scan: migrations only).
func (s *Store) ListCatalogs(ctx context.Context) ([]Catalog, error) {
	sc, ok := s.db.(Scanner)
	if !ok {
		return nil, ErrNoScan
	}
	var out []Catalog
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(s.table),
		FilterExpression:          aws.String("sk = :c"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":c": &ddbtypes.AttributeValueMemberS{Value: "CATALOG"}},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		res, err := sc.Scan(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			var c Catalog
			if err := unmarshal(it, &c); err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// AllNamespaces returns every namespace of a catalog, at every depth.
func (s *Store) AllNamespaces(ctx context.Context, cat string) ([]Namespace, error) {
	pk, _ := nsKey(cat, nil)
	var out []Namespace
	token := ""
	for {
		items, next, err := s.query(ctx, pk, "", token, 0)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var ns Namespace
			if err := unmarshal(it, &ns); err != nil {
				return nil, err
			}
			out = append(out, ns)
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

func markerKey(name string) (string, string) { return "MIGRATION", name }

// Marked reports whether a one-time step (a migration) has run.
func (s *Store) Marked(ctx context.Context, name string) (bool, error) {
	pk, sk := markerKey(name)
	return s.exists(ctx, pk, sk)
}

// Mark records that a one-time step has run.
func (s *Store) Mark(ctx context.Context, name string) error {
	pk, sk := markerKey(name)
	item, err := withKey(struct {
		At string `dynamodbav:"at"`
	}{now()}, pk, sk)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	return err
}

// CountChildren counts a namespace's tables and direct child namespaces
// (what its children counter holds).
func (s *Store) CountChildren(ctx context.Context, cat string, levels []string) (int, error) {
	n := 0
	for token := ""; ; {
		items, next, err := s.query(ctx, tablePK(cat, levels), "T#", token, 1000)
		if err != nil {
			return 0, err
		}
		n += len(items)
		if token = next; token == "" {
			break
		}
	}
	for token := ""; ; {
		kids, next, err := s.ListNamespaces(ctx, cat, levels, token, 1000)
		if err != nil {
			return 0, err
		}
		n += len(kids)
		if token = next; token == "" {
			return n, nil
		}
	}
}

// SetChildren sets a namespace's children counter (the backfill).
func (s *Store) SetChildren(ctx context.Context, cat string, levels []string, n int) error {
	pk, sk := nsKey(cat, levels)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(pk, sk),
		UpdateExpression:          aws.String("SET children = :n"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":n": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(n)}},
	})
	if conditionFailed(err) {
		return ErrNotFound
	}
	return err
}
