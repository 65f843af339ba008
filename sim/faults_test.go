package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/eventbus"
)

// Faults the generator turns on and off (barriers): delete calls that fail
// (every batch then dead-letters, its job DEAD_LETTERED, until the fault
// heals and the DLQ is redriven), every queue message delivered twice, a
// pipeline step that dies once at a named point (as a crashed Lambda), and
// grants and catalog settings that change under the actors.

// crashPoints are the purge pipeline's named points (purge.Service.SetCrash).
var crashPoints = []string{"drop.before-start", "start", "plan.start", "plan.batches-written", "delete.start",
	"delete.before-checkpoint", "finalize.start", "finalize.before-checkpoint", "finalize.metadata-deleted"}

func (s *Sim) faultBarrier() *barrier {
	switch s.rng.IntN(6) {
	case 0:
		code := pick(s, []struct {
			status int
			code   string
		}{{500, "InternalError"}, {503, "SlowDown"}})
		// The next n DeleteObjects calls fail (a burst: the SDK's and the
		// pipeline's retries, a redelivery, at 20 a dead letter or two),
		// whichever job makes them; the outage is over after n, but the
		// dead letters wait for the heal's redrive.
		n := pick(s, []int32{2, 6, 20})
		return &barrier{desc: fmt.Sprintf("fault: the next %d DeleteObjects answer %d %s", n, code.status, code.code), run: func() error {
			s.setDeleteFault(n, code.status, code.code)
			s.healIn = 1 + s.rng.IntN(8) // an outage lasts a few rounds
			return nil
		}}
	case 1:
		return &barrier{desc: "fault: every delete-queue message delivered twice", run: func() error {
			s.w.srv.Queues.SetDuplicates(true)
			s.faulty = true
			s.healIn = 1 + s.rng.IntN(8)
			return nil
		}}
	case 4:
		// Calls that succeed while part of what they carried failed: SQS
		// refuses some entries of a batch, S3 some keys of a
		// DeleteObjects (retryable codes; the pipeline must resend or
		// retry exactly those, and count only what it deleted).
		n := pick(s, []int32{1, 3, 12})
		code := pick(s, []string{"InternalError", "SlowDown"})
		return &barrier{desc: fmt.Sprintf("fault: the next %d SendMessageBatch entries refused, the next %d keys DeleteObjects names answered %s", n, n, code), run: func() error {
			s.w.srv.Queues.SetRefuse(n)
			var keys atomic.Int32
			s.w.srv.S3Emulator.SetKeyFault(&emulators.KeyFault{Code: code, Match: func(string) bool { return keys.Add(1) <= n }})
			s.faulty = true
			s.healIn = 1 + s.rng.IntN(8)
			return nil
		}}
	case 2:
		point := pick(s, crashPoints)
		return &barrier{desc: "fault: the pipeline dies once at " + point, run: func() error {
			s.crash.Store(&crashFault{point: point})
			return nil
		}}
	}
	return &barrier{desc: "heal: faults off, the DLQ redriven", run: func() error {
		s.heal()
		return nil
	}}
}

// setDeleteFault: the next n DeleteObjects calls answer status code.
func (s *Sim) setDeleteFault(n int32, status int, code string) {
	var calls atomic.Int32
	s.w.srv.S3Emulator.SetFault(&emulators.Fault{Status: status, Code: code, Match: func(r *http.Request) bool {
		return r.Method == http.MethodPost && r.URL.Query().Has("delete") && calls.Add(1) <= n
	}})
	s.faulty = true
}

// heal clears every fault and redrives the DLQ (an operator's console).
func (s *Sim) heal() {
	s.w.srv.S3Emulator.SetFault(nil)
	s.w.srv.S3Emulator.SetKeyFault(nil)
	s.w.srv.Queues.SetDuplicates(false)
	s.w.srv.Queues.SetRefuse(0)
	s.crash.Store(nil)
	s.faulty = false
	_ = s.w.srv.Redrive(s.ctx)
}

// --- grants and catalog settings ---

