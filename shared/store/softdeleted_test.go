package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/icehold/icehold/shared/store"
)

// A stale reader of a soft-deleted record never ends a newer generation
// of the same table: read R1, undrop, commit, soft-drop again (R2, due in
// years), then every transition called with R1 fails and R2 stays whole:
// its record, its claim, its place outside the due part of the expiry index.
func TestStaleGenerationEndsNothing(t *testing.T) {
	ctx := context.Background()
	soon, later := time.Now().Add(time.Hour), time.Now().AddDate(5, 0, 0)
	for _, tc := range []struct {
		name string
		held bool // R2 is legal-held
		op   func(s *store.Store, r1 store.SoftDeleted) error
	}{
		{"permanent delete with a purge job", false, func(s *store.Store, r1 store.SoftDeleted) error {
			j := store.Job{ID: "pj-stale", Catalog: "c", Namespace: r1.Entry.Namespace, Table: r1.Entry.Name, TableUUID: r1.Entry.TableUUID,
				MetadataLocation: r1.Entry.MetadataLocation, State: store.JobPending}
			return s.PermanentlyDelete(ctx, r1, &j)
		}},
		{"permanent delete without purge", false, func(s *store.Store, r1 store.SoftDeleted) error {
			return s.PermanentlyDelete(ctx, r1, nil)
		}},
		{"undrop", false, func(s *store.Store, r1 store.SoftDeleted) error {
			to := r1.Entry
			to.Name = "restored"
			_, err := s.Undrop(ctx, r1, to)
			return err
		}},
		{"clear the legal hold", true, func(s *store.Store, r1 store.SoftDeleted) error {
			_, err := s.SetLegalHold(ctx, r1, false)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"ns"}}); err != nil {
				t.Fatal(err)
			}
			claim := tableClaim("wh/ns/t")
			e := store.TableEntry{Namespace: []string{"ns"}, Name: "t", MetadataLocation: "s3://bkt/wh/ns/t/m0.json", TableUUID: "u1", Hold: &claim.Hold}
			if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e, Claim: &claim}}); err != nil {
				t.Fatal(err)
			}
			if err := s.SoftDelete(ctx, "c", e, store.SoftDeleted{PurgeAt: store.ExpiryTime(soon), LegalHold: tc.held}); err != nil {
				t.Fatal(err)
			}
			r1 := onlyRecord(t, s)
			if _, err := s.Undrop(ctx, r1, r1.Entry); err != nil {
				t.Fatal(err)
			}
			e2 := e
			e2.MetadataLocation = "s3://bkt/wh/ns/t/m1.json"
			if err := s.CommitTable(ctx, "c", e2, e.MetadataLocation, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.SoftDelete(ctx, "c", e2, store.SoftDeleted{PurgeAt: store.ExpiryTime(later), LegalHold: tc.held}); err != nil {
				t.Fatal(err)
			}

			if err := tc.op(s, r1); err == nil {
				t.Errorf("a transition of the stale generation succeeded")
			}
			r2 := onlyRecord(t, s)
			if r2.Entry.MetadataLocation != e2.MetadataLocation || r2.PurgeAt != store.ExpiryTime(later) || r2.LegalHold != tc.held {
				t.Errorf("the newer generation changed: %+v", r2)
			}
			if _, err := s.GetTable(ctx, "c", []string{"ns"}, "restored"); err == nil {
				t.Errorf("the stale generation was undropped")
			}
			owner, err := s.Conflict(ctx, tableClaim("wh/ns/t").Hold)
			if err != nil || owner.ID != claim.Hold.ID || !owner.SoftDeleted || owner.JobID != "" {
				t.Errorf("the claim is now %+v (%v), want the soft-deleted table's", owner, err)
			}
			if due, _, err := s.ExpiredBefore(ctx, soon.Add(time.Hour), "", 10); err != nil || len(due) != 0 {
				t.Errorf("due before the newer generation's purge time: %+v (%v)", due, err)
			}
		})
	}
}

