package authz_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/store"
)

// counting counts the items DynamoDB hands the store (what a read costs).
type counting struct {
	store.DynamoDB
	items atomic.Int64
}

func (c *counting) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.DynamoDB.GetItem(ctx, in, opt...)
	if err == nil && out.Item != nil {
		c.items.Add(1)
	}
	return out, err
}

func (c *counting) Query(ctx context.Context, in *dynamodb.QueryInput, opt ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.DynamoDB.Query(ctx, in, opt...)
	if err == nil {
		c.items.Add(int64(len(out.Items)))
	}
	return out, err
}

func newStore(t *testing.T) (*store.Store, *counting) {
	t.Helper()
	db, table := awstest.DynamoDB(t)
	if err := store.CreateTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	c := &counting{DynamoDB: db}
	return store.New(c, table), c
}

// Defect: every authorized request read all grants of its catalog (a Query
// of the whole GRANT# partition), so a request cost grew with the number of
// principals. A check reads the caller's grant and the few pattern grants,
// whatever the number of others.
func TestCheckReadsNoMoreAsGrantsGrow(t *testing.T) {
	ctx := context.Background()
	read := map[int]int64{}
	for _, n := range []int{1, 500} {
		st, db := newStore(t)
		az := authz.New(st, nil)
		for i := range n {
			grant(t, az, fmt.Sprintf("arn:aws:iam::123456789012:user/u%d", i), authz.TableRead)
		}
		grant(t, az, "arn:aws:sts::123456789012:assumed-role/etl-*", authz.TableWrite)
		db.items.Store(0)
		caller := authz.WithPrincipal(ctx, "arn:aws:iam::123456789012:user/u0")
		if err := authz.New(st, nil).Check(caller, "c", authz.TableRead); err != nil {
			t.Fatalf("%d grants: %v", n, err)
		}
		read[n] = db.items.Load()
	}
	if read[500] > read[1] || read[500] > 3 {
		t.Errorf("a check read %d items with 1 other grant and %d with 500, want the same few", read[1], read[500])
	}
}

// who is the tests' grantee: a pattern when it holds a wildcard.
func who(principal string) authz.Grantee {
	return authz.Grantee{Principal: principal, Pattern: strings.ContainsAny(principal, "*?")}
}

func grant(t *testing.T, az *authz.Authorizer, principal string, privs ...authz.Privilege) {
	t.Helper()
	var names []string
	for _, p := range privs {
		names = append(names, string(p))
	}
	if err := az.Grant(context.Background(), "c", who(principal), names); err != nil {
		t.Fatal(err)
	}
}

// clock is a cache clock the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// A revoke made in one process (a Lambda environment) counts in another
// within authz.TTL of it, whatever the grant's kind, and in its own at once.
func TestRevokeCountsWithinTTL(t *testing.T) {
	ctx := context.Background()
	cases := []struct{ name, grantee, caller string }{
		{"principal", "arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice"},
		{"pattern", "arn:aws:sts::123456789012:assumed-role/etl-*", "arn:aws:sts::123456789012:assumed-role/etl-nightly/s1"},
		{"role", "arn:aws:iam::123456789012:role/analyst", "arn:aws:sts::123456789012:assumed-role/analyst/s1"},
		{"role with a path", "arn:aws:iam::123456789012:role/team/analyst", "arn:aws:sts::123456789012:assumed-role/analyst/s1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _ := newStore(t)
			admin, other := authz.New(st, nil), authz.New(st, nil)
			clk := &clock{t: time.Unix(1000, 0)}
			other.SetClock(clk.now)
			grant(t, admin, c.grantee, authz.TableRead)
			caller := authz.WithPrincipal(ctx, c.caller)
			if err := other.Check(caller, "c", authz.TableRead); err != nil {
				t.Fatalf("before the revoke: %v", err)
			}
			clk.t = clk.t.Add(authz.TTL / 2) // a check half a TTL later read the grants last
			if err := other.Check(caller, "c", authz.TableRead); err != nil {
				t.Fatal(err)
			}
			if err := admin.Revoke(ctx, "c", who(c.grantee)); err != nil {
				t.Fatal(err)
			}
			if err := admin.Check(caller, "c", authz.TableRead); !errors.Is(err, authz.ErrForbidden) {
				t.Errorf("the revoking process: %v, want forbidden at once", err)
			}
			clk.t = clk.t.Add(authz.TTL / 2) // TTL after the first read, the revoke's bound
			if err := other.Check(caller, "c", authz.TableRead); !errors.Is(err, authz.ErrForbidden) {
				t.Errorf("another process TTL after the revoke: %v, want forbidden", err)
			}
		})
	}
}

