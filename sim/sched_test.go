package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/icehold/icehold/shared/store"
)

// Exact replay (docs/design/simulation.md, "Replay"). Three things made a
// seed's run depend on timing, and each is now a function of the seed:
//
//   - the actors of a round run under token passing: exactly one holds the
//     token; it gives it up when it sends its next request (REST, or an
//     engine's S3 call), when the server's handler of its request makes
//     an AWS call, or when it ends; a seeded schedule (one preemption a
//     round, see dispatch) picks who goes on. Requests interleave at the
//     server's AWS calls, in an order the seed fixes;
//   - the purge pipeline (workflow executions, delete batches) does not
//     run during a round: its first step waits at a gate, and after every
//     round the simulation settles it (opens the gate, redrives, waits
//     until every job has ended or is dead-lettered under a fault);
//   - the clock starts at a midnight, 30 days ahead of the wall clock that
//     stamps snapshots, and jumps in whole half hours (see makeBarrier).
//
// -sim.free runs the actors of a round at once instead (goroutine timing
// decides, as in production; a failure then may not replay).

// goid is the current goroutine's id (the actor a request belongs to).
func goid() uint64 {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n])
	if len(f) < 2 {
		return 0
	}
	id, _ := strconv.ParseUint(string(f[1]), 10, 64)
	return id
}

// sched passes the token among the actors of a round.
type sched struct {
	mu      sync.Mutex
	cond    *sync.Cond
	rng     *rand.Rand
	actorOf map[uint64]int // goroutine → actor
	running int            // the actor holding the token, -1: none
	parked  map[int]bool   // actors waiting to send a request
	live    map[int]bool   // actors not finished
	pending int            // actors not yet entered
	grants  []int          // the round's order of requests (by actor)
	// prio: the actors, first first; at grant switchAt the first goes
	// last (one preemption a round, see dispatch).
	prio     []int
	switchAt int
	switchOn string // the AWS call the first actor is preempted before (beginAt)
}

func newSched(seed uint64) *sched {
	s := &sched{rng: rand.New(rand.NewPCG(seed, 0x5c4ed)), actorOf: map[uint64]int{}, running: -1}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// begin starts a round of n actors.
func (s *sched) begin(n int) {
	s.beginAt(n, 0, "")
}

// beginAt starts a round of n actors; at > 0 places its preemption: actor
// 0 first, preempted at grant at (a template's race, swept over the
// windows of its first request); on != "": actor 0 first, preempted
// before its first AWS call named on; else both drawn from the seed.
func (s *sched) beginAt(n, at int, on string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live, s.parked, s.running, s.pending, s.grants = map[int]bool{}, map[int]bool{}, -1, n, nil
	s.prio = s.rng.Perm(n)
	s.switchAt, s.switchOn = s.rng.IntN(switchSpan), ""
	if at > 0 || on != "" {
		s.prio, s.switchAt, s.switchOn = make([]int, n), at, on
		for i := range n {
			s.prio[i] = i
		}
		if on != "" {
			s.switchAt = -1
		}
	}
	for i := range n {
		s.live[i] = true
	}
}

// enter registers the calling goroutine as actor a and waits for the token.
func (s *sched) enter(a int) {
	s.mu.Lock()
	s.actorOf[goid()] = a
	s.pending--
	s.mu.Unlock()
	s.park(a)
}

// exit gives the token up for good.
func (s *sched) exit(a int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.actorOf, goid())
	delete(s.live, a)
	delete(s.parked, a)
	if s.running == a {
		s.running = -1
	}
	s.dispatch()
}

// park: actor a waits to send a request; the token goes to a seeded choice
// among the waiting actors once every actor waits.
func (s *sched) park(a int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parked[a] = true
	if s.running == a {
		s.running = -1
	}
	s.dispatch()
	for s.running != a {
		s.cond.Wait()
	}
}

// parkBefore: park before an AWS call named op; the round's preemption
// falls here when it is named by this call (beginAt's on).
func (s *sched) parkBefore(a int, op string) {
	s.mu.Lock()
	if s.switchOn != "" && op == s.switchOn && len(s.prio) > 0 && a == s.prio[0] {
		s.switchAt, s.switchOn = len(s.grants), ""
	}
	s.mu.Unlock()
	s.park(a)
}

// switchSpan: the grants a round's preemption point falls among.
const switchSpan = 10

