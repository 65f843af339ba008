package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Flags (make test, make soak, and the replay command a failure prints).
var (
	seedsFlag   = flag.String("sim.seeds", "1,2,3", "seeds to run: a list (1,2,3) or a count from a start (100+20: 20 seeds from 100)")
	stepsFlag   = flag.Int("sim.steps", 60, "steps (rounds) per seed")
	actorsFlag  = flag.Int("sim.actors", 2, "concurrent actors")
	withoutFlag = flag.String("sim.without", "", "what not to generate (comma-separated operation or barrier kinds, or bad-duration, bad-body, unprivileged), to bisect a failure")
	verboseFlag = flag.Bool("sim.v", false, "log every step")
	skipFlag    = flag.String("sim.skip", "", "checks not to make (comma-separated: leftovers, versions, counters, orphans, index, rows, events), to look past a known failure")
	freeFlag    = flag.Bool("sim.free", false, "run a round's actors at once (goroutine timing decides: a failure may not replay exactly)")
	expectFlag  = flag.String("sim.expect", "", "a failed run's schedule file: the replay stops where it does not repeat it")
	swarmFlag   = flag.Bool("sim.swarm", true, "each seed's swarm configuration (kinds off, weights, pools); false: every kind over every name")
	failfast    = flag.Bool("sim.failfast", false, "stop at the first failing seed (make mutate)")
	coverFlag   = flag.Bool("sim.cover", true, "fail when a kind of operation, barrier or template never ran or never changed state (runs of 600 rounds or more)")
)

// TestLifecycleSimulation runs the simulation for each seed. A failure
// prints the seed, the trace and the command that replays it.
func TestLifecycleSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("the simulation drives the whole composition; not in -short")
	}
	seeds, err := parseSeeds(*seedsFlag)
	if err != nil {
		t.Fatal(err)
	}
	// Every seed runs: one failing seed (a model's false alarm or a defect)
	// must not hide what the others would find. The summary names each
	// failing seed with its replay command.
	var failed []string
	for _, seed := range seeds {
		var replay string
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { replay = runSeed(t, seed, *stepsFlag) }) {
			failed = append(failed, fmt.Sprintf("  seed %d: %s", seed, replay))
			if *failfast {
				break
			}
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d seeds failed:\n%s", len(failed), len(seeds), strings.Join(failed, "\n"))
	}
	without := map[string]bool{}
	for _, k := range strings.Split(*withoutFlag, ",") {
		without[strings.TrimSpace(k)] = true
	}
	table, missing := cover.table(without)
	out := fmt.Sprintf("coverage of %d seeds x %d steps (ran: times generated; changed: times it changed state)\n%s", len(seeds), *stepsFlag, table)
	if p := os.Getenv("SIM_COVERAGE"); p != "" {
		_ = os.WriteFile(p, []byte(out), 0o644)
	}
	t.Log(out)
	if *coverFlag && len(seeds)**stepsFlag >= 600 && len(missing) > 0 {
		t.Errorf("never reached within %d seeds x %d steps: %s", len(seeds), *stepsFlag, strings.Join(missing, ", "))
	}
}

