package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/shared/store"
)

// newStore returns a store on a table of its own, through the SDK: on a
// fresh embedded emulator, or on the external endpoint of awstest (moto).
func newStore(t *testing.T) *store.Store {
	t.Helper()
	db, table := awstest.DynamoDB(t)
	if err := store.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return store.New(db, table)
}

func TestCommitIsCompareAndSwap(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"ns"}}); err != nil {
		t.Fatal(err)
	}
	e := store.TableEntry{Namespace: []string{"ns"}, Name: "t", MetadataLocation: "s3://b/v0", TableUUID: "u"}
	if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e}}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := e
			next.MetadataLocation = fmt.Sprintf("s3://b/v1-%d", i)
			errs[i] = s.CommitTable(ctx, "c", next, "s3://b/v0", nil)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("two commits from the same base won: %d and %d", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConditionFailed):
			t.Errorf("loser %d: %v, want ErrConditionFailed", i, err)
		}
	}
	got, err := s.GetTable(ctx, "c", []string{"ns"}, "t")
	if err != nil || won < 0 || got.MetadataLocation != fmt.Sprintf("s3://b/v1-%d", won) {
		t.Errorf("pointer %q after race won by %d (%v)", got.MetadataLocation, won, err)
	}
	missing := e
	missing.Name = "nope"
	if err := s.CommitTable(ctx, "c", missing, "s3://b/v0", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("commit of a missing table: %v, want ErrNotFound", err)
	}
}

func TestWriteTablesIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	_ = s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"ns"}})
	a := store.TableEntry{Namespace: []string{"ns"}, Name: "a", MetadataLocation: "s3://b/a0"}
	b := store.TableEntry{Namespace: []string{"ns"}, Name: "b", MetadataLocation: "s3://b/b0"}
	if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: a}, {Entry: b}}); err != nil {
		t.Fatal(err)
	}
	a1, b1 := a, b
	a1.MetadataLocation, b1.MetadataLocation = "s3://b/a1", "s3://b/b1"
	i, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: a1, Expected: "s3://b/a0"}, {Entry: b1, Expected: "s3://b/stale"}})
	if !errors.Is(err, store.ErrConditionFailed) || i != 1 {
		t.Fatalf("stale write: index %d err %v, want 1 and ErrConditionFailed", i, err)
	}
	for _, e := range []store.TableEntry{a, b} {
		got, _ := s.GetTable(ctx, "c", e.Namespace, e.Name)
		if got.MetadataLocation != e.MetadataLocation {
			t.Errorf("%s moved to %s although the transaction failed", e.Name, got.MetadataLocation)
		}
	}
	c := store.TableEntry{Namespace: []string{"gone"}, Name: "c", MetadataLocation: "s3://b/c0"}
	if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: c}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("create in a missing namespace: %v, want ErrNotFound", err)
	}
	if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: a}}); !errors.Is(err, store.ErrExists) {
		t.Errorf("create over an existing table: %v, want ErrExists", err)
	}
}

func TestNamespacePagingAndNesting(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for i := range 7 {
		if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{fmt.Sprintf("n%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"n0", "child"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"nope", "child"}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("child of a missing parent: %v", err)
	}
	var all []string
	token := ""
	for {
		page, next, err := s.ListNamespaces(ctx, "c", nil, token, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range page {
			all = append(all, ns.Levels[0])
		}
		if next == "" {
			break
		}
		token = next
	}
	if len(all) != 7 {
		t.Errorf("paged through %v, want the 7 top-level namespaces", all)
	}
	if err := s.DropNamespace(ctx, "c", []string{"n0"}); !errors.Is(err, store.ErrNotEmpty) {
		t.Errorf("drop with a child: %v, want ErrNotEmpty", err)
	}
	if _, _, err := s.ListNamespaces(ctx, "c", []string{"n1"}, token, 3); !errors.Is(err, store.ErrBadPageToken) {
		t.Errorf("token of another listing: %v, want ErrBadPageToken", err)
	}
}

func TestReceiptClaims(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	now := time.Now()
	r := store.Receipt{Key: "k", Fingerprint: "f", ExpiresAt: now.Add(time.Hour).Unix()}
	var wg sync.WaitGroup
	fresh := make([]bool, 20)
	for i := range fresh {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev, err := s.ClaimReceipt(ctx, "api", r, now)
			fresh[i] = err == nil && prev == nil
		}()
	}
	wg.Wait()
	n := 0
	for _, f := range fresh {
		if f {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d concurrent claims of one key succeeded, want 1", n)
	}
	// Expired receipts are claimed over.
	later := now.Add(2 * time.Hour)
	if prev, err := s.ClaimReceipt(ctx, "api", store.Receipt{Key: "k", Fingerprint: "g", ExpiresAt: later.Add(time.Hour).Unix()}, later); err != nil || prev != nil {
		t.Errorf("claim after expiry: prev %v err %v", prev, err)
	}
}
