package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/store"
)

// Before issue 22 a check read every grant of its catalog: a grantee's
// load-table took 2.7 ms (p50, make run) in a catalog with 1 grant and
// 209 ms with 3,001 grants.
const prevLoad1Grant, prevLoad3001Grants = 2.7, 209.0

// BenchmarkGrantScaling: what a grantee's load-table reads, and how long it
// takes, as its catalog's grants grow from 1 principal to 1,000, 10,000,
// and 10,000 plus 100 pattern grants (the most a catalog holds). "warm": the
// process's cached reading of the grants is current (every request but one
// per authz.TTL); "cold": a new process's first check (a fresh authorizer on
// the same store), which reads the grant index and the caller's grant.
func BenchmarkGrantScaling(b *testing.B) {
	ce := startCost(b)
	ctx := context.Background()
	ce.grantAll(b, "demo")
	ce.call(b, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"g"}})
	ce.call(b, "POST", "/v1/demo/namespaces/g/tables", map[string]any{"name": "t",
		"schema": mustJSON(map[string]any{"type": "struct", "schema-id": 0, "fields": []any{}})})
	path := "/v1/demo/namespaces/g/tables/t"
	granteeCtx := authz.WithPrincipal(ctx, granteePrincipal)

	type step struct {
		name                string
		principals, globbed int // grants in the catalog after the step
	}
	steps := []step{{"1 principal", 1, 0}, {"1,000 principals", 1000, 0}, {"10,000 principals", 10_000, 0},
		{"10,000 principals + 100 pattern grants", 10_000, store.MaxIndexedGrants}}
	const samples = 100
	principals, globbed := 1, 0 // the grantee's own grant
	var warm1, cold1 time.Duration
	var reads []float64 // warm reads per row
	ratio10k := 0.0
	fmt.Printf("\n== grant scaling: a grantee's load-table as its catalog's grants grow (%d samples each) ==\n", samples)
	fmt.Printf("%-40s %12s %12s %11s %7s %11s %7s\n", "grants", "warm reads", "cold reads", "warm p50", "ratio", "cold p50", "ratio")
	for _, s := range steps {
		for ; principals < s.principals; principals++ {
			g := store.Grant{Principal: fmt.Sprintf("arn:aws:iam::123456789012:user/u%05d", principals), Privileges: []string{string(authz.TableRead)}}
			if err := ce.st.PutGrant(ctx, "demo", g, authz.Indexed); err != nil {
				b.Fatal(err)
			}
		}
		for ; globbed < s.globbed; globbed++ {
			// Patterns the grantee does not match: each one is tried.
			g := store.Grant{Principal: fmt.Sprintf("arn:aws:sts::123456789012:assumed-role/team-%03d-*/*", globbed), Privileges: []string{string(authz.TableRead)}}
			if err := ce.st.PutGrant(ctx, "demo", g, authz.Indexed); err != nil {
				b.Fatal(err)
			}
		}
		ce.clock.advance(authz.TTL) // the server's cache reads the new version
		// Settle after the bulk writes (the emulator's journal compaction,
		// the garbage they left) so the samples time the lookups.
		runtime.GC()
		for range samples / 4 {
			ce.send(b, ce.grantee, "GET", path, nil, nil, 200)
		}

		before := ce.m.snapshot()
		warm := make([]time.Duration, samples)
		for i := range warm {
			t0 := time.Now()
			ce.send(b, ce.grantee, "GET", path, nil, nil, 200)
			warm[i] = time.Since(t0)
		}
		warmReads := float64(ce.m.snapshot().minus(before).sum("DynamoDB ")) / samples

		before = ce.m.snapshot()
		cold := make([]time.Duration, samples)
		for i := range cold {
			a := authz.New(ce.srv.Catalog.Store(), nil) // the server's metered store
			t0 := time.Now()
			if err := a.Check(granteeCtx, "demo", authz.TableRead); err != nil {
				b.Fatal(err)
			}
			cold[i] = time.Since(t0)
		}
		coldReads := float64(ce.m.snapshot().minus(before).sum("DynamoDB ")) / samples

		w, c := percentile(warm, 0.5), percentile(cold, 0.5)
		if s.principals == 1 {
			warm1, cold1 = w, c
		}
		reads = append(reads, warmReads, coldReads)
		if s.principals == 10_000 && s.globbed == 0 {
			ratio10k = float64(w) / float64(warm1)
		}
		fmt.Printf("%-40s %12s %12s %11s %7.2f %11s %7.2f\n", s.name, trim(warmReads), trim(coldReads),
			ms(w), float64(w)/float64(warm1), ms(c), float64(c)/float64(cold1))
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("target reads the same at 1 and 10,000 principals and 100 patterns: %s (%v)\n",
		verdict(slices.Min(reads) == slices.Max(reads)), reads)
	fmt.Printf("target warm p50 ratio 10,000 : 1 principals ≤ 1.2: %s (%.2f; a shared machine's load moves it)\n", verdict(ratio10k <= 1.2), ratio10k)
	fmt.Printf("(warm: load-table over REST, the process's grants current: DynamoDB reads are the catalog and the table's entry;\n"+
		" cold: a new process's first check alone (index + the caller's grant); targets: reads the same on every row, latency ratio ≤ 1.2;\n"+
		" before issue 22: %.1f ms with 1 grant, %.0f ms with 3,001 grants (×%.0f), every check reading all of them)\n",
		prevLoad1Grant, prevLoad3001Grants, prevLoad3001Grants/prevLoad1Grant)
}