// dispatch hands the token to the first actor in prio that waits, once
// every actor waits. A round's schedule is one preemption (as PCT, depth
// one): the first actor runs until its switchAt-th call, then the others
// run to their end before it goes on. A coin at every call would rarely
// let the other actor's whole request (an append: its files, then its
// commit) land in one window of a request (a partition drop between
// reading the table and committing).
func (s *sched) dispatch() {
	if s.running != -1 || s.pending > 0 || len(s.parked) == 0 || len(s.parked) < len(s.live) {
		return
	}
	if len(s.grants) == s.switchAt {
		s.prio = append(s.prio[1:], s.prio[0])
	}
	a := -1
	for _, p := range s.prio {
		if s.parked[p] {
			a = p
			break
		}
	}
	delete(s.parked, a)
	s.running = a
	s.grants = append(s.grants, a)
	s.cond.Broadcast()
}

// actor is the actor the calling goroutine plays (-1: none).
func (s *sched) actor() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.actorOf[goid()]; ok {
		return a
	}
	return -1
}

// lastGrants: for each actor, the position of its last request in the
// round (-1: none), i.e. when its op took effect.
func (s *sched) lastGrants() map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int{}
	for i, a := range s.grants {
		out[a] = i
	}
	return out
}

// order is the round's request order, e.g. "0 1 1 0".
func (s *sched) order() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for i, a := range s.grants {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(a))
	}
	return b.String()
}

// gated is an actor's transport: each request waits for the token, and
// names its actor (actorHeader) so the server's handler plays it too.
type gated struct {
	next  http.RoundTripper
	sched func() *sched
}

func (g gated) RoundTrip(r *http.Request) (*http.Response, error) {
	if s := g.sched(); s != nil {
		if a := s.actor(); a >= 0 {
			s.park(a)
			r = r.Clone(r.Context())
			r.Header.Set(actorHeader, strconv.Itoa(a))
		}
	}
	return g.next.RoundTrip(r)
}

// --- interleaving inside a request ---
//
// A request does not run atomically: the goroutine serving an actor's REST
// request plays that actor until it starts its answer, and parks before
// each AWS call the server's SDK clients make (DynamoDB, S3, SQS, Step
// Functions), so the seeded choice may run the other actor between a
// request's check and its conditional write, or between a partition drop's
// read of the table and its commit. Two reads pass through: the
// authorizer's of grants and the purge service's of a bucket's versioning,
// which caches on the wall clock make or skip (parking on them, the order
// would not replay). Goroutines a handler spawns, the pipeline, and the
// FileIO iceberg-go builds (manifests a partition drop writes) are nobody:
// their calls pass through.

// actorHeader names the actor a REST request is sent for.
const actorHeader = "X-Sim-Actor"

// serveAs is the REST handler's wrap (server.Options.Wrap): the goroutine
// plays the request's actor until it writes its answer.
func serveAs(sched func() *sched) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := sched()
			a, err := strconv.Atoi(r.Header.Get(actorHeader))
			if s == nil || err != nil {
				next.ServeHTTP(w, r)
				return
			}
			id := goid()
			s.mu.Lock()
			s.actorOf[id] = a
			s.mu.Unlock()
			// Unmapped before a byte of the answer goes back: the actor's
			// own goroutine may then send its next request, and only one
			// goroutine may play an actor at a time.
			var once sync.Once
			leave := func() {
				once.Do(func() {
					s.mu.Lock()
					delete(s.actorOf, id)
					s.mu.Unlock()
				})
			}
			defer leave()
			next.ServeHTTP(&leavingWriter{ResponseWriter: w, leave: leave}, r)
		})
	}
}

// leavingWriter calls leave before the answer starts.
type leavingWriter struct {
	http.ResponseWriter
	leave func()
}

func (w *leavingWriter) WriteHeader(code int) { w.leave(); w.ResponseWriter.WriteHeader(code) }

func (w *leavingWriter) Write(b []byte) (int, error) { w.leave(); return w.ResponseWriter.Write(b) }

