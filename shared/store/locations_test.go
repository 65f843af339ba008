package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/store"
)

func tableClaim(prefix string) store.Claim {
	return store.Claim{
		Hold:  store.Hold{ID: uuid.NewString(), Bucket: "bkt", Prefix: prefix},
		Owner: store.Owner{Kind: store.OwnerTable, Catalog: "c", Namespace: []string{"ns"}, Name: prefix},
	}
}

func warehouseClaim(prefix string) store.Claim {
	return store.Claim{
		Hold:  store.Hold{ID: uuid.NewString(), Bucket: "bkt", Prefix: prefix},
		Owner: store.Owner{Kind: store.OwnerWarehouse, Catalog: "cat-" + prefix},
	}
}

// based is a table claim inside a warehouse: its chain starts below it.
func based(prefix, warehouse string) store.Claim {
	c := tableClaim(prefix)
	c.Hold.Based, c.Hold.Base = true, warehouse
	return c
}

func TestOneOwnerPerPrefix(t *testing.T) {
	cases := []struct {
		name   string
		first  store.Claim
		second store.Claim
		ok     bool
	}{
		{"equal", tableClaim("wh/t"), tableClaim("wh/t"), false},
		{"inside", tableClaim("wh/t"), tableClaim("wh/t/data"), false},
		{"contains", tableClaim("wh/t/data"), tableClaim("wh/t"), false},
		{"contains, deep", tableClaim("wh/a/b/c/d"), tableClaim("wh/a"), false},
		{"sibling with a longer name", tableClaim("wh/t"), tableClaim("wh/t2"), true},
		{"sibling dirs", tableClaim("wh/a/t"), tableClaim("wh/b/t"), true},
		{"escaped is another key", tableClaim("wh/M%C3%BCnchen"), tableClaim("wh/München"), true},
		{"nested warehouse", warehouseClaim("wh"), warehouseClaim("wh/b"), false},
		{"warehouse around a warehouse", warehouseClaim("wh/b"), warehouseClaim("wh"), false},
		{"whole bucket around a warehouse", warehouseClaim("wh"), warehouseClaim(""), false},
		{"warehouse inside the whole bucket", warehouseClaim(""), warehouseClaim("wh"), false},
		{"sibling warehouses", warehouseClaim("wh"), warehouseClaim("wh2"), true},
		{"own table inside the warehouse", warehouseClaim("wh"), based("wh/ns/t", "wh"), true},
		{"own table in a whole-bucket warehouse", warehouseClaim(""), based("ns/t", ""), true},
		{"a foreign table inside the warehouse", warehouseClaim("wh"), tableClaim("wh/ns/t"), false},
		{"a warehouse around a foreign table", tableClaim("wh/ns/t"), warehouseClaim("wh"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t)
			if err := s.TakeClaim(ctx, c.first); err != nil {
				t.Fatalf("first claim: %v", err)
			}
			err := s.TakeClaim(ctx, c.second)
			if c.ok && err != nil {
				t.Fatalf("second claim refused: %v", err)
			}
			if !c.ok {
				if !errors.Is(err, store.ErrLocationTaken) {
					t.Fatalf("second claim: %v, want ErrLocationTaken", err)
				}
				owner, err := s.Conflict(ctx, c.second.Hold)
				if err != nil || owner.ID != c.first.Hold.ID {
					t.Errorf("Conflict names %+v (%v), want the first owner", owner, err)
				}
			}
			// Once the first lets go, the second always fits.
			if err := s.ReleaseClaim(ctx, c.first.Hold); err != nil {
				t.Fatal(err)
			}
			if !c.ok {
				if err := s.TakeClaim(ctx, c.second); err != nil {
					t.Errorf("claim after release: %v", err)
				}
			}
		})
	}
}