func parseSeeds(s string) ([]uint64, error) {
	if from, n, ok := strings.Cut(s, "+"); ok {
		a, err1 := strconv.ParseUint(from, 10, 64)
		b, err2 := strconv.ParseUint(n, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("-sim.seeds %q: want START+COUNT", s)
		}
		var out []uint64
		for i := range b {
			out = append(out, a+i)
		}
		return out, nil
	}
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("-sim.seeds %q: %v", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// Sim is one seeded run.
type Sim struct {
	t    testing.TB
	ctx  context.Context
	seed uint64
	// pageSize: the listings' page size (0: the server's default); small
	// on three seeds in four, so the checks' listings cross pages.
	pageSize int
	rng      *rand.Rand
	w        *World
	m        *Model
	reach    *reacher
	actors   int
	without  map[string]bool
	skip     map[string]bool
	step     int
	steps    int
	// accepted, tried: this seed's accepted operations by kind, and the
	// kinds tourOp tried (see tourOp).
	accepted, tried map[string]int
	trace           []string
	// pre is the bucket's listing before the current round (what a
	// permanent delete accepted in the round had under its prefix).
	pre map[string]int64
	// touched: generations and identifiers a round's ops named; a mismatch
	// between model and store there is the round's order, not a defect.
	touched map[string]int
	// hardDrops: hard drops of the round whose generation the observation
	// names (by identifier).
	hardDrops map[string]int
	// sweeping: a sweep that commits ran this round (pointers may move);
	// expirable: the refs it may have expired (past their max-ref-age).
	sweeping  bool
	expirable map[*Gen][]string
	// faulty: delivery faults are on (dead letters are not redriven);
	// healIn: rounds until they heal on their own.
	faulty bool
	healIn int
	// sinceBackfill: rounds left in which creates aim at the locations a
	// backfill should have claimed.
	sinceBackfill int
	backfilled    bool // the early backfill ran (pickBarrier)
	barriers      int  // random barriers picked so far (pickBarrier)
	// free: -sim.free (no token passing, no settling: sched_test.go).
	free bool
	// crash: the injected pipeline crash; startCrashed: it lost a job's
	// start (settle reconciles); stopAt: the restart barrier's pause.
	crash        atomic.Pointer[crashFault]
	startCrashed atomic.Bool
	stopAt       atomic.Pointer[stopPoint]
	// sw: the seed's swarm configuration; script: the rounds a running
	// template has left; templateDone: a template that ended (counted at
	// the next round); holdAt: the settle of the round kills the process
	// when a pipeline step reaches this point (crashedAt: it did).
	sw           swarm
	script       []step
	templateDone *tmplRun
	holdAt       string
	crashedAt    string
	// acted: the barrier of the round did what it is there for.
	acted bool
	// fresh: the last check's listing of the bucket (bucketNow).
	fresh map[string]int64
	// sessions: the vended sessions engines hold (engines_test.go).
	sessions []*session
	// vendTags: an engine's last vended load of a table (principal and
	// name), whose tag it revalidates with (If-None-Match).
	vendTags map[string]vendTag
	// afterHeal runs once in the next drain, after its heal (a fault the
	// drain must meet: corners_test.go).
	afterHeal func()
	// touring: tourOp is making its op (swarm_test.go).
	touring bool
	// cornersRun: corner barriers run or skipped (corners_test.go).
	cornersRun int
	// schedule: each round's replay line; expect: a failed run's.
	schedule     []string
	expect       []string
	scheduleFile string
}

// violation is an invariant the run broke: the run stops there.
type violation struct{ msg string }

func (v *violation) Error() string { return v.msg }

func (s *Sim) violatef(format string, args ...any) error {
	return &violation{msg: fmt.Sprintf(format, args...)}
}

func (s *Sim) logf(format string, args ...any) {
	line := fmt.Sprintf("%4d  ", s.step) + fmt.Sprintf(format, args...)
	s.trace = append(s.trace, line)
	if *verboseFlag {
		s.t.Log(line)
	}
}

// runSeed runs one seed; on a failure it returns the replay command.
func runSeed(t *testing.T, seed uint64, steps int) string {
	dir := t.TempDir()
	s := &Sim{
		t: t, ctx: context.Background(), seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)),
		// Even seeds run with the outbox relay lagging (World.relayLags).
		w:      &World{dir: filepath.Join(dir, "state"), clock: &Clock{t: startOfClock()}, relayLags: seed%2 == 0},
		reach:  &reacher{cache: map[string]*reach{}},
		actors: max(*actorsFlag, 1), without: map[string]bool{}, skip: map[string]bool{}, accepted: map[string]int{}, tried: map[string]int{},
		free: *freeFlag, sw: newSwarm(seed, !*swarmFlag), pageSize: int(seed % 4), steps: steps,
	}
	if !s.free {
		s.w.sched, s.w.hook = newSched(seed), s.pipelineHook
	}
	if *expectFlag != "" {
		raw, err := os.ReadFile(*expectFlag)
		if err != nil {
			t.Fatal(err)
		}
		s.expect = strings.Split(strings.TrimSpace(string(raw)), "\n")
	}
	for _, k := range strings.Split(*skipFlag, ",") {
		if k = strings.TrimSpace(k); k != "" {
			s.skip[k] = true
		}
	}
	for _, k := range strings.Split(*withoutFlag, ",") {
		if k = strings.TrimSpace(k); k != "" {
			s.without[k] = true
		}
	}
	defer s.w.close()
	start := time.Now()
	err := s.run(steps)
	if err == nil {
		err = s.quiesce(true)
	}
	if err != nil {
		s.fail(err)
		return s.replayCommand()
	}
	t.Logf("seed %d: %d steps in %v; %d generations (%s)", seed, s.step, time.Since(start).Round(time.Millisecond), len(s.m.gens), s.census())
	if dir := os.Getenv("SIM_SCHEDULES"); dir != "" {
		// Each seed's schedule, to compare two runs (the replay check).
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d.schedule", seed)), []byte(strings.Join(s.schedule, "\n")+"\n"), 0o644)
	}
	return ""
}