func (w *leavingWriter) Flush() {
	w.leave()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *leavingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// parkBeforeCalls is a middleware of the server's AWS clients
// (server.Options.APIOptions): an actor's goroutine gives the token up
// before each call (once per call, not per retry).
func parkBeforeCalls(sched func() *sched) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("SimPark", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if s := sched(); s != nil && !cached(middleware.GetOperationName(ctx), in.Parameters) {
				if a := s.actor(); a >= 0 {
					s.parkBefore(a, middleware.GetOperationName(ctx))
				}
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
}

// cached: a read whose count a wall-clock cache decides (a grant, a
// bucket's versioning).
func cached(op string, params any) bool {
	if op == "GetBucketVersioning" {
		return true
	}
	if in, ok := params.(*dynamodb.GetItemInput); ok {
		pk, _ := in.Key["pk"].(*ddbtypes.AttributeValueMemberS)
		return pk != nil && strings.HasPrefix(pk.Value, "GRANT#")
	}
	return false
}

// --- the pipeline's gate ---

// pipeGate holds the purge pipeline's workflows at their first step while
// closed; abort releases them with an error (the process is going away).
type pipeGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	open    bool
	aborted bool
	waiting int
}

func newPipeGate() *pipeGate {
	g := &pipeGate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

var errAborted = errors.New("simulated crash: the process is going away")

func (g *pipeGate) wait() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting++
	defer func() { g.waiting-- }()
	for !g.open && !g.aborted {
		g.cond.Wait()
	}
	if g.aborted {
		return errAborted
	}
	return nil
}

func (g *pipeGate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = open
	g.cond.Broadcast()
}

func (g *pipeGate) abort() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.aborted = true
	g.cond.Broadcast()
}

// crashFault: the pipeline dies once at a named point (every time: at
// each delivery, until healed).
type crashFault struct {
	point string
	every bool
	n     atomic.Int32
}

// pipelineHook is the purge service's hook (purge.Service.SetCrash): the
// gate at the workflow's first step, the injected crash, and a pause the
// restart-mid-pipeline barrier waits at.
func (s *Sim) pipelineHook(gate *pipeGate) func(string) error {
	return func(p string) error {
		if p == "plan.start" {
			if err := gate.wait(); err != nil {
				return err
			}
		}
		if f := s.crash.Load(); f != nil && f.point == p && (f.n.Add(1) == 1 || f.every) {
			if p == "start" || p == "drop.before-start" {
				s.startCrashed.Store(true)
			}
			return fmt.Errorf("simulated crash at %s", p)
		}
		if stop := s.stopAt.Load(); stop != nil && stop.point == p {
			stop.once.Do(func() { close(stop.hit) })
			<-stop.release
			return errAborted
		}
		return nil
	}
}

// stopPoint: the restart barrier's pause: the first pipeline step that
// reaches point waits there until the process is killed.
type stopPoint struct {
	point   string
	hit     chan struct{}
	release chan struct{}
	once    sync.Once
}

