package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/icehold/icehold/shared/store"
)

// Items whose partition and sort keys join alike ("a" + "." + "T#q.T#t"
// and "a.T#q" + "." + "T#t") are two items: each table is created, loads
// itself and is dropped alone. (The local emulator once keyed items by that
// join: the second create was a 409, a load of one returned the other.)
func TestKeysThatJoinAlike(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	tables := []store.TableEntry{
		{Namespace: []string{"a"}, Name: "q.T#t", MetadataLocation: "s3://b/one.json"},
		{Namespace: []string{"a.T#q"}, Name: "t", MetadataLocation: "s3://b/two.json"},
	}
	for _, e := range tables {
		if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: e.Namespace}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e}}); err != nil {
			t.Fatalf("create %v.%s: %v", e.Namespace, e.Name, err)
		}
	}
	for _, e := range tables {
		got, err := s.GetTable(ctx, "c", e.Namespace, e.Name)
		if err != nil || got.MetadataLocation != e.MetadataLocation {
			t.Errorf("load %v.%s: %+v (%v)", e.Namespace, e.Name, got, err)
		}
	}
	if err := s.DeleteTable(ctx, "c", tables[0]); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTable(ctx, "c", tables[1].Namespace, tables[1].Name); err != nil || got.MetadataLocation != tables[1].MetadataLocation {
		t.Errorf("after dropping the other: %+v (%v)", got, err)
	}
}

// A page whose start key's item was deleted meanwhile continues after the
// key's place, as DynamoDB does: the listing does not end early.
func TestPageAfterADeletedStartKey(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	ns := []string{"ns"}
	if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: ns}); err != nil {
		t.Fatal(err)
	}
	var entries []store.TableEntry
	for i := range 4 {
		e := store.TableEntry{Namespace: ns, Name: fmt.Sprintf("t%d", i), MetadataLocation: fmt.Sprintf("s3://b/m%d.json", i)}
		if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e}}); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	var names []string
	token := ""
	for page := 0; ; page++ {
		got, next, err := s.ListTables(ctx, "c", ns, token, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			names = append(names, e.Name)
			if err := s.DeleteTable(ctx, "c", entries[page]); err != nil { // the page's own item
				t.Fatal(err)
			}
		}
		if next == "" || page > 5 {
			break
		}
		token = next
	}
	if fmt.Sprint(names) != "[t0 t1 t2 t3]" {
		t.Errorf("listed %v while deleting each page's item, want every table", names)
	}
}