// Within TTL a cached check reads nothing; past it, one item (the index)
// while no grant changed; a change of another principal's grant makes the
// next check read its own again, still a few items.
func TestCachedChecksReadLittle(t *testing.T) {
	ctx := context.Background()
	st, db := newStore(t)
	admin, az := authz.New(st, nil), authz.New(st, nil)
	clk := &clock{t: time.Unix(1000, 0)}
	az.SetClock(clk.now)
	grant(t, admin, "u1", authz.TableRead)
	caller := authz.WithPrincipal(ctx, "u1")
	steps := []struct {
		name    string
		advance time.Duration
		change  func()
		want    int64
	}{
		{"first", 0, nil, 2},
		{"within TTL", authz.TTL - 1, nil, 0},
		{"past TTL, unchanged", 1, nil, 1},
		{"past TTL, another grant changed", authz.TTL, func() { grant(t, admin, "u2", authz.TableWrite) }, 2},
	}
	for _, s := range steps {
		if s.change != nil {
			s.change()
		}
		clk.t = clk.t.Add(s.advance)
		db.items.Store(0)
		if err := az.Check(caller, "c", authz.TableRead); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := db.items.Load(); got != s.want {
			t.Errorf("%s: read %d items, want %d", s.name, got, s.want)
		}
	}
}

// pausing holds the first GetGrantIndex it is armed for after its read:
// the read has returned what was stored then, and its caller has not used
// it yet.
type pausing struct {
	authz.Grants
	armed         atomic.Bool
	read, release chan struct{}
}

func (p *pausing) GetGrantIndex(ctx context.Context, cat string, indexed store.Indexed) (store.GrantIndex, error) {
	ix, err := p.Grants.GetGrantIndex(ctx, cat, indexed)
	if p.armed.CompareAndSwap(true, false) {
		close(p.read)
		<-p.release
	}
	return ix, err
}

// Defect: a check whose read of the grant index began before a revoke
// stored, after the revoke, a cached scope that still held the revoked
// pattern, so a check issued after the revoke returned passed (for up to
// authz.TTL). A revoke counts at once in its own process, whichever
// grant it removes and whatever check was under way.
func TestRevokeCountsAtOnceDespiteAReadUnderWay(t *testing.T) {
	ctx := context.Background()
	cases := []struct{ name, grantee, caller string }{
		{"pattern", "user-*", "user-1"},
		{"principal", "user-1", "user-1"},
		{"role with a path", "arn:aws:iam::123456789012:role/team/analyst", "arn:aws:sts::123456789012:assumed-role/analyst/s1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, _ := newStore(t)
			p := &pausing{Grants: st, read: make(chan struct{}), release: make(chan struct{})}
			az := authz.New(p, nil)
			az.SetClock(func() time.Time { return time.Unix(1000, 0) }) // the cache never ages here
			grant(t, az, c.grantee, authz.TableRead)
			caller := authz.WithPrincipal(ctx, c.caller)
			p.armed.Store(true)
			during := make(chan error, 1)
			go func() { during <- az.Check(caller, "c", authz.TableRead) }()
			<-p.read // the check under way has read the index: the grant is in it
			if err := az.Revoke(ctx, "c", who(c.grantee)); err != nil {
				t.Fatal(err)
			}
			close(p.release)
			<-during // it began before the revoke returned: either answer is right
			if err := az.Check(caller, "c", authz.TableRead); !errors.Is(err, authz.ErrForbidden) {
				t.Errorf("a check issued after the revoke returned: %v, want forbidden", err)
			}
		})
	}
}

// Defect: a role ARN with a path, refused when the catalog's index was
// full, was told "too many pattern grants (too many pattern grants: …)",
// though it is no pattern. It is told what fills the index and which ARN
// names the same role without it.
func TestFullIndexSaysWhatToDo(t *testing.T) {
	st, _ := newStore(t)
	az := authz.New(st, nil)
	for i := range store.MaxIndexedGrants {
		grant(t, az, fmt.Sprintf("arn:aws:sts::123456789012:assumed-role/etl-%d-*", i), authz.TableRead)
	}
	cases := []struct {
		who       authz.Grantee
		says, not string
	}{
		{authz.Grantee{Principal: "arn:aws:iam::123456789012:role/team/analyst"}, "grant arn:aws:iam::123456789012:role/analyst instead", "pattern grants"},
		{authz.Grantee{Principal: "user-*", Pattern: true}, "use fewer patterns", "too many pattern grants (too many"},
	}
	for _, c := range cases {
		err := az.Grant(context.Background(), "c", c.who, []string{string(authz.TableRead)})
		if !errors.Is(err, authz.ErrTooManyPatterns) || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), c.not) {
			t.Errorf("grant %s: %v, want ErrTooManyPatterns saying %q", c.who.Principal, err, c.says)
		}
	}
	if err := az.Grant(context.Background(), "c", authz.Grantee{Principal: "arn:aws:iam::123456789012:role/analyst"}, []string{string(authz.TableRead)}); err != nil {
		t.Errorf("the role without its path: %v", err)
	}
}
