package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/shared/store"
)

// isPattern is the tests' Indexed rule (authz.Indexed is the product's).
func isPattern(p string) bool { return strings.Contains(p, "*") }

func patternsOf(ix store.GrantIndex) []string {
	var out []string
	for _, g := range ix.Patterns {
		out = append(out, g.Principal)
	}
	slices.Sort(out)
	return out
}

// Concurrent grant changes lose none of the index's patterns, and each
// raises the version.
func TestGrantIndexUnderConcurrentChanges(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := fmt.Sprintf("user-%02d", i)
			if i%2 == 0 {
				p = fmt.Sprintf("role-%02d-*", i)
			}
			errs[i] = s.PutGrant(ctx, "c", store.Grant{Principal: p, Privileges: []string{"TABLE_READ"}}, isPattern)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("grant %d: %v", i, err)
		}
	}
	ix, err := s.GetGrantIndex(ctx, "c", isPattern)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 0; i < n; i += 2 {
		want = append(want, fmt.Sprintf("role-%02d-*", i))
	}
	if got := patternsOf(ix); !slices.Equal(got, want) || ix.Version != n {
		t.Errorf("index %v at version %d, want %v at %d", got, ix.Version, want, n)
	}
	if err := s.DeleteGrant(ctx, "c", "role-00-*", isPattern); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteGrant(ctx, "c", "role-00-*", isPattern); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	ix, _ = s.GetGrantIndex(ctx, "c", isPattern)
	if got := patternsOf(ix); slices.Contains(got, "role-00-*") || ix.Version != n+1 {
		t.Errorf("after the delete: %v at version %d", got, ix.Version)
	}
}

// Grants written before the index existed get one, built from them, on the
// first read; a catalog without grants gets none.
func TestGrantIndexBackfill(t *testing.T) {
	ctx := context.Background()
	db, table := awstest.DynamoDB(t)
	if err := store.CreateTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	s := store.New(db, table)
	if ix, err := s.GetGrantIndex(ctx, "c", isPattern); err != nil || ix.Version != 0 {
		t.Fatalf("no grants: %+v %v, want version 0", ix, err)
	}
	for _, p := range []string{"alice", "etl-*"} { // as PutGrant wrote them before the index
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]ddbtypes.AttributeValue{
			"pk": &ddbtypes.AttributeValueMemberS{Value: "GRANT#c"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "G#" + p},
			"principal":  &ddbtypes.AttributeValueMemberS{Value: p},
			"privileges": &ddbtypes.AttributeValueMemberL{Value: []ddbtypes.AttributeValue{&ddbtypes.AttributeValueMemberS{Value: "TABLE_READ"}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	ix, err := s.GetGrantIndex(ctx, "c", isPattern)
	if err != nil || ix.Version != 1 || !slices.Equal(patternsOf(ix), []string{"etl-*"}) {
		t.Fatalf("backfilled: %+v %v", ix, err)
	}
	if err := s.PutGrant(ctx, "c", store.Grant{Principal: "bi-*", Privileges: []string{"TABLE_READ"}}, isPattern); err != nil {
		t.Fatal(err)
	}
	if ix, _ = s.GetGrantIndex(ctx, "c", isPattern); ix.Version != 2 || !slices.Equal(patternsOf(ix), []string{"bi-*", "etl-*"}) {
		t.Errorf("after a grant: %+v", ix)
	}
}

// A catalog holds at most MaxIndexedGrants patterns; replacing one at the
// limit still works.
func TestIndexedGrantsBounded(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	put := func(p string) error {
		return s.PutGrant(ctx, "c", store.Grant{Principal: p, Privileges: []string{"TABLE_READ"}}, isPattern)
	}
	for i := range store.MaxIndexedGrants {
		if err := put(fmt.Sprintf("p%03d-*", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := put("one-more-*"); !errors.Is(err, store.ErrTooManyIndexed) {
		t.Errorf("pattern %d: %v, want ErrTooManyIndexed", store.MaxIndexedGrants+1, err)
	}
	if err := put("p000-*"); err != nil {
		t.Errorf("replacing a pattern at the limit: %v", err)
	}
	if err := put("a-principal"); err != nil {
		t.Errorf("a principal's grant at the limit: %v", err)
	}
}