func (s *Sim) opGrant() *Op {
	p := pick(s, []string{writer, holder})
	base := writerPrivileges
	if p == holder {
		base = holderPrivileges
		if !s.m.legalPriv {
			base = base[1:]
		}
	}
	privs := slices.Clone(base)
	if s.chance(0.6) && len(privs) > 1 {
		i := s.rng.IntN(len(privs))
		privs = slices.Delete(privs, i, i+1)
	}
	body, bad := s.lifecycleBody(map[string]any{"privileges": privs}, "privileges")
	op := &Op{desc: fmt.Sprintf("admin sets the grant of %s: %s", p, trunc(body, 200)), keys: []string{"grants"}}
	if bad != "" {
		op.invalid, op.why = true, bad
	} else {
		op.want = []int{200}
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "PUT", "/lifecycle/v1/catalogs/"+catalogName+"/grants/"+p, body)
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status == 200 {
			s.m.grants[p] = privs
		}
		return nil
	}
	return op
}

// grantTo sets p's grant to privs (a valid body).
func (s *Sim) grantTo(p string, privs []string) *Op {
	raw, _ := json.Marshal(map[string]any{"privileges": privs})
	op := &Op{kind: "grant", desc: fmt.Sprintf("admin sets the grant of %s: %s", p, raw), keys: []string{"grants"}, want: []int{200}}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "PUT", "/lifecycle/v1/catalogs/"+catalogName+"/grants/"+p, string(raw))
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status == 200 {
			s.m.grants[p] = slices.Clone(privs)
		}
		return nil
	}
	return op
}

// sweepWindows: the storage sweep's window values the simulation sets
// (docs/design/storagesweep.md), each with its length; 0: out of range
// (under an hour), refused.
var sweepWindows = map[string]time.Duration{"P3D": 72 * time.Hour, "PT6H": 6 * time.Hour, "P10D": 240 * time.Hour, "PT30M": 0}

// vendDurations: the vended-credentials.duration values the simulation
// sets, each with the session length it promises; 0: outside STS's 15
// minutes to 1 hour, refused.
var vendDurations = map[string]time.Duration{"PT20M": 20 * time.Minute, "PT45M": 45 * time.Minute, "1h": time.Hour, "PT10M": 0, "PT2H": 0}

func (s *Sim) opCatalogSetting() *Op {
	key := pick(s, []string{"soft-delete.purge-on-expiry", "soft-delete.enabled", "storage-sweep.orphan-window", "storage.version-window", "vended-credentials.duration"})
	on := s.chance(0.5)
	if key == "soft-delete.enabled" && !on && s.chance(0.5) {
		on = true // mostly on: soft delete is what is under test
	}
	v := s.spelled(on) // as clients spell a boolean: the model reads it as the catalog does
	if strings.HasPrefix(key, "storage") {
		v = pick(s, slices.Sorted(maps.Keys(sweepWindows)))
	}
	if key == "vended-credentials.duration" {
		v = pick(s, slices.Sorted(maps.Keys(vendDurations)))
	}
	fields := map[string]any{"updates": map[string]string{key: v}}
	if key != "soft-delete.enabled" && s.chance(0.2) {
		// Back to the default (soft delete itself stays: removed, it is
		// off).
		fields, v = map[string]any{"removals": []string{key}}, ""
	}
	body, bad := s.lifecycleBody(fields, "")
	op := s.catalogPropsOp("admin sets the catalog's properties "+trunc(body, 100), body, key, v)
	switch {
	case bad != "":
		op.invalid, op.why, op.want = true, bad, nil
	case v != "" && strings.HasPrefix(key, "storage") && sweepWindows[v] == 0:
		op.invalid, op.why, op.want = true, key+" "+v+" is shorter than an hour", nil
	case v != "" && key == "vended-credentials.duration" && vendDurations[v] == 0:
		op.invalid, op.why, op.want = true, key+" "+v+" is outside 15 minutes to 1 hour", nil
	}
	return op
}

// window: the catalog's storage sweep window key (the model's view;
// def when unset).
func (s *Sim) window(key string, def time.Duration) time.Duration {
	if d := sweepWindows[s.m.catProps[key]]; d > 0 {
		return d
	}
	return def
}

// vendFor: how long the catalog's vended sessions last (the model's view:
// its vended-credentials.duration, an hour unset).
func (s *Sim) vendFor() time.Duration {
	if d := vendDurations[s.m.catProps["vended-credentials.duration"]]; d > 0 {
		return d
	}
	return time.Hour
}

// softOn: the catalog soft-deletes (in the model's view).
func (s *Sim) softOn(props map[string]string) bool {
	on, _ := strconv.ParseBool(props["soft-delete.enabled"])
	return on
}