func (s *Sim) census() string {
	n := map[state]int{}
	for _, g := range s.m.gens {
		n[g.state]++
	}
	v := map[state]int{}
	for _, x := range s.m.views {
		v[x.state]++
	}
	return fmt.Sprintf("%d live, %d soft, %d purging, %d released, %d unregistered; views: %d live, %d soft, %d purging, %d gone",
		n[live], n[soft], n[purging], n[released], n[unregistered], v[live], v[soft], v[purging], v[gone])
}

// fail reports a violation with the seed, the trace and the replay command.
func (s *Sim) fail(err error) {
	var b strings.Builder
	fmt.Fprintf(&b, "lifecycle simulation: seed %d failed at step %d:\n  %v\n\ntrace:\n", s.seed, s.step, err)
	tr := s.trace
	if len(tr) > 400 {
		fmt.Fprintf(&b, "  (%d earlier lines)\n", len(tr)-400)
		tr = tr[len(tr)-400:]
	}
	for _, l := range tr {
		b.WriteString(l + "\n")
	}
	// The schedule (each round's ops, request order and statuses) lets the
	// replay say where it parts from this run, if it ever does.
	sched := filepath.Join(os.TempDir(), fmt.Sprintf("sim-seed-%d.schedule", s.seed))
	if *expectFlag != "" {
		sched += ".replay" // the file replayed stays as it was
	}
	if err := os.WriteFile(sched, []byte(strings.Join(s.schedule, "\n")+"\n"), 0o644); err == nil {
		s.scheduleFile = sched
	}
	fmt.Fprintf(&b, "\nreplay: %s\n", s.replayCommand())
	if p := os.Getenv("SIM_TRACE"); p != "" {
		_ = os.WriteFile(p, []byte(b.String()), 0o644)
	}
	s.t.Error(b.String())
}

func (s *Sim) replayCommand() string {
	// The seed's own budget, not the failing step: from a third of it on,
	// the op tour (tourOp) is part of the run; the replay stops at the
	// failure all the same.
	cmd := fmt.Sprintf("go test -count=1 -run 'TestLifecycleSimulation' ./sim/ -sim.seeds=%d -sim.steps=%d", s.seed, s.steps)
	if s.free {
		cmd += " -sim.free"
	}
	if s.scheduleFile != "" {
		cmd += " -sim.expect=" + s.scheduleFile
	}
	if !*swarmFlag {
		cmd += " -sim.swarm=false"
	}
	if s.actors != 2 {
		cmd += fmt.Sprintf(" -sim.actors=%d", s.actors)
	}
	if *withoutFlag != "" {
		cmd += " -sim.without=" + *withoutFlag
	}
	if *skipFlag != "" {
		cmd += " -sim.skip=" + *skipFlag
	}
	return cmd
}

// run: setup, then steps rounds; each round is either a barrier step
// (clock, sweeps, faults, crash, backfill, quiescence) or one operation
// per actor run at once, then the checks.
func (s *Sim) run(steps int) error {
	if err := s.w.start(s.ctx); err != nil {
		return err
	}
	if err := s.w.setup(s.ctx); err != nil {
		return err
	}
	s.m = newModel(s.w.legalPriv)
	s.logf("setup: catalog %s at %s, soft delete on; TABLE_LEGAL_HOLD known: %v; clock %s; outbox relay lagging: %v", catalogName, warehouse, s.w.legalPriv, s.w.clock.Now().Format(time.RFC3339), s.w.relayLags)
	s.logf("swarm: %s", s.sw.desc)
	for _, ns := range namespaces {
		if o := s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces", map[string]any{"namespace": []string{ns}}); o.Status != 200 {
			return fmt.Errorf("create namespace %s: %s", ns, o)
		}
		s.m.namespaces[ns] = map[string]string{}
	}
	// The seed's catalog settings: in half the seeds expiry keeps the files
	// (a purge-now still purges), in half sessions last other than the
	// hour.
	set := map[string]string{}
	if s.chance(0.5) {
		set["soft-delete.purge-on-expiry"] = "false"
	}
	if s.chance(0.5) {
		set["vended-credentials.duration"] = pick(s, []string{"PT20M", "PT45M"})
	}
	if len(set) > 0 {
		if o := s.w.call(s.ctx, admin, "POST", "/lifecycle/v1/catalogs/"+catalogName+"/properties", map[string]any{"updates": set}); o.Status != 200 {
			return fmt.Errorf("catalog settings %v: %s", set, o)
		}
		maps.Copy(s.m.catProps, set)
		s.logf("setup: catalog settings %v", set)
	}
	for s.step = 1; s.step <= steps; s.step++ {
		start := time.Now()
		if err := s.round(); err != nil {
			return err
		}
		if d := time.Since(start); d > 3*time.Second {
			s.logf("   (round took %v)", d.Round(100*time.Millisecond))
		}
	}
	s.step = steps
	return nil
}

