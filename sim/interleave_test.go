package sim

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/store"
)

// Interleavings the generator places exactly: a second instance of the
// functions (as a second Lambda would be in AWS) shares the store, and its
// store client can pause right after a chosen read, while other requests
// run to completion through the first. That is the window between a read
// and the guarded write that depends on it (a stale soft-deleted record:
// issue 18's generations), which goroutine timing alone almost never hits.

// pausingDB is the store's DynamoDB client that can stop after one read.
type pausingDB struct {
	store.DynamoDB
	mu   sync.Mutex
	when func(pk, sk string, values []string) bool
	then func()
}

// arm makes the next read that when accepts call then (once) before its
// answer returns to the caller.
func (p *pausingDB) arm(when func(pk, sk string, values []string) bool, then func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.when, p.then = when, then
}

func (p *pausingDB) fire(pk, sk string, values []string) {
	p.mu.Lock()
	if p.when == nil || !p.when(pk, sk, values) {
		p.mu.Unlock()
		return
	}
	then := p.then
	p.when, p.then = nil, nil
	p.mu.Unlock()
	then()
}

func attrS(av ddbtypes.AttributeValue) string {
	if s, ok := av.(*ddbtypes.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

func (p *pausingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := p.DynamoDB.GetItem(ctx, in, opts...)
	if err == nil {
		p.fire(attrS(in.Key["pk"]), attrS(in.Key["sk"]), nil)
	}
	return out, err
}

func (p *pausingDB) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := p.DynamoDB.Query(ctx, in, opts...)
	if err == nil {
		var values []string
		for _, v := range in.ExpressionAttributeValues {
			values = append(values, attrS(v))
		}
		p.fire("", "", values)
	}
	return out, err
}

// second is the second instance: its services over the pausing client and
// a router serving them on its own port.
type second struct {
	db   *pausingDB
	soft *softdelete.Service
	url  string
	srv  *httptest.Server
}

func (w *World) second() *second {
	if w.sec != nil {
		return w.sec
	}
	db := &pausingDB{DynamoDB: w.ddb}
	st := store.New(db, server.TableName)
	cat := catalog.New(st, objects.New(w.s3))
	cat.SetClock(w.clock.Now)
	soft := &softdelete.Service{Catalog: cat, Purge: w.srv.Purge, Now: w.clock.Now}
	cfg := w.srv.RouterConfig
	cfg.Catalog, cfg.SoftDelete, cfg.Partitions = cat, soft, nil
	cfg.Authz = authz.New(st, []string{server.AdminPrincipal, server.LocalAccountAdmins})
	hs := httptest.NewServer(router.New(cfg))
	w.sec = &second{db: db, soft: soft, url: hs.URL, srv: hs}
	return w.sec
}

// paused runs op with its read paused: when the armed read happens, the
// intruders run (each applied to the model in turn), then op goes on with
// what it read. The model applies op's own answer last.
func (s *Sim) paused(arm func(then func()), run func() Outcome, intruders func() error) (Outcome, bool, error) {
	fired, resume := make(chan struct{}), make(chan struct{})
	arm(func() {
		close(fired)
		<-resume
	})
	done := make(chan Outcome, 1)
	go func() { done <- run() }()
	select {
	case <-fired:
		err := intruders()
		close(resume)
		return <-done, true, err
	case o := <-done:
		arm(nil)
		return o, false, nil
	}
}

// runNow runs one op alone and applies it (an intruder).
func (s *Sim) runNow(op *Op) error {
	if op == nil {
		return nil
	}
	o := op.run()
	s.logf("   » %s -> %s", op.desc, o)
	if err := s.judge(op, o); err != nil {
		return err
	}
	if op.after != nil {
		return op.after(o, false)
	}
	return nil
}

// freeIdent is an identifier no live table holds (in an existing
// namespace), the generation's own first.
func (s *Sim) freeIdent(g *Gen) (string, string, bool) {
	if _, ok := s.m.namespaces[g.ns]; ok && s.m.liveAt(g.ns, g.name) == nil {
		return g.ns, g.name, true
	}
	for _, ns := range namespaces {
		if _, ok := s.m.namespaces[ns]; !ok {
			continue
		}
		for _, n := range tableNames {
			if s.m.liveAt(ns, n) == nil {
				return ns, n, true
			}
		}
	}
	return "", "", false
}

// reincarnate: the intruders of a stale read of g's record: g is undropped
// (renamed where its name is taken), written to, and soft-dropped again,
// a new generation of the same uuid with a later purge time.
func (s *Sim) reincarnate(g *Gen, hold bool) func() error {
	return func() error {
		ns, name, ok := s.freeIdent(g)
		if !ok {
			return nil
		}
		body := fmt.Sprintf(`{"table-uuid": %q}`, g.uuid)
		if ns != g.ns || name != g.name {
			body = fmt.Sprintf(`{"table-uuid": %q, "rename-to": {"namespace": [%q], "name": %q}}`, g.uuid, ns, name)
		}
		from := g.ident()
		op := &Op{desc: fmt.Sprintf("admin undrops %s %s", from, body), want: []int{200, 409}, run: func() Outcome {
			return s.w.call(s.ctx, admin, "POST", lifecyclePath(g.ns, g.name)+"/undrop", body)
		}}
		op.after = s.opUndropAfter(g.ns, g.name)
		if err := s.runNow(op); err != nil || g.state != live {
			return err
		}
		if err := s.runNow(s.opAppendTo(g, admin)); err != nil {
			return err
		}
		if hold {
			if err := s.runNow(s.opSetLegalHoldProp(g, admin, true)); err != nil {
				return err
			}
		}
		return s.runNow(s.opDropOf(g, admin, false))
	}
}

// unheldUnlessAllowed drops legal-held generations when undropping them is
// not to be generated (-sim.without=undrop-held).
func (s *Sim) unheldUnlessAllowed(gens []*Gen) []*Gen {
	if s.allow("undrop-held") {
		return gens
	}
	var out []*Gen
	for _, g := range gens {
		if !g.legalHold {
			out = append(out, g)
		}
	}
	return out
}

// readsRecord matches a read of uuid's soft-deleted record(s): a get of one
// generation or a query of them all (keys U#<uuid>[␞<generation>]).
func readsRecord(uuid string) func(pk, sk string, values []string) bool {
	return func(pk, sk string, values []string) bool {
		if pk == "SOFT#"+catalogName && strings.HasPrefix(sk, "U#"+uuid) {
			return true
		}
		for _, v := range values {
			if strings.HasPrefix(v, "U#"+uuid) {
				return true
			}
		}
		return false
	}
}

// Barriers of the interleavings.

// staleSweep: the hold-expiry sweep reads a due record, and before it ends
// it the table is undropped, written to and dropped again (issue 18: the
// stale sweep ended the newer generation).
func (s *Sim) staleSweep() *barrier {
	var due []*Gen
	now := s.w.clock.Now()
	for _, g := range s.m.inState(soft) {
		if !g.legalHold && g.purgeAt.Before(now) && s.m.holdFor(g) > 0 {
			due = append(due, g)
		}
	}
	if len(due) == 0 {
		return nil
	}
	return s.staleSweepOf(pick(s, due), now)
}

func (s *Sim) staleSweepOf(g *Gen, now time.Time) *barrier {
	return &barrier{kind: "stale-sweep", desc: fmt.Sprintf("hold-expiry sweep pausing after it reads %s's record", g), run: func() error {
		sec := s.w.second()
		var err error
		if s.pre, err = s.bucketNow(); err != nil {
			return err
		}
		var rep softdelete.ExpiryReport
		var sweepErr error
		_, fired, err := s.paused(func(then func()) {
			if then == nil {
				sec.db.arm(nil, nil)
				return
			}
			sec.db.arm(readsRecord(g.uuid), then)
		}, func() Outcome {
			rep, sweepErr = sec.soft.Expire(s.ctx, 0)
			return Outcome{Status: 200}
		}, s.reincarnate(g, false))
		if err != nil {
			return err
		}
		if sweepErr != nil {
			return s.violatef("hold-expiry sweep: %v", sweepErr)
		}
		s.logf("   paused: %v; report %+v", fired, rep)
		s.acted = fired
		return s.expireModel(now)
	}}
}

// staleUndrop: an undrop reads the record, and before it restores the
// table it is undropped, written to and dropped again by another request.
func (s *Sim) staleUndrop() *barrier {
	softs := s.unheldUnlessAllowed(s.m.inState(soft))
	if len(softs) == 0 {
		return nil
	}
	g := pick(s, softs)
	return &barrier{desc: fmt.Sprintf("undrop of %s pausing after it reads the record", g), run: func() error {
		sec := s.w.second()
		ns, name := g.ns, g.name
		ns2, name2, ok := s.freeIdent(g)
		if !ok {
			return nil
		}
		body := fmt.Sprintf(`{"table-uuid": %q, "rename-to": {"namespace": [%q], "name": %q}}`, g.uuid, ns2, name2)
		op := &Op{desc: fmt.Sprintf("admin undrops %s.%s %s (second instance)", ns, name, body)}
		op.after = s.opUndropAfter(ns, name)
		o, fired, err := s.paused(func(then func()) {
			if then == nil {
				sec.db.arm(nil, nil)
				return
			}
			sec.db.arm(func(_, _ string, values []string) bool {
				for _, v := range values {
					if strings.HasPrefix(v, "N#") && strings.Contains(v, name) {
						return true
					}
				}
				return false
			}, then)
		}, func() Outcome {
			return s.w.callAt(s.ctx, sec.url, admin, "POST", lifecyclePath(ns, name)+"/undrop", body)
		}, s.reincarnate(g, false))
		if err != nil {
			return err
		}
		s.logf("   paused: %v; %s -> %s", fired, op.desc, o)
		s.acted = fired
		if err := s.judge(op, o); err != nil {
			return err
		}
		return op.after(o, false)
	}}
}

// staleLegalHold: a legal hold change reads the record, and before it
// writes, the table is undropped, held by its property and dropped again.
func (s *Sim) staleLegalHold() *barrier {
	softs := s.unheldUnlessAllowed(s.m.inState(soft))
	if len(softs) == 0 {
		return nil
	}
	return s.staleLegalHoldOf(pick(s, softs))
}

func (s *Sim) staleLegalHoldOf(g *Gen) *barrier {
	on := !g.legalHold
	return &barrier{kind: "stale-hold", desc: fmt.Sprintf("legal hold %v of %s pausing after it reads the record", on, g), run: func() error {
		sec := s.w.second()
		body := fmt.Sprintf(`{"enabled": %v}`, on)
		op := &Op{desc: fmt.Sprintf("admin sets the legal hold of %s: %s (second instance)", short(g.uuid), body)}
		o, fired, err := s.paused(func(then func()) {
			if then == nil {
				sec.db.arm(nil, nil)
				return
			}
			sec.db.arm(readsRecord(g.uuid), then)
		}, func() Outcome {
			return s.w.callAt(s.ctx, sec.url, admin, "POST", "/lifecycle/v1/catalogs/"+catalogName+"/soft-deleted-tables/"+g.uuid+"/legal-hold", body)
		}, s.reincarnate(g, !on))
		if err != nil {
			return err
		}
		s.logf("   paused: %v; %s -> %s", fired, op.desc, o)
		s.acted = fired
		if err := s.judge(op, o); err != nil {
			return err
		}
		s.m.holdInexact[g.uuid] = true // the record it read was another's
		if o.Status == 200 && g.state == soft {
			g.legalHold, g.holdUnsure = on, false
		}
		// What the change left in the expiry index shows at the next sweep
		// (which says whether it ended anything: the barrier's point was
		// the pause).
		err = s.sweepHoldExpiry()
		s.acted = fired
		return err
	}}
}

// purgeNowHeldMeanwhile: a purge-now of g reads its record, and before its
// conditional delete the holder sets the record's legal hold: the purge is
// refused (409) and the record stays, held (SPEC §2: the transaction
// checks the hold, not the read before it).
func (s *Sim) purgeNowHeldMeanwhile(g *Gen) *barrier {
	return &barrier{kind: "purge-held", desc: fmt.Sprintf("purge-now of %s pausing after it reads the record, its legal hold set meanwhile", g), run: func() error {
		sec := s.w.second()
		s.touched = map[string]int{} // alone: nothing contends
		ns, name := g.ns, g.name
		body := fmt.Sprintf(`{"table-uuid": %q}`, g.uuid)
		o, fired, err := s.paused(func(then func()) {
			if then == nil {
				sec.db.arm(nil, nil)
				return
			}
			// The purge-now's read of the name's records (a query).
			sec.db.arm(func(_, _ string, values []string) bool {
				for _, v := range values {
					if strings.HasPrefix(v, "N#"+ns) && strings.Contains(v, name) {
						return true
					}
				}
				return false
			}, then)
		}, func() Outcome {
			return s.w.callAt(s.ctx, sec.url, admin, "POST", lifecyclePath(ns, name)+"/purge-now", body)
		}, func() error { return s.runNow(s.legalHoldRecordOf(g, g.uuid, holder, true)) })
		if err != nil {
			return err
		}
		// Judged as the model stands after the intruder: held, a 409.
		op := s.purgeNowOf(g)
		op.desc += " (second instance)"
		s.logf("   paused: %v; %s -> %s", fired, op.desc, o)
		s.acted = fired && g.legalHold
		if err := s.judge(op, o); err != nil {
			return err
		}
		return op.after(o, false)
	}}
}

var _ = fmt.Sprint