// patternGrant: a grant to an IAM pattern that matches the reader alone
// (sim:rea*) gives it TABLE_WRITE at once, and its revoke takes it away at
// once (docs/design/authorization.md: "at once" holds for patterns too).
// The reader's probe is a commit whose requirement fails: authorized, a
// 409 that changes nothing; not, a 403.
func (s *Sim) patternGrant() *barrier {
	lives := s.m.inState(live)
	if len(lives) == 0 {
		return &barrier{kind: "pattern-grant", desc: "pattern grant: no live table", run: func() error { return nil }}
	}
	g := pick(s, lives)
	const pattern = "sim:rea*"
	grants := "/lifecycle/v1/catalogs/" + catalogName + "/grants/" + url.PathEscape(pattern) + "?pattern=true"
	return &barrier{kind: "pattern-grant", desc: fmt.Sprintf("a pattern grant %s gives the reader TABLE_WRITE on %s, then is revoked", pattern, g), run: func() error {
		probe := func() Outcome {
			return s.w.call(s.ctx, reader, "POST", tablePath(g.ns, g.name), map[string]any{
				"requirements": []any{map[string]any{"type": "assert-table-uuid", "uuid": "00000000-0000-4000-8000-00000000000b"}},
				"updates":      []any{map[string]any{"action": "set-properties", "updates": map[string]string{"sim.note": "pattern"}}},
			})
		}
		if o := probe(); o.Status != 403 {
			return s.violatef("the reader (TABLE_READ only) commits to %s before any pattern grant: %s, want 403", g, o)
		}
		if o := s.w.call(s.ctx, admin, "PUT", grants, map[string]any{"privileges": []string{"TABLE_READ", "TABLE_WRITE"}}); o.Status != 200 {
			return s.violatef("admin grants the pattern %s: %s", pattern, o)
		}
		o := probe()
		if o.Status != 409 {
			return s.violatef("the reader, granted TABLE_WRITE by the pattern %s, commits to %s with a failing requirement: %s, want 409", pattern, g, o)
		}
		if o := s.w.call(s.ctx, admin, "DELETE", grants, nil); o.Status != 204 && o.Status != 200 {
			return s.violatef("admin revokes the pattern %s: %s", pattern, o)
		}
		if o := probe(); o.Status != 403 {
			return s.violatef("the reader commits to %s after the pattern grant %s was revoked: %s, want 403 (a revoke counts at once)", g, pattern, o)
		}
		s.logf("   granted, used and revoked")
		return nil
	}}
}

// --- a write refused mid-request ---

// refusal: the server's next PutItem of an item whose key starts with
// prefix fails, once, past the SDK's retries (an outage, a throttle that
// outlasts them); reads: its GetItems of such items fail instead, every
// one while armed.
type refusal struct {
	prefix string
	reads  bool
	hit    atomic.Bool
}

// refuseWrites is a middleware of the server's AWS clients
// (server.Options.APIOptions) that plays the armed refusal.
func refuseWrites(cur func() *refusal) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("SimRefuse", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if r := cur(); r != nil {
				var item map[string]ddbtypes.AttributeValue
				switch p := in.Parameters.(type) {
				case *dynamodb.PutItemInput:
					if !r.reads {
						item = p.Item
					}
				case *dynamodb.GetItemInput:
					if r.reads {
						item = p.Key
					}
				}
				pk, _ := item["pk"].(*ddbtypes.AttributeValueMemberS)
				if pk != nil && strings.HasPrefix(pk.Value, r.prefix) && (r.reads || r.hit.CompareAndSwap(false, true)) {
					r.hit.Store(true)
					return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "simulated: the call was refused past the retries"}
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
}

// refusingBus: the event bus refuses the next *n PutEvents calls (an
// EventBridge outage): the outbox keeps each event until a relay
// publishes it.
type refusingBus struct {
	next eventbus.PutEvents
	n    *atomic.Int32
}

func (b refusingBus) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	for {
		n := b.n.Load()
		if n <= 0 {
			return b.next.PutEvents(ctx, in, optFns...)
		}
		if b.n.CompareAndSwap(n, n-1) {
			return nil, &smithy.GenericAPIError{Code: "InternalException", Message: "simulated: the event bus refused the call"}
		}
	}
}