func (s *Sim) round() error {
	s.touched, s.sweeping, s.hardDrops, s.expirable = map[string]int{}, false, map[string]int{}, map[*Gen][]string{}
	if s.sinceBackfill > 0 {
		s.sinceBackfill--
	}
	if s.healIn > 0 {
		if s.healIn--; s.healIn == 0 && s.faulty {
			s.logf("== heal: the outage ends, the DLQ redriven")
			if err := s.scheduled("barrier heal"); err != nil {
				return err
			}
			s.heal()
			if err := s.settle(); err != nil {
				return err
			}
			return s.check()
		}
	}
	if t := s.templateDone; t != nil {
		s.templateDone = nil
		cover.add("template "+t.name, t.reached)
		s.logf("   template %s #%d ended (reached %v)", t.name, t.n, t.reached)
	}
	s.maybeTemplate()
	var scripted *plan
	for len(s.script) > 0 && scripted == nil {
		st := s.script[0]
		s.script = s.script[1:]
		scripted = st()
	}
	b := (*barrier)(nil)
	if scripted != nil {
		b = scripted.b
	} else {
		if b = s.corner(); b == nil {
			b = s.pickBarrier()
		}
	}
	if b != nil {
		s.logf("== %s", b.desc)
		if err := s.scheduled("barrier " + b.desc); err != nil {
			return err
		}
		s.acted = true
		if err := b.run(); err != nil {
			return err
		}
		cover.add("barrier "+b.kind, s.acted)
		if err := s.settle(); err != nil {
			return err
		}
		return s.check()
	}
	var ops []*Op
	if scripted != nil {
		ops = scripted.ops
		for i, op := range ops {
			op.actor = i
			if op.kind == "" {
				op.kind = "scripted"
			}
		}
	} else {
		ops = make([]*Op, s.actors)
		for i := range ops {
			ops[i] = s.pickOp(i)
		}
	}
	// Contention: ops that share a key (an identifier, a uuid, a location)
	// may land in either order.
	s.touched = map[string]int{}
	for _, op := range ops {
		for _, k := range dedupe(op.keys) {
			s.touched[k]++
		}
	}
	var err error
	if s.pre, err = s.bucketNow(); err != nil {
		return err
	}
	var digestBefore string
	solo := len(ops) == 1 || (scripted == nil && s.rng.IntN(4) == 0)
	if solo {
		ops = ops[:1]
		s.touched = map[string]int{}
		for _, k := range dedupe(ops[0].keys) {
			s.touched[k]++
		}
		if ops[0].invalid && s.pipelineIdle() {
			if digestBefore, err = s.w.digest(s.ctx); err != nil {
				return err
			}
		}
	}
	outs := make([]Outcome, len(ops))
	var wg sync.WaitGroup
	if s.w.sched != nil {
		at, on := 0, ""
		if scripted != nil {
			at, on = scripted.preempt, scripted.preemptOn
		}
		s.w.sched.beginAt(len(ops), at, on)
	}
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.w.sched != nil {
				s.w.sched.enter(i)
				defer s.w.sched.exit(i)
			}
			outs[i] = op.run()
		}()
	}
	wg.Wait()
	line := []string{}
	for i, op := range ops {
		o := outs[i]
		s.logf("a%d %s -> %s", op.actor, op.desc, o)
		line = append(line, fmt.Sprintf("a%d %s -> %d", op.actor, op.desc, o.Status))
	}
	if s.w.sched != nil {
		line = append(line, "order "+s.w.sched.order())
		s.logf("   request order (by actor): %s", s.w.sched.order())
	}
	if err := s.scheduled(line...); err != nil {
		return err
	}
	for i, op := range ops {
		if err := s.judge(op, outs[i]); err != nil {
			return err
		}
		cover.add("op "+op.kind, outs[i].ok())
		if outs[i].ok() {
			s.accepted[op.kind]++
		}
	}
	if digestBefore != "" && s.pipelineIdle() {
		after, err := s.w.digest(s.ctx)
		if err != nil {
			return err
		}
		if after != digestBefore {
			return s.violatef("a request the model says is invalid (%s) changed the store or the bucket:\n%s", ops[0].desc, diffLines(digestBefore, after))
		}
	}
	// The model applies the ops in the order they took effect: each at its
	// last request, as the token passed (-sim.free: creates first, since a
	// create's generation exists before anything else of the round could
	// write to it, then the rest in turn).
	order := make([]int, 0, len(ops))
	if s.w.sched != nil {
		last := s.w.sched.lastGrants()
		for i := range ops {
			order = append(order, i)
		}
		slices.SortStableFunc(order, func(a, b int) int { return last[a] - last[b] })
	} else {
		for i, op := range ops {
			if op.kind == "create" {
				order = append(order, i)
			}
		}
		for i, op := range ops {
			if op.kind != "create" {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		if op := ops[i]; op.after != nil {
			if err := op.after(outs[i], s.contended(op)); err != nil {
				return err
			}
		}
	}
	if err := s.settle(); err != nil {
		return err
	}
	return s.check()
}

// scheduled records the round's replay line and, replaying, requires that
// it repeats the failed run's.
func (s *Sim) scheduled(parts ...string) error {
	l := scheduleLine(s.step, parts...)
	s.schedule = append(s.schedule, l)
	if i := len(s.schedule) - 1; i < len(s.expect) && s.expect[i] != l {
		return s.violatef("the replay left the failed run's schedule at step %d:\n  then: %s\n  now:  %s", s.step, trunc(s.expect[i], 600), trunc(l, 600))
	}
	return nil
}

// allow: the generator may produce kind (not listed in -sim.without).
func (s *Sim) allow(kind string) bool { return !s.without[kind] }

// contended: another op of the round shares one of op's keys.
func (s *Sim) contended(op *Op) bool {
	for _, k := range dedupe(op.keys) {
		if s.touched[k] > 1 {
			return true
		}
	}
	return false
}

// judge checks an answer against what the model allows.
func (s *Sim) judge(op *Op, o Outcome) error {
	if o.Err != nil && !op.tolerateErr {
		return s.violatef("%s: %v", op.desc, o.Err)
	}
	if o.Status >= 500 {
		return s.violatef("%s: answered %s (a 5xx is never the answer to a request)", op.desc, o)
	}
	if op.invalid && op.contingent && s.contended(op) {
		return nil // a hold of the same round may have been lifted first
	}
	if op.invalid && o.ok() {
		return s.violatef("%s: the model says this request is invalid (%s), but it was accepted: %s", op.desc, op.why, o)
	}
	if op.invalid && o.Err == nil && (o.Status < 400 || o.Status >= 500) {
		return s.violatef("%s: the model says this request is invalid (%s): want a 4xx, got %s", op.desc, op.why, o)
	}
	if op.kind != "" && !strings.HasPrefix(op.kind, "view-") && s.viewHeld(op) && (o.Status == 404 || o.Status == 409) {
		return nil // a table op at a view's identifier: refused as the name is taken or no table is there
	}
	if len(op.want) > 0 && !s.contended(op) && o.Err == nil && !slices.Contains(op.want, o.Status) {
		return s.violatef("%s: answered %s, the model allows %v (%s)", op.desc, o, op.want, op.why)
	}
	// A conflict says which (clients act on the type: a CommitFailed is
	// retried, a LegalHold is not).
	if t := errorType(o.Body); op.conflict != "" && o.Status == 409 && !s.contended(op) && t != "" && t != op.conflict {
		return s.violatef("%s: answered %s, a %s (%s)", op.desc, o, op.conflict, op.why)
	}
	return nil
}

// pipelineIdle: no purge job is running (the pipeline changes the store
// in the background while one is).
func (s *Sim) pipelineIdle() bool {
	a, err := s.w.activeJobs(s.ctx)
	return err == nil && len(a) == 0
}

func dedupe(keys []string) []string {
	out := slices.Clone(keys)
	slices.Sort(out)
	return slices.Compact(out)
}

func diffLines(a, b string) string {
	as, bs := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range as {
		if !slices.Contains(bs, l) {
			out = append(out, "  - "+trunc(l, 240))
		}
	}
	for _, l := range bs {
		if !slices.Contains(as, l) {
			out = append(out, "  + "+trunc(l, 240))
		}
	}
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("  (%d more)", len(out)-20))
	}
	return strings.Join(out, "\n")
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

var errStop = errors.New("stop")
