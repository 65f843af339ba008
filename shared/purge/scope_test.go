package purge

import (
	"context"
	"testing"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/shared/store"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	db, table := awstest.DynamoDB(t)
	if err := store.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return store.New(db, table)
}

// Defect: the purge's checks compared a path's raw text with the claims, so
// s3://b/evil/e/x/../../../demo/cr/v/data/f.parquet counted as evil's
// table's own (its text starts with evil/e/x/) and the job deleted it; a
// resolving reader finds demo's file there. No check lets such a path go,
// whoever owns what its text starts with.
func TestNoCheckLetsADotSegmentGo(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	evil := store.Hold{ID: "evil-claim", Bucket: "b1x", Prefix: "evil/e/x"}
	if err := st.TakeClaim(ctx, store.Claim{Hold: evil, Owner: store.Owner{Kind: store.OwnerTable, Catalog: "evil", Namespace: []string{"e"}, Name: "x"}}); err != nil {
		t.Fatal(err)
	}
	victim := store.Hold{ID: "victim-claim", Bucket: "b1x", Prefix: "demo/cr/v"}
	if err := st.TakeClaim(ctx, store.Claim{Hold: victim, Owner: store.Owner{Kind: store.OwnerTable, Catalog: "demo", Namespace: []string{"cr"}, Name: "v"}}); err != nil {
		t.Fatal(err)
	}
	paths := []string{
		"s3://b1x/evil/e/x/../../../demo/cr/v/data/f.parquet",
		"s3://b1x/evil/e/x/data/./f.parquet",
		"s3://b1x/evil/e/x/data//f.parquet",
		"s3://b1x/evil/e/x/%2E%2E/%2E%2E/%2E%2E/demo/cr/v/data/f.parquet",
		"s3://b1x/free/../demo/cr/v/data/f.parquet",
	}
	purgeJob := store.Job{Catalog: "evil", Scope: "s3://b1x/evil/e/x/", Hold: &evil}
	wideJob := store.Job{Catalog: "evil", Scope: "s3://b1x/", Hold: &evil}
	expireJob := store.Job{Catalog: "evil", Claim: evil.ID, ClaimLocation: evil.URI(), Scope: "s3://b1x/"}
	checks := map[string]func(string) (bool, error){
		"purge": func(p string) (bool, error) { _, ok, err := newGuard(st, purgeJob).allows(ctx, p); return ok, err },
		"purge, warehouse scope": func(p string) (bool, error) {
			_, ok, err := newGuard(st, wideJob).allows(ctx, p)
			return ok, err
		},
		"expire": func(p string) (bool, error) { _, ok, err := newClaimCheck(st, expireJob).owned(ctx, p); return ok, err },
		"orphans": func(p string) (bool, error) {
			_, ok, err := (&orphanCheck{s: &Service{Store: st}, dirs: map[string]*references{}}).unreferenced(ctx, p)
			return ok, err
		},
	}
	for name, may := range checks {
		t.Run(name, func(t *testing.T) {
			for _, p := range paths {
				if ok, err := may(p); ok || err != nil {
					t.Errorf("%s may go (%v)", p, err)
				}
			}
		})
	}
}