// onlyRecord is the one soft-deleted record of table c.ns.t.
func onlyRecord(t *testing.T, s *store.Store) store.SoftDeleted {
	t.Helper()
	recs, err := s.SoftDeletedByName(context.Background(), "c", []string{"ns"}, "t")
	if err != nil || len(recs) != 1 {
		t.Fatalf("soft-deleted records of ns.t: %+v (%v), want one", recs, err)
	}
	return recs[0]
}

// Two tables with one uuid (a register of a copy of the metadata) are both
// soft-deleted, as two generations; ending one leaves the other.
func TestOneUUIDTwoGenerations(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"ns"}}); err != nil {
		t.Fatal(err)
	}
	var entries []store.TableEntry
	for _, name := range []string{"a", "b"} {
		claim := tableClaim("wh/ns/" + name)
		e := store.TableEntry{Namespace: []string{"ns"}, Name: name, MetadataLocation: "s3://bkt/wh/ns/" + name + "/m.json", TableUUID: "u", Hold: &claim.Hold}
		if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e, Claim: &claim}}); err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
	}
	for _, e := range entries {
		if err := s.SoftDelete(ctx, "c", e, store.SoftDeleted{PurgeAt: store.ExpiryTime(time.Now().Add(time.Hour))}); err != nil {
			t.Fatalf("soft drop of %s: %v", e.Name, err)
		}
	}
	a, err := s.SoftDeletedByName(ctx, "c", []string{"ns"}, "a")
	if err != nil || len(a) != 1 {
		t.Fatalf("records of a: %+v (%v)", a, err)
	}
	if err := s.PermanentlyDelete(ctx, a[0], nil); err != nil {
		t.Fatal(err)
	}
	b, err := s.SoftDeletedByName(ctx, "c", []string{"ns"}, "b")
	if err != nil || len(b) != 1 || b[0].Entry.MetadataLocation != entries[1].MetadataLocation {
		t.Fatalf("records of b after a's end: %+v (%v)", b, err)
	}
	if _, err := s.Undrop(ctx, b[0], b[0].Entry); err != nil {
		t.Fatalf("undrop b: %v", err)
	}
}

// A permanent delete never ends a legal-held record, whatever its caller
// read: a hold set between the read and the transaction (the hold moved
// the record's version), or a record passed as read, held (the transaction
// checks the hold itself: SPEC §2). Refused as held, with or without a
// job; the record stays, held.
func TestPermanentDeleteKeepsAHeldRecord(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		withJob, readAfterHold bool
	}{{false, false}, {true, false}, {false, true}, {true, true}} {
		t.Run(fmt.Sprintf("job=%v,read-after-hold=%v", tc.withJob, tc.readAfterHold), func(t *testing.T) {
			s := newStore(t)
			if err := s.CreateNamespace(ctx, "c", store.Namespace{Levels: []string{"ns"}}); err != nil {
				t.Fatal(err)
			}
			claim := tableClaim("wh/ns/t")
			e := store.TableEntry{Namespace: []string{"ns"}, Name: "t", MetadataLocation: "s3://bkt/wh/ns/t/m0.json", TableUUID: "u1", Hold: &claim.Hold}
			if _, err := s.WriteTables(ctx, "c", []store.TableWrite{{Entry: e, Claim: &claim}}); err != nil {
				t.Fatal(err)
			}
			if err := s.SoftDelete(ctx, "c", e, store.SoftDeleted{PurgeAt: store.ExpiryTime(time.Now().Add(time.Hour))}); err != nil {
				t.Fatal(err)
			}
			read := onlyRecord(t, s)
			held, err := s.SetLegalHold(ctx, read, true)
			if err != nil {
				t.Fatal(err)
			}
			if tc.readAfterHold {
				read = held
			}
			var job *store.Job
			if tc.withJob {
				job = &store.Job{ID: "pj-held", Catalog: "c", Namespace: e.Namespace, Table: e.Name, TableUUID: e.TableUUID, MetadataLocation: e.MetadataLocation, State: store.JobPending}
			}
			if err := s.PermanentlyDelete(ctx, read, job); !errors.Is(err, store.ErrLegalHold) {
				t.Errorf("permanent delete of a held record: %v, want ErrLegalHold", err)
			}
			if r := onlyRecord(t, s); !r.LegalHold {
				t.Errorf("the record is %+v, want it held", r)
			}
		})
	}
}