// settle runs the pipeline until it rests: the gate opens and it waits until no job is PENDING or RUNNING and
// the delete queue is empty (under a delete fault, dead-lettered jobs rest
// until healed). A job that makes no progress for a while is reconciled
// (a callback lost in a restart); the trace says so.
func (s *Sim) settle() error {
	if s.free {
		return nil
	}
	if point := s.holdAt; point != "" {
		s.holdAt = ""
		if err := s.killAt(point); err != nil {
			return err
		}
	}
	s.w.gate.set(true)
	defer s.w.gate.set(false)
	if s.startCrashed.Swap(false) {
		if _, err := s.w.srv.Purge.Reconcile(s.ctx); err != nil {
			return s.violatef("reconcile: %v", err)
		}
		s.logf("   settle: reconcile (a job's start was lost)")
	}
	start := time.Now()
	// progressed: when a job last got further (batches done, counters,
	// finalize offset: a final listing of 10,000 strays moves only the
	// counters; a state flapping between dead letters and redrives is no
	// progress): the pipeline is stuck only when nothing got further for
	// 3 minutes, however long a loaded machine makes it run.
	lastChange, progressed, last, lastMoved := time.Now(), time.Now(), "", ""
	for {
		active, err := s.w.activeJobs(s.ctx)
		if err != nil {
			return err
		}
		busy, moved := s.progressOf(active)
		depth, _ := s.w.srv.QueueDepth(s.ctx, false)
		if len(busy) == 0 && depth == 0 {
			if d := time.Since(start); d > 2*time.Second {
				s.logf("   settled in %v", d.Round(100*time.Millisecond))
			}
			return nil
		}
		if dlq, _ := s.w.srv.QueueDepth(s.ctx, true); dlq > 0 && !s.faulty && depth == 0 {
			_ = s.w.srv.Redrive(s.ctx)
		}
		if now := fmt.Sprint(busy, depth); now != last {
			last, lastChange = now, time.Now()
		}
		if now := fmt.Sprint(moved); now != lastMoved {
			lastMoved, progressed = now, time.Now()
		}
		if time.Since(lastChange) > 10*time.Second {
			s.logf("   settle: no progress for 10 s (%v, queue %d): reconcile", busy, depth)
			if _, err := s.w.srv.Purge.Reconcile(s.ctx); err != nil {
				return s.violatef("reconcile: %v", err)
			}
			lastChange = time.Now()
		}
		if time.Since(progressed) > 3*time.Minute {
			return s.violatef("the purge pipeline made no progress in 3 minutes: %v (delete queue %d)", busy, depth)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// progressOf: which of the active jobs the pipeline still owes work, and
// how far each got (batches done, counters, finalize offset: a final
// listing of 10,000 strays moves only the counters).
func (s *Sim) progressOf(active []store.ActiveJob) (busy, moved []string) {
	for _, a := range active {
		j, err := s.w.srv.Catalog.Store().GetJob(s.ctx, a.Catalog, a.ID)
		if err != nil {
			continue
		}
		if j.State == store.JobPending || j.State == store.JobRunning || (j.State == store.JobDeadLettered && !s.faulty) {
			busy = append(busy, fmt.Sprintf("%s %s %d/%d", j.ID, j.State, j.BatchesDone, j.BatchesTotal))
			moved = append(moved, fmt.Sprint(j.ID, j.BatchesDone, j.FilesDeleted, j.FilesUnreferenced, j.FilesMissing, j.FinalizeOffset))
		}
	}
	return busy, moved
}

// killAt lets the pipeline run until a step reaches point, and kills the
// process there (as a crashed Lambda, a lost host): it restarts from its
// state folder and the settle that follows finishes what was left.
func (s *Sim) killAt(point string) error {
	stop := &stopPoint{point: point, hit: make(chan struct{}), release: make(chan struct{})}
	s.stopAt.Store(stop)
	s.w.gate.set(true)
	deadline := time.Now().Add(time.Minute)
	hit := false
	for !hit && time.Now().Before(deadline) {
		select {
		case <-stop.hit:
			hit = true
			continue
		case <-time.After(25 * time.Millisecond):
		}
		if active, err := s.w.activeJobs(s.ctx); err == nil && len(active) == 0 {
			break
		}
	}
	s.stopAt.Store(nil)
	close(stop.release)
	if !hit {
		s.logf("   no pipeline step reached %s", point)
		return nil
	}
	s.logf("   the process dies while a step is at %s; restart from the state folder", point)
	s.crashedAt = point
	s.faulty = false
	return s.w.restart(s.ctx)
}

// --- the replay check ---

// A number cut short by a truncated description ("read-snapshot-id":89805…)
// is masked too: a snapshot id is random (soak seed 1069's replay left the
// schedule there).
var idLike = regexp.MustCompile(`\b[0-9]{5}-[0-9]+-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}|pj-[0-9a-f]+-[0-9a-f]+|\b[0-9a-f]{8}\b|\b[0-9]{12,}\b|\b[0-9]+…`)

// scheduleLine is what a replay must repeat of a round: the ops, the order
// their requests were sent in and the answers' statuses (ids masked: the
// catalog makes new uuids, and iceberg-go new snapshot ids, each run).
func scheduleLine(step int, parts ...string) string {
	return fmt.Sprintf("%d %s", step, idLike.ReplaceAllString(strings.Join(parts, " | "), "#"))
}

// The replay check compares rounds without what is random in them: uuids,
// job ids, snapshot ids, whole or cut short by a truncated description,
// and a data file's task numbers.
func TestScheduleLineMasksRandomIDs(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{`drops partitions of a.t: {"read-snapshot-id":89805…`, `drops partitions of a.t: {"read-snapshot-id":46713…`},
		{`"read-snapshot-id":4671301975536870912}`, `"read-snapshot-id":8980512345678901234}`},
		{`job pj-001a24bf175f6-855ccee356`, `job pj-001a24bec249a-aad083d4f1`},
		{`uuid 951bd52b-41a0-49db-8d4c-a8f368fe2fdd`, `uuid fb9a6bcf-4b75-4efb-b21c-7b57309def07`},
		// iceberg-go numbers a write's files by task as its writers finish.
		{`data/d=2027-03-06/00002-1-951bd52b-41a0-49db-8d4c-a8f368fe2fdd-00001.parquet`, `data/d=2027-03-06/00000-0-fb9a6bcf-4b75-4efb-b21c-7b57309def07-00001.parquet`},
	} {
		t.Run(tc.a, func(t *testing.T) {
			if a, b := scheduleLine(1, tc.a), scheduleLine(1, tc.b); a != b {
				t.Errorf("%q and %q differ", a, b)
			}
		})
	}
	if a, b := scheduleLine(1, "appends 3 rows -> 200"), scheduleLine(1, "appends 4 rows -> 200"); a == b {
		t.Errorf("what is not random must tell rounds apart: %q", a)
	}
}