func TestClaimsMoveInOneTransaction(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		from, to string
		overlap  bool
	}{
		{"wh/t", "wh/t/sub", true},
		{"wh/t/sub", "wh/t", true},
		{"wh/a/t", "wh/b/t", false},
	}
	for _, c := range cases {
		t.Run(c.from+" to "+c.to, func(t *testing.T) {
			s := newStore(t)
			if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"ns"}}); err != nil {
				t.Fatal(err)
			}
			old := tableClaim(c.from)
			e := store.TableEntry{Namespace: []string{"ns"}, Name: "t", MetadataLocation: "s3://bkt/m0", Hold: &old.Hold}
			if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e, Claim: &old}}); err != nil {
				t.Fatal(err)
			}
			neighbour := tableClaim("wh/other")
			if err := s.TakeClaim(ctx, neighbour); err != nil {
				t.Fatal(err)
			}
			moved := tableClaim(c.to)
			next := e
			next.MetadataLocation, next.Hold = "s3://bkt/m1", &moved.Hold
			if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: next, Expected: e.MetadataLocation, Claim: &moved, Release: e.Hold}}); err != nil {
				t.Fatalf("move: %v", err)
			}
			if o, err := s.Conflict(ctx, moved.Hold); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the moved claim conflicts with %+v (%v)", o, err)
			}
			// The old prefix is free unless it overlaps the new one.
			again := tableClaim(c.from)
			if err := s.TakeClaim(ctx, again); (err == nil) == c.overlap {
				t.Errorf("claim of the old prefix: %v (overlap %v)", err, c.overlap)
			} else if err == nil {
				_ = s.ReleaseClaim(ctx, again.Hold)
			}
			// Into the neighbour's prefix: refused, nothing written.
			into := tableClaim("wh/other/t")
			last := next
			last.MetadataLocation, last.Hold = "s3://bkt/m2", &into.Hold
			if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: last, Expected: next.MetadataLocation, Claim: &into, Release: next.Hold}}); !errors.Is(err, store.ErrLocationTaken) {
				t.Errorf("move into a neighbour: %v, want ErrLocationTaken", err)
			}
			got, _ := s.GetTable(ctx, "c", []string{"ns"}, "t")
			if got.MetadataLocation != "s3://bkt/m1" || got.Hold == nil || got.Hold.ID != moved.Hold.ID {
				t.Errorf("a refused move changed the entry: %+v", got)
			}
		})
	}
}

// Overlapping claims racing: whatever the order, exactly one wins.
func TestOverlappingClaimsRace(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	for round := range 20 {
		prefixes := []string{}
		p := fmt.Sprintf("wh/r%d", round)
		for range 6 {
			prefixes = append(prefixes, p)
			p += "/x"
		}
		prefixes = append(prefixes, fmt.Sprintf("wh/r%d", round)) // the same prefix twice
		var wg sync.WaitGroup
		errs := make([]error, len(prefixes))
		for i, p := range prefixes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.TakeClaim(ctx, tableClaim(p))
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrLocationTaken):
				t.Errorf("round %d claim %s: %v", round, prefixes[i], err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d overlapping claims won, want exactly 1 (%v)", round, won, errs)
		}
	}
}

func TestOwnerAtFindsTheNearestClaim(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	wh := warehouseClaim("wh")
	tbl := based("wh/ns/t", "wh")
	for _, c := range []store.Claim{wh, tbl} {
		if err := s.TakeClaim(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]string{
		"wh/ns/t/data/f.parquet": tbl.Hold.ID,
		"wh/ns/t2/data/f":        wh.Hold.ID,
		"wh/f":                   wh.Hold.ID,
		"elsewhere/f":            "",
	}
	for k, want := range cases {
		o, err := s.OwnerAt(ctx, "bkt", k)
		if want == "" {
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: owner %+v (%v), want none", k, o, err)
			}
			continue
		}
		if err != nil || o.ID != want {
			t.Errorf("%s: owner %+v (%v), want %s", k, o, err, want)
		}
	}
}
