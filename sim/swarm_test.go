package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Rare sequences on purpose (docs/design/simulation.md, "Swarm and
// templates"). A swarm configuration per seed turns operation kinds off,
// biases the weights of the rest and narrows the pools of names and
// locations, so that a seed spends its steps on a few things and builds
// the sequences a uniform mix rarely does. Scenario templates place the
// dangerous combinations directly: a few scripted rounds, each built from
// the model when it runs and checked as any round is.

// swarm is one seed's configuration.
type swarm struct {
	desc  string
	off   map[string]bool
	scale map[string]int // weight multiplier, in quarters (4: as is)
	nss   []string
	names []string
	locs  []string
	// tmplEvery: a template starts about once in this many rounds.
	tmplEvery int
}

// core kinds are never off: without them little happens.
var core = []string{"create", "append", "soft-drop", "drop-purge", "undrop", "ns-create"}

// newSwarm draws seed's configuration; plain seeds (every fourth, and
// -sim.swarm=false) run every kind at its weight over every name.
func newSwarm(seed uint64, plain bool) swarm {
	sw := swarm{off: map[string]bool{}, scale: map[string]int{}, nss: namespaces, names: tableNames, locs: locNames, tmplEvery: 15}
	if plain || seed%4 == 1 {
		sw.desc = "plain (every kind, every name)"
		return sw
	}
	r := rand.New(rand.NewPCG(seed, 0x5a4a4d))
	var off, up []string
	for _, k := range opWeights {
		// Each kind's draw depends on the seed and the kind alone: a kind
		// added to opWeights leaves the others' configurations as they
		// were (they once all moved, and make sim's coverage with them).
		h := fnv.New64a()
		h.Write([]byte(k.kind))
		kr := rand.New(rand.NewPCG(seed, h.Sum64()))
		if !slices.Contains(core, k.kind) && kr.IntN(5) == 0 {
			sw.off[k.kind] = true
			off = append(off, k.kind)
			continue
		}
		sw.scale[k.kind] = []int{2, 4, 4, 8, 16}[kr.IntN(5)]
		if sw.scale[k.kind] > 4 {
			up = append(up, fmt.Sprintf("%s×%d", k.kind, sw.scale[k.kind]/4))
		}
	}
	if r.IntN(3) == 0 {
		sw.nss = namespaces[:1]
	}
	sw.names = tableNames[:1+r.IntN(len(tableNames))]
	if r.IntN(2) == 0 {
		// Locations that nest or share a start: x, x/y, x2 (and their
		// spellings), where ownership and purge scope go wrong.
		sw.locs = []string{"x", "x/y", "x2"}
	}
	sw.tmplEvery = []int{10, 15, 25}[r.IntN(3)]
	sw.desc = fmt.Sprintf("off %v; up %v; namespaces %v, names %v, locations %v; a template about every %d rounds", off, up, sw.nss, sw.names, sw.locs, sw.tmplEvery)
	return sw
}

func (s *Sim) pickNS() string   { return pick(s, s.sw.nss) }
func (s *Sim) pickName() string { return pick(s, s.sw.names) }
func (s *Sim) pickLoc() string  { return pick(s, s.sw.locs) }

// weight of an operation kind under the seed's swarm (0: off).
func (s *Sim) weight(kind string, w int) int {
	if s.without[kind] || s.sw.off[kind] {
		return 0
	}
	if q, ok := s.sw.scale[kind]; ok {
		return max(w*q/4, 1)
	}
	return w
}

// tourOp: an op of a kind this seed has not yet seen accepted (fewest
// tries first; nil once every kind has been). A rare kind that is mostly refused (a
// purge-now of a held table, a legal hold set by someone who may not)
// is otherwise left unreached whenever the generator's draws shift, and
// make sim's coverage gate with it. The seed's own history alone decides,
// so replay stays exact.
func (s *Sim) tourOp(actor int) *Op {
	var kinds []string
	weights := map[string]int{}
	for _, k := range opWeights {
		if w := s.weight(k.kind, k.w); w > 0 && !refusalOnly[k.kind] && s.accepted[k.kind] == 0 {
			kinds = append(kinds, k.kind)
			weights[k.kind] = w
		}
	}
	// The fewest tries first, then the lightest: the random picks reach
	// the heavy kinds anyway.
	slices.SortStableFunc(kinds, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.tried[a], s.tried[b]), cmp.Compare(weights[a], weights[b]))
	})
	// Touring, a duration and a lifecycle body are drawn well-formed (a
	// malformed one is refused whatever else holds).
	s.touring = true
	defer func() { s.touring = false }()
	for _, k := range kinds[:min(len(kinds), 5)] {
		s.tried[k]++
		if op := s.makeOp(k, actor); op != nil {
			op.kind, op.actor = k, actor
			s.logf("   (tour: %s, not yet accepted in this seed)", k)
			return op
		}
	}
	return nil
}

// --- templates ---

// plan is one scripted round: a barrier, or ops run at once.
type plan struct {
	b   *barrier
	ops []*Op
	// preempt > 0: the first op runs first and is preempted at the
	// round's preempt-th AWS call (a race placed in one window).
	preempt int
	// preemptOn: the first op runs first and is preempted before its
	// first AWS call of this name (a window named by the call closing it).
	preemptOn string
}

// step builds a scripted round from the model when it runs (nil: skip).
type step func() *plan

// template is a scenario the generator places on purpose.
type template struct {
	name string
	// build makes the scenario's rounds; done says, after its last
	// round, whether it reached what it is there for (coverage).
	build func(s *Sim, t *tmplRun) []step
}

// tmplRun is one running instance of a template.
type tmplRun struct {
	name string
	n    int // the instance's number (unique names, locations)
	// gens the template made, by its own names.
	gens map[string]*Gen
	// reached: the dangerous step happened (e.g. the purge was accepted).
	reached bool
	sess    *session
	snaps   []int64
	view    *View
	copy    *View // a view registered from a copy of view's metadata
}

var templates = []template{
	{"nested-sibling-purge", tmplNestedSibling},
	{"refs-retention-expiry", tmplRefs},
	{"purge-during-redrive", tmplRedrive},
	{"legal-hold-transaction", tmplHoldTx},
	{"stale-session", tmplStaleSession},
	{"unregister-reregister", tmplUnregister},
	{"same-round-races", tmplRaces},
	{"big-purge", tmplBigPurge},
	{"crash-mid-purge", tmplCrashMidPurge},
	{"views-stale-records", tmplViewsStale},
	{"one-privilege-short", tmplPrivilegeShort},
	{"copy-on-write-rewrites", tmplCopyOnWrite},
}

// laterTemplates take a seed's third turn and every second one after it
// (the first two keep the turn's coverage: the turn eleven long left a
// template unreached in make sim's 6 x 150 steps); make sim's coverage
// gate does not count them.
var laterTemplates = []template{
	{"revalidate-after-change", tmplRevalidate},
	{"sweep-beside-commits", tmplSweepBeside},
}

const holdTmpl = "legal-hold-transaction"

// firstTemplates run first in every seed, in this order (then the turn):
// each places sequences that several bugs need, and a template in eleven
// came once in three seeds, often late. The views' template places the
// rarest kinds (a view's undrop, replace and rename, a snapshot update, a
// verify, three listings, a restart), which make sim's coverage gate needs
// in every run.
var firstTemplates = []string{holdTmpl, "refs-retention-expiry", heldTmpl, "views-stale-records"} // heldTmpl: storage_checks_test.go

// maybeTemplate starts a template now and then (none while one runs).
func (s *Sim) maybeTemplate() {
	if len(s.script) > 0 || s.without["templates"] {
		return
	}
	// The first templates follow one another, and the turn's first two
	// after them (a few random rounds between them left the turn's
	// templates little room in make sim's 150 steps: some never ran).
	if first := s.m.tmplRuns < len(firstTemplates)+2 && s.m.tmplRuns > 0; !first && s.rng.IntN(max(s.sw.tmplEvery, 1)) != 0 {
		return
	}
	// In turn, from a place the seed picks (two apart from one seed to
	// the next among the templates that do not run first: a seed runs two
	// or more, so consecutive seeds reach all of them; three apart left a
	// third of nine templates unreached, 3 dividing 9), whatever the seed.
	// firstTemplates come first in every seed (and not again): a legal
	// hold goes wrong in many small ways, each reached only by its own
	// sequence; expiry and retention meet refs only in theirs, and a
	// legal hold only in the held template; and one template in eleven
	// came once in three seeds.
	turn := slices.DeleteFunc(slices.Clone(templates), func(t template) bool { return slices.Contains(firstTemplates, t.name) })
	for range templates {
		var t template
		if s.m.tmplRuns < len(firstTemplates) && !s.without[firstTemplates[s.m.tmplRuns]] {
			t = templates[slices.IndexFunc(templates, func(t template) bool { return t.name == firstTemplates[s.m.tmplRuns] })]
		} else if k := s.m.nextTmpl; k >= 2 && k%2 == 0 {
			// A seed's third turn and every second one after it: a later
			// template (the first two keep the turn's coverage).
			t = laterTemplates[(k/2-1)%len(laterTemplates)]
			s.m.nextTmpl++
		} else {
			t = turn[(int(s.seed)*2+s.m.nextTmpl)%len(turn)]
			s.m.nextTmpl++
		}
		if s.without[t.name] {
			continue
		}
		s.m.tmplRuns++
		run := &tmplRun{name: t.name, n: s.m.tmplRuns, gens: map[string]*Gen{}}
		steps := t.build(s, run)
		if s.chance(0.5) {
			// Tidy up after itself now and then (the tables it made would
			// otherwise crowd every later round's observation).
			steps = append(steps, func() *plan {
				var o []*Op
				for _, k := range slices.Sorted(maps.Keys(run.gens)) {
					if g := run.live(k); g != nil && !g.legalHold && len(o) < 3 {
						o = append(o, s.dropOp(g.ns, g.name, g, admin, true))
					}
				}
				return ops(o...)
			})
		}
		s.logf("== template %s #%d (%d rounds)", t.name, run.n, len(steps))
		for i, st := range steps {
			last := i == len(steps)-1
			s.script = append(s.script, func() *plan {
				p := st()
				if last {
					s.templateDone = run
				}
				return p
			})
		}
		return
	}
}

// tmplName is a template instance's own table name (outside the pools).
func (t *tmplRun) tbl(i int) string { return fmt.Sprintf("s%d%c", t.n, 'a'+i) }

// nsFor: a namespace that exists (created by the template's first round
// otherwise).
func (s *Sim) ensureNS() (string, *Op) {
	for _, ns := range s.sw.nss {
		if _, ok := s.m.namespaces[ns]; ok {
			return ns, nil
		}
	}
	return s.sw.nss[0], s.opNSCreateAt(s.sw.nss[0])
}

func ops(o ...*Op) *plan {
	var out []*Op
	for _, op := range o {
		if op != nil {
			out = append(out, op)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &plan{ops: out}
}

// createAt is a create of ns.name at loc ("" default) by admin.
func (s *Sim) createAt(t *tmplRun, key, ns, name, loc string) *Op {
	return s.createAtWith(t, key, ns, name, loc, map[string]string{"format-version": "2", "write.delete.mode": "merge-on-read"})
}

// createAtWith: createAt with the table's properties.
func (s *Sim) createAtWith(t *tmplRun, key, ns, name, loc string, props map[string]string) *Op {
	op := s.createOp(ns, name, admin, loc, props)
	after := op.after
	op.after = func(o Outcome, c bool) error {
		if err := after(o, c); err != nil {
			return err
		}
		if o.Status == 200 {
			t.gens[key] = s.m.liveAt(ns, name)
		}
		return nil
	}
	return op
}

// liveGen is the template's generation by its key, while live.
func (t *tmplRun) live(key string) *Gen {
	if g := t.gens[key]; g != nil && g.state == live {
		return g
	}
	return nil
}

// tmplNestedSibling: explicit locations that nest (L/x/ holds L/x/y) or
// share a start (L/x and L/x2), then a purge of one: the other's files
// stay, the nested create is refused whichever way it is spelt.
func tmplNestedSibling(s *Sim, t *tmplRun) []step {
	base := fmt.Sprintf("%s/L/n%d", warehouse, t.n)
	var ns string
	outer := s.spell(base + "/x")
	// The raw text with its trailing slash: the seed's first run always
	// (a claim keyed on the raw text owns "x/" and "x/y" both), then half
	// the time.
	s.m.nestedRuns++
	if s.m.nestedRuns == 1 || s.chance(0.5) {
		outer = base + "/x/"
	}
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), outer))
		},
		func() *plan { return ops(s.createAt(t, "b", ns, t.tbl(1), s.spell(base+"/x2"))) },
		func() *plan {
			// Inside the first: refused (409), however spelt.
			return ops(s.createAt(t, "c", ns, t.tbl(2), s.spell(base+"/x/y")), s.createAt(t, "d", ns, t.tbl(3), "s3a://"+bucket+"/"+catalogName+"/L/n"+fmt.Sprint(t.n)+"/x/"))
		},
		func() *plan {
			var o []*Op
			for _, k := range []string{"a", "b"} {
				if g := t.live(k); g != nil {
					o = append(o, s.opAppendTo(g, admin))
				}
			}
			return ops(o...)
		},
		func() *plan {
			g := t.live("a")
			if g == nil {
				return nil
			}
			t.reached = true
			if s.chance(0.5) {
				return ops(s.dropOp(g.ns, g.name, g, admin, true))
			}
			return ops(s.dropOp(g.ns, g.name, g, admin, false))
		},
		func() *plan {
			// A soft-dropped first table purged now; the sibling written.
			var o []*Op
			if g := t.gens["a"]; g != nil && g.state == soft {
				o = append(o, s.purgeNowOf(g))
			}
			if g := t.live("b"); g != nil {
				o = append(o, s.opAppendTo(g, admin))
			}
			return ops(o...)
		},
		func() *plan {
			// The freed prefix taken again, nested this time.
			return ops(s.createAt(t, "e", ns, t.tbl(4), s.spell(base+"/x/y")))
		},
	}
}

// tmplRefs: tags and branches with retention, expiry and a clock jump.
// Three appends on old days; a tag on the first snapshot, a branch on the
// second, a tag that expires (max-ref-age an hour); a retention policy of
// 18 days; the clock jumps 8 days; the sweep drops the old days on main and
// expires what no ref keeps. The tag and the branch keep their snapshots
// and rows (checked at rest on every ref).
//
// The rows' days are fixed: after the clock's 8 days the cutoff is the day
// of rows 10 days old when written. The first and third appends have a row
// before the cutoff (11 or more days old: dropped), one on the cutoff's
// day (kept: a cutoff rounded up drops it) and one after it, so the drop
// rewrites their manifests, and the third snapshot (its tag expired, no
// longer main's head) expires with a manifest whose kept files only
// main's rewritten manifest names. The second append is one dropped day:
// its manifest's bounds are that day (a drop that skips a manifest whose
// upper bound is the value keeps it).
func tmplRefs(s *Sim, t *tmplRun) []step {
	var ns string
	appendOld := func(ages ...int) step {
		return func() *plan {
			g := t.live("a")
			if g == nil {
				return nil
			}
			rows := map[int64]string{}
			for _, a := range ages {
				s.m.nextRow++
				rows[s.m.nextRow] = s.w.clock.Now().AddDate(0, 0, -a).Format("2006-01-02")
			}
			op := s.appendRowsOp(g.ns, g.name, g, admin, rows)
			after := op.after
			op.after = func(o Outcome, c bool) error {
				if err := after(o, c); err != nil {
					return err
				}
				if o.Status == 200 && g.h != nil {
					t.snaps = append(t.snaps, g.h.refs["main"].snapshot)
				}
				return nil
			}
			return ops(op)
		}
	}
	ref := func(name, kind string, i int, maxAge int64) step {
		return func() *plan {
			g := t.live("a")
			if g == nil || len(t.snaps) <= i {
				return nil
			}
			return ops(s.setRefOp(g, name, kind, t.snaps[i], maxAge))
		}
	}
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""))
		},
		// Even seeds: main keeps its 2 or 3 newest snapshots whatever
		// their age (history.expire.min-snapshots-to-keep): the sweep's
		// expiry must leave them (odd seeds keep Iceberg's default, 1).
		func() *plan {
			g := t.live("a")
			if g == nil || s.seed%2 == 1 {
				return nil
			}
			return ops(s.minKeepOf(g, 2+s.rng.IntN(2)))
		},
		appendOld(20, 10, 3), appendOld(12),
		// Seeds 1, 2 and 3 (mod 4): main's own retention (its max
		// snapshot age; its min-snapshots-to-keep, with an hour's age or
		// alone), which the sweep's partition drop must carry over and its
		// expiry honour.
		func() *plan {
			g := t.live("a")
			if g == nil || s.seed%4 == 0 {
				return nil
			}
			return ops(s.mainRetentionOf(g, int(s.seed%4)))
		},
		appendOld(11, 10, 5),
		ref("t1", "tag", 0, 0), ref("b1", "branch", 1, 0), ref("tmp", "tag", 2, int64(time.Hour/time.Millisecond)),
		// A client loading it as engines do (snapshots=refs) gets every
		// ref's snapshot, tags' too.
		func() *plan {
			if g := t.live("a"); g != nil {
				return ops(s.readETagOf(g))
			}
			return nil
		},
		func() *plan {
			g := t.live("a")
			if g == nil {
				return nil
			}
			// 18 days: after the clock's 8 the appends' rows (0 to 20 days
			// old when written) fall either side of the cutoff, so the sweep
			// rewrites manifests whose kept files the expired snapshot's
			// manifests still name, and rows sit on the cutoff day.
			return ops(s.retentionOp(g, "P18D"))
		},
		func() *plan { return &plan{b: s.makeBarrier("clock-8d")} },
		func() *plan {
			t.reached = t.live("a") != nil && len(t.snaps) == 3
			return &plan{b: s.makeBarrier("retention-sweep")}
		},
		// Its files are eight days old now: one overwritten and repaired,
		// and a storage sweep at once keeps the versions that left.
		func() *plan {
			if g := t.live("a"); g != nil && !g.legalHold && !g.holdUnsure {
				return &plan{b: s.overwriteRepairOf(g, 0)}
			}
			return nil
		},
		func() *plan { return &plan{b: s.makeBarrier("quiesce")} },
	}
}

// tmplRedrive: a purge whose batches dead-letter under a delete outage,
// then another purge accepted while the redrive of the dead batches runs
// (one settle runs both).
func tmplRedrive(s *Sim, t *tmplRun) []step {
	base := fmt.Sprintf("%s/L/r%d", warehouse, t.n)
	var ns string
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), base+"/x"), s.createAt(t, "b", ns, t.tbl(1), base+"/x2"))
		},
		func() *plan {
			var o []*Op
			for _, k := range []string{"a", "b"} {
				if g := t.live(k); g != nil {
					o = append(o, s.opAppendTo(g, admin))
				}
			}
			return ops(o...)
		},
		func() *plan {
			// Past 1,000 keys: the dead batch, redriven, takes more than
			// one step to finish.
			if g := t.live("a"); g != nil {
				return ops(s.bulkOf(g, true, 1010))
			}
			return nil
		},
		func() *plan { return &plan{b: s.deleteOutage(40)} },
		func() *plan {
			if g := t.live("a"); g != nil {
				return ops(s.dropOp(g.ns, g.name, g, admin, true))
			}
			return nil
		},
		func() *plan {
			g := t.live("b")
			return &plan{b: &barrier{kind: "redrive", desc: "heal and redrive the dead batches, and drop the sibling with purge while they run", run: func() error {
				var err error
				if s.pre, err = s.bucketNow(); err != nil {
					return err
				}
				s.heal()
				if g == nil {
					return nil
				}
				t.reached = true
				return s.runNow(s.dropOp(g.ns, g.name, g, admin, true))
			}}}
		},
	}
}

// tmplHoldTx: a legal hold set and lifted through multi-table transactions,
// by a principal without TABLE_LEGAL_HOLD (refused, nothing changes) and
// one with it; a drop with purge between is refused.
func tmplHoldTx(s *Sim, t *tmplRun) []step {
	var ns string
	// tx: p sets (or lifts) a's legal hold in a two-table transaction, in
	// its first change or after a change of b (a check of the first
	// change only lets the second through).
	tx := func(p string, on, first bool) step {
		return func() *plan {
			a, b := t.live("a"), t.live("b")
			if a == nil || b == nil {
				return nil
			}
			chs := []txChange{
				{ns: a.ns, name: a.name, g: a, set: map[string]string{"icehold.legal-hold": fmt.Sprint(on)}},
				{ns: b.ns, name: b.name, g: b, set: map[string]string{"sim.note": fmt.Sprint(t.n)}},
			}
			if !first {
				chs[0], chs[1] = chs[1], chs[0]
			}
			return ops(s.txOp(p, chs))
		}
	}
	dropA := func(purge bool) step {
		return func() *plan {
			if g := t.live("a"); g != nil {
				t.reached = t.reached || g.legalHold
				return ops(s.dropOp(g.ns, g.name, g, admin, purge))
			}
			return nil
		}
	}
	var sg *Gen
	// record: p sets (or lifts) the legal hold of a's soft-deleted record.
	record := func(p string, on bool) step {
		return func() *plan {
			if sg == nil || sg.state != soft {
				return nil
			}
			return ops(s.legalHoldRecordOf(sg, sg.uuid, p, on))
		}
	}
	// b moved to a location spelt with its trailing slash (a create trims
	// it; a commit's set-location keeps the metadata's text), then a
	// create inside it refused (a claim keyed on the raw text "x/" would
	// not cover "x/y"): early in every seed.
	base := fmt.Sprintf("%s/L/h%d", warehouse, t.n)
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""), s.createAt(t, "b", ns, t.tbl(1), ""))
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				return ops(s.opAppendTo(g, admin))
			}
			return nil
		},
		// Alone (ops of one namespace in a round may land in any order).
		func() *plan {
			if g := t.live("b"); g != nil {
				return ops(s.setLocationOf(g, base+"/x/", true, false))
			}
			return nil
		},
		func() *plan { return ops(s.createAt(t, "c", ns, t.tbl(2), base+"/x/y")) },
		tx(writer, true, true), tx(writer, true, false), tx(holder, true, s.chance(0.5)),
		// The writer names the hold already on, in the second change: the
		// route refuses it (the catalog's own check sees no change).
		tx(writer, true, false),
		// The writer registers its first metadata (from before the hold)
		// over it with overwrite: that lifts the hold, a 403.
		func() *plan {
			a := t.live("a")
			if a == nil || !a.legalHold || len(a.metas) == 0 || !s.intact(a.metas[0]) {
				return nil
			}
			return ops(s.registerOverwriteOf(a, a, a.metas[0], writer))
		},
		dropA(true),
		tx(writer, false, false), tx(holder, false, s.chance(0.5)),
		// A table's own hold period beside its namespace's: the table's
		// comes first (the soft-deleted record's purge-at says which).
		func() *plan {
			g := t.live("a")
			if g == nil {
				return nil
			}
			return ops(s.holdPropOf(g.ns, g.name, g, "2d", true), s.nsHoldOf(g.ns, "P30D", true))
		},
		// The record's hold: soft-dropped, held on its record (the writer
		// refused), undropped: still held, so a drop with purge is refused.
		func() *plan {
			sg = t.live("a")
			return dropA(false)()
		},
		// The ownership backfill with a soft-deleted table to claim again
		// (it skips a state that holds views or unregistered tables).
		func() *plan {
			if sg == nil || sg.state != soft || s.without["backfill"] {
				return nil
			}
			return &plan{b: s.makeBarrier("backfill")}
		},
		// A purge now that read the record unheld, held before its write:
		// refused.
		func() *plan {
			if sg == nil || sg.state != soft || sg.legalHold {
				return nil
			}
			return &plan{b: s.purgeNowHeldMeanwhile(sg)}
		},
		record(writer, true), record(holder, true),
		func() *plan {
			if sg == nil || sg.state != soft {
				return nil
			}
			return ops(s.undropOf(sg))
		},
		dropA(true),
		tx(holder, false, true),
		dropA(true),
	}
}

// tmplStaleSession: an engine keeps its vended session past the table's
// soft drop and its legal hold, writes and tries to escape with it, and
// past its expiry (a clock jump) is refused everything.
func tmplStaleSession(s *Sim, t *tmplRun) []step {
	var ns string
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""))
		},
		func() *plan {
			g := t.live("a")
			if g == nil {
				return nil
			}
			op := s.engineLoadOf(g.ns, g.name, g, admin)
			after := op.after
			op.after = func(o Outcome, c bool) error {
				if err := after(o, c); err != nil {
					return err
				}
				if o.Status == 200 && len(s.sessions) > 0 && s.sessions[len(s.sessions)-1].g == g {
					t.sess = s.sessions[len(s.sessions)-1]
				}
				return nil
			}
			return ops(op, s.opAppendTo(g, admin))
		},
		func() *plan {
			if t.sess == nil {
				return nil
			}
			return ops(s.engineUploadWith(t.sess))
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				return ops(s.dropOp(g.ns, g.name, g, admin, false))
			}
			return nil
		},
		func() *plan {
			if t.sess == nil {
				return nil
			}
			t.reached = t.sess.g.state != live
			// The sibling prefix every time (a policy resource without its
			// "/" lets it through), another escape at random.
			return ops(s.engineWriteWith(t.sess), s.engineEscapeWith(t.sess, 0), s.engineEscapeWith(t.sess, -1))
		},
		func() *plan { return &plan{b: s.makeBarrier("clock-2h")} },
		func() *plan {
			if t.sess == nil {
				return nil
			}
			return ops(s.engineWriteWith(t.sess))
		},
		func() *plan {
			if g := t.gens["a"]; g != nil && g.state == soft {
				return ops(s.undropOf(g))
			}
			return nil
		},
	}
}

// tmplUnregister: a table unregistered keeps its files and its location
// (a create there is refused); a register of its metadata takes them back.
func tmplUnregister(s *Sim, t *tmplRun) []step {
	var ns string
	var loc string
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""))
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				return ops(s.opAppendTo(g, admin))
			}
			return nil
		},
		func() *plan {
			g := t.live("a")
			if g == nil {
				return nil
			}
			loc = g.location
			return ops(s.unregisterOf(g, admin))
		},
		func() *plan {
			if loc == "" {
				return nil
			}
			t.reached = t.gens["a"] != nil && t.gens["a"].state == unregistered
			return ops(s.createAt(t, "b", ns, t.tbl(1), s.spell(loc)), s.createAt(t, "c", ns, t.tbl(2), s.spell(loc+"/sub")))
		},
		func() *plan {
			g := t.gens["a"]
			if g == nil || g.state != unregistered {
				return nil
			}
			return ops(s.registerOf(ns, t.tbl(3), g, g.meta))
		},
	}
}

// tmplRaces: two creates at nested explicit locations in one round; a
// partition drop and an append on one table in one round (requests
// interleave at the server's AWS calls: sched_test.go), each placed in
// several windows of the first request; one name dropped and undropped in
// one round; a drop without purge and a register of the table's older
// metadata in one round; a namespace created and dropped in one round (the
// model's own hard cases).
func tmplRaces(s *Sim, t *tmplRun) []step {
	var ns string
	steps := []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""))
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				return ops(s.opAppendTo(g, admin))
			}
			return nil
		},
	}
	// Two creates at nested explicit locations: at most one may own
	// (checkOwnersApart), whichever checks and claims first. The outer
	// first, then the inner, preempted at each of its first AWS calls (a
	// check, then a claim: the window between them is a few calls wide).
	for i, at := range raceWindows {
		steps = append(steps, func() *plan {
			base := fmt.Sprintf("%s/L/r%d-%d", warehouse, t.n, i)
			x := s.createAt(t, fmt.Sprintf("x%d", i), ns, t.tbl(10+2*i), s.spell(base+"/x"))
			y := s.createAt(t, fmt.Sprintf("y%d", i), ns, t.tbl(11+2*i), s.spell(base+"/x/y"))
			if i%2 == 1 {
				x, y = y, x
			}
			return preempted(at, x, y)
		})
	}
	// A partition drop racing an append, the drop preempted in each window
	// from reading the table to committing: the append's rows fall on days
	// the drop leaves, so they stay whichever commits first (the model
	// expects them back, not maybe: a drop committed on the head it read
	// before the append loses them).
	for _, at := range raceWindows {
		steps = append(steps, func() *plan {
			g := t.live("a")
			if g == nil || len(g.rows) == 0 {
				return nil
			}
			d := pick(s, daysOf(g))
			rows := map[int64]string{}
			for range 3 {
				day := s.day()
				for day == d {
					day = s.day()
				}
				s.m.nextRow++
				rows[s.m.nextRow] = day
			}
			ap := s.appendRowsOp(g.ns, g.name, g, admin, rows)
			after := ap.after
			ap.after = func(o Outcome, _ bool) error { return after(o, false) }
			drop := s.partitionDropOf(g.ns, g.name, g, []string{d})
			for i := 0; i < 5 && (drop.invalid || !slices.Contains(drop.want, 200)); i++ {
				drop = s.partitionDropOf(g.ns, g.name, g, []string{d}) // a well-formed body, a privileged caller
			}
			return preempted(at, drop, ap)
		})
	}
	return append(steps,
		func() *plan {
			g := t.live("a")
			if g == nil {
				return nil
			}
			return ops(s.dropOp(g.ns, g.name, g, admin, false), s.undropOf(g))
		},
		func() *plan {
			g := t.gens["a"]
			if g == nil {
				return nil
			}
			if g.state == soft {
				// An undrop and a drop of the name in one round: a race of
				// the same kind (the round before left it soft).
				t.reached = true
				return ops(s.undropOf(g), s.dropOp(g.ns, g.name, nil, admin, false))
			}
			if g.state == live {
				t.reached = true
				return ops(s.dropOp(g.ns, g.name, g, admin, false), s.registerOf(g.ns, g.name, g, g.metas[0]))
			}
			return nil
		},
		func() *plan {
			other := "b"
			if ns == "b" {
				other = "a"
			}
			return ops(s.opNSCreateAt(other), s.opNSDropAt(other))
		},
	)
}

// raceWindows: the AWS calls of a race's first request at which it is
// preempted, one round each (its reads come first, its write last).
var raceWindows = []int{2, 3, 4}

// preempted: a and b in one round, a first and preempted at its at-th
// AWS call (both present; else an ordinary round of what there is).
func preempted(at int, a, b *Op) *plan {
	p := ops(a, b)
	if p != nil && len(p.ops) == 2 {
		p.preempt = at
	}
	return p
}

// preemptedOn: a and b in one round, a first and preempted before its
// first AWS call named op (both present; else an ordinary round).
func preemptedOn(op string, a, b *Op) *plan {
	p := ops(a, b)
	if p != nil && len(p.ops) == 2 {
		p.preemptOn = op
	}
	return p
}

// tmplBigPurge: a table past a listing page (committed files and strays)
// purged: every page of its final listing.
func tmplBigPurge(s *Sim, t *tmplRun) []step {
	var ns string
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""))
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				return ops(s.bulkOf(g, true, 1010))
			}
			return nil
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				n := 1010
				if s.chance(0.3) {
					n = 10050
				}
				return ops(s.bulkOf(g, false, n))
			}
			return nil
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				t.reached = true
				return ops(s.dropOp(g.ns, g.name, g, admin, true))
			}
			return nil
		},
	}
}

// tmplCrashMidPurge: the process is killed while a purge's step is at a
// chosen point (a workflow step, a delete batch, the final listing), and
// restarts from its state folder; the purge ends as if nothing happened.
// Two tables, two points an instance, taken in turn (seed and instance
// say where): every point is reached within make sim's budget, not by
// luck of a draw.
func tmplCrashMidPurge(s *Sim, t *tmplRun) []step {
	var ns string
	points := []string{"plan.start", "plan.batches-written", "delete.start", "delete.before-checkpoint", "finalize.start",
		"finalize.sweep-counted", "finalize.sweep-deleted", "finalize.before-checkpoint", "finalize.metadata-deleted"}
	i := int(s.seed%uint64(len(points))) + 2*t.n
	at := map[string]string{"a": points[i%len(points)], "b": points[(i+1)%len(points)]}
	crash := func(name string) []step {
		return []step{
			func() *plan {
				if g := t.live(name); g != nil {
					s.holdAt = at[name] // the settle of this round stops there and the process dies
					return ops(s.dropOp(g.ns, g.name, g, admin, true))
				}
				return nil
			},
			func() *plan {
				if name == "a" {
					t.reached = s.crashedAt == at[name]
				}
				s.crashedAt = ""
				return &plan{b: s.makeBarrier("quiesce")}
			},
		}
	}
	return append([]step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""), s.createAt(t, "b", ns, t.tbl(1), ""))
		},
		func() *plan {
			var o []*Op
			for _, name := range []string{"a", "b"} {
				if g := t.live(name); g != nil {
					o = append(o, s.opAppendTo(g, admin), s.bulkOf(g, false, 1010))
				}
			}
			return ops(o...)
		},
	}, append(crash("a"), crash("b")...)...)
}

var _ = strings.Cut

var jsonUnmarshal = json.Unmarshal

// --- ops the templates build with fixed parameters ---

// purgeNowOf purges soft-deleted g now (its uuid named).
func (s *Sim) purgeNowOf(g *Gen) *Op { return s.purgeNowBy(g, admin) }

// purgeNowBy: p purges soft-deleted g now (TABLE_DROP_WITH_PURGE).
func (s *Sim) purgeNowBy(g *Gen, p string) *Op {
	ns, name := g.ns, g.name
	// Counted as the purge-now kind (coverage): templates and corners
	// place the accepted case the random picks seldom reach.
	op := &Op{kind: "purge-now", desc: fmt.Sprintf("%s purges now %s", p, g), keys: append(tableKeys(ns, name), "uuid:"+g.uuid), want: []int{202}}
	if g.legalHold {
		op.invalid, op.contingent, op.want, op.why, op.conflict = true, true, []int{409}, "the soft-deleted table is under legal hold", "LegalHoldException"
	}
	s.privileged(op, p, "TABLE_DROP_WITH_PURGE")
	body := fmt.Sprintf(`{"table-uuid": %q}`, g.uuid)
	op.run = func() Outcome { return s.w.call(s.ctx, p, "POST", lifecyclePath(ns, name)+"/purge-now", body) }
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 202 {
			return nil
		}
		var j jobView
		if err := jsonUnmarshal(o.Body, &j); err != nil {
			return s.violatef("purge-now answer: %v", err)
		}
		return s.purgeAccepted(j.ID, ns, name, contended)
	}
	return op
}

// undropOf undrops g by its uuid (or whatever the name holds, once it is
// live again: the round decides).
func (s *Sim) undropOf(g *Gen) *Op {
	ns, name := g.ns, g.name
	op := &Op{desc: fmt.Sprintf("admin undrops %s", g), keys: append(tableKeys(ns, name), "uuid:"+g.uuid), want: []int{200, 404, 409}}
	body := fmt.Sprintf(`{"table-uuid": %q}`, g.uuid)
	op.run = func() Outcome { return s.w.call(s.ctx, admin, "POST", lifecyclePath(ns, name)+"/undrop", body) }
	op.after = s.opUndropAfter(ns, name)
	return op
}

// setRefOp points ref name (a tag or a branch) of g at snap; maxAge > 0
// sets its max-ref-age-ms.
func (s *Sim) setRefOp(g *Gen, name, kind string, snap int64, maxAge int64) *Op {
	update := map[string]any{"action": "set-snapshot-ref", "ref-name": name, "type": kind, "snapshot-id": snap}
	if maxAge > 0 {
		update["max-ref-age-ms"] = maxAge
	}
	ns, tn := g.ns, g.name
	op := &Op{desc: fmt.Sprintf("admin sets %s %q of %s at snapshot %d (max-ref-age-ms %d)", kind, name, g, snap, maxAge),
		keys: append(tableKeys(ns, tn), "uuid:"+g.uuid, "refs:"+g.uuid), want: []int{200}}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", tablePath(ns, tn), map[string]any{"requirements": []any{}, "updates": []any{update}})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		return s.propsCommittedRefs(o, ns, tn, true, func(*Gen) {})
	}
	return op
}

// retentionOp sets g's retention policy (field d, keep).
func (s *Sim) retentionOp(g *Gen, keep string) *Op { return s.retentionOpBy(g, keep, admin) }

// retentionOpBy: p sets g's retention policy (PARTITION_DROP).
func (s *Sim) retentionOpBy(g *Gen, keep, p string) *Op {
	ns, name := g.ns, g.name
	op := &Op{desc: fmt.Sprintf("%s sets the retention policy of %s: keep %s", p, g, keep), keys: append(tableKeys(ns, name), "policy:"+ns+"."+name), want: []int{200}}
	s.privileged(op, p, "PARTITION_DROP")
	op.run = func() Outcome {
		return s.w.call(s.ctx, p, "PUT", lifecyclePath(ns, name)+"/partition-retention", map[string]any{"field": "d", "keep": keep})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status == 200 {
			if g := s.m.liveAt(ns, name); g != nil {
				s.m.policies[ns+"."+name] = policy{uuid: g.uuid, keep: keep}
			}
		}
		return nil
	}
	return op
}

// deleteOutage: the next n DeleteObjects calls fail (dead letters after a
// few), healed by a later round.
func (s *Sim) deleteOutage(n int32) *barrier {
	return &barrier{kind: "fault", desc: fmt.Sprintf("fault: the next %d DeleteObjects answer 500 InternalError", n), run: func() error {
		s.setDeleteFault(n, 500, "InternalError")
		s.healIn = 0 // the template heals it
		return nil
	}}
}

// tmplViewsStale: a view's whole lifecycle (created, registered from a copy
// of its metadata, dropped, purged now) beside a soft-deleted table whose
// record is read stale: the hold-expiry sweep, past the table's purge-at,
// and a legal hold change each pause after reading the record while the
// table is undropped, written and dropped again (a newer generation the
// stale read must not end or change).
func tmplViewsStale(s *Sim, t *tmplRun) []step {
	var ns string
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""), s.viewCreateAt(ns, t.tbl(1)))
		},
		func() *plan {
			var o []*Op
			if g := t.live("a"); g != nil {
				o = append(o, s.opAppendTo(g, admin))
			}
			if t.view = s.m.viewAt(ns, t.tbl(1)); t.view != nil {
				o = append(o, s.viewRegisterCopy(ns, t.tbl(2), t.view))
			}
			return ops(o...)
		},
		// A snapshot update and a verify of the table (rare kinds too).
		func() *plan {
			g := t.live("a")
			if g == nil {
				return nil
			}
			o := []*Op{kinded(s.snapshotsOf(g), "snapshots")}
			if v := s.opRead("read-verify"); v != nil {
				v.kind = "read-verify"
				o = append(o, v)
			}
			return ops(o...)
		},
		func() *plan {
			var o []*Op
			if g := t.live("a"); g != nil {
				o = append(o, s.dropOp(g.ns, g.name, g, admin, false))
			}
			if t.view != nil && t.view.state == live {
				o = append(o, s.viewDropOf(t.view))
			}
			if t.copy = s.m.viewAt(ns, t.tbl(2)); t.copy != nil {
				o = append(o, s.viewDropOf(t.copy))
			}
			return ops(o...)
		},
		func() *plan {
			var o []*Op
			if t.view != nil && t.view.state == soft {
				o = append(o, s.viewPurgeNowOf(t.view))
			}
			if t.copy != nil && t.copy.state == soft {
				o = append(o, s.viewUndropOf(t.copy))
			}
			return ops(o...)
		},
		// The undropped copy's properties replaced, and the listings of
		// soft-deleted and unregistered tables and of the purge jobs read
		// (each counted as the
		// kind it is: rare at their weights, and a kind never reached
		// fails make sim's coverage).
		func() *plan {
			var o []*Op
			if t.copy != nil && t.copy.state == live {
				o = append(o, s.viewReplaceOf(t.copy, admin))
			}
			for _, k := range []string{"read-soft-deleted", "read-unregistered", "read-purge-jobs"} {
				if op := s.opRead(k); op != nil {
					op.kind = k
					o = append(o, op)
				}
			}
			return ops(o...)
		},
		func() *plan {
			// The copy renamed to a name nobody holds (alone: one
			// namespace), counted as the kind it is.
			if t.copy == nil || t.copy.state != live {
				return nil
			}
			op := s.viewRenameOf(t.copy, t.copy.ns, t.tbl(3))
			op.kind = "view-rename"
			return ops(op)
		},
		func() *plan {
			if g := t.gens["a"]; g != nil && g.state == soft && !g.legalHold {
				if b := s.clockPast(g.purgeAt); b != nil {
					return &plan{b: b}
				}
			}
			return nil
		},
		func() *plan {
			g := t.gens["a"]
			if g == nil || g.state != soft || g.legalHold || !g.purgeAt.Before(s.w.clock.Now()) || s.m.holdFor(g) <= 0 {
				return nil
			}
			b := s.staleSweepOf(g, s.w.clock.Now())
			run := b.run
			b.run = func() error {
				err := run()
				t.reached = s.acted
				return err
			}
			return &plan{b: b}
		},
		func() *plan {
			if g := t.gens["a"]; g != nil && g.state == soft {
				return &plan{b: s.staleLegalHoldOf(g)}
			}
			return nil
		},
		// A name with a soft-deleted table and a soft-deleted view at once
		// (SPEC §4: each kind's routes act on its own records): table b
		// soft-dropped, a view created at its name and soft-dropped, then
		// the table's undrop by name alone must bring back the table, and
		// the view's purge-now end the view.
		func() *plan { return ops(s.createAt(t, "b", ns, t.tbl(4), "")) },
		func() *plan {
			if g := t.live("b"); g != nil {
				return ops(s.dropOp(g.ns, g.name, g, admin, false))
			}
			return nil
		},
		func() *plan {
			if g := t.gens["b"]; g != nil && g.state == soft {
				return ops(s.viewCreateAt(ns, t.tbl(4)))
			}
			return nil
		},
		func() *plan {
			if v := s.m.viewAt(ns, t.tbl(4)); v != nil && v.state == live {
				return ops(s.viewDropOf(v))
			}
			return nil
		},
		func() *plan {
			g := t.gens["b"]
			if g == nil || g.state != soft || slices.ContainsFunc(s.m.inState(soft), func(o *Gen) bool { return o != g && o.ns == g.ns && o.name == g.name }) {
				return nil // one soft-deleted table of the name: the name alone says which
			}
			op := &Op{desc: fmt.Sprintf("admin undrops %s by its name alone (a soft-deleted view shares it)", g),
				keys: append(tableKeys(g.ns, g.name), "uuid:"+g.uuid), want: []int{200}}
			op.run = func() Outcome { return s.w.call(s.ctx, admin, "POST", lifecyclePath(g.ns, g.name)+"/undrop", "{}") }
			op.after = s.opUndropAfter(g.ns, g.name)
			return ops(op)
		},
		func() *plan {
			for _, v := range s.m.viewsIn(soft) {
				if v.ns == ns && v.name == t.tbl(4) {
					return ops(s.viewPurgeNowOf(v))
				}
			}
			return nil
		},
		// The views' records and the soft-deleted table survive a kill.
		func() *plan { return &plan{b: s.makeBarrier("restart")} },
	}
}

// clockPast moves the clock just past at, in whole half hours (nil when
// that is more than 400 days away or would pass 2200).
func (s *Sim) clockPast(at time.Time) *barrier {
	now := s.w.clock.Now()
	d := at.Sub(now)
	if d > 400*24*time.Hour || now.Add(d).Year() >= 2200 {
		return nil
	}
	d = (max(d, 0)/(30*time.Minute) + 1) * 30 * time.Minute
	return &barrier{kind: "clock", desc: "clock +" + d.String() + " (past a purge-at)", run: func() error {
		s.w.clock.Advance(d)
		s.logf("   now %s", s.w.clock.Now().Format(time.RFC3339))
		return nil
	}}
}

// tmplPrivilegeShort: the writer's grant lacks exactly the privilege an
// operation needs, in turn for each (a drop with purge, an unregister, a
// soft drop, an append, a create, in a seeded order), and the writer tries
// it; then the reader (who reads only) tries to end the table each way,
// and its engine to write with the session a load vended it. Each must be a
// 403 that changes nothing (each runs alone); the grant is given back.
func tmplPrivilegeShort(s *Sim, t *tmplRun) []step {
	var ns string
	without := func(priv string) []string {
		return slices.DeleteFunc(slices.Clone(writerPrivileges), func(p string) bool { return p == priv })
	}
	tries := []struct {
		priv string
		op   func(g *Gen) *Op
	}{
		{"TABLE_DROP_WITH_PURGE", func(g *Gen) *Op { return s.opDropOf(g, writer, true) }},
		{"TABLE_DROP", func(g *Gen) *Op { return s.unregisterOf(g, writer) }},
		{"TABLE_DROP", func(g *Gen) *Op { return s.opDropOf(g, writer, false) }},
		{"TABLE_WRITE", func(g *Gen) *Op { return s.opAppendTo(g, writer) }},
		{"PARTITION_DROP", func(g *Gen) *Op { return s.retentionOpBy(g, "P3650D", writer) }},
		{"TABLE_CREATE", func(g *Gen) *Op {
			return s.createOp(g.ns, t.tbl(1), writer, "", map[string]string{"format-version": "2"})
		}},
		{"TABLE_CREATE", func(g *Gen) *Op { return s.txCreateAfterOf(g, writer, t.tbl(2)) }},
	}
	steps := []step{func() *plan {
		var mk *Op
		ns, mk = s.ensureNS()
		return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""))
	}}
	for _, i := range s.rng.Perm(len(tries)) {
		try := tries[i]
		steps = append(steps,
			func() *plan { return ops(s.grantTo(writer, without(try.priv))) },
			func() *plan {
				if g := t.live("a"); g != nil {
					t.reached = true
					return ops(try.op(g))
				}
				return nil
			})
	}
	readerTries := []func(g *Gen) *Op{
		func(g *Gen) *Op { return s.unregisterOf(g, reader) },
		func(g *Gen) *Op { return s.opDropOf(g, reader, true) },
		func(g *Gen) *Op { return s.opDropOf(g, reader, false) },
	}
	for _, try := range readerTries {
		steps = append(steps, func() *plan {
			if g := t.live("a"); g != nil {
				return ops(try(g))
			}
			return nil
		})
	}
	// The reader's engine: its vended session reads, never writes.
	steps = append(steps, func() *plan {
		g := t.live("a")
		if g == nil {
			return nil
		}
		op := s.engineLoadOf(g.ns, g.name, g, reader)
		after := op.after
		op.after = func(o Outcome, c bool) error {
			if err := after(o, c); err != nil {
				return err
			}
			if o.Status == 200 && len(s.sessions) > 0 && s.sessions[len(s.sessions)-1].g == g {
				t.sess = s.sessions[len(s.sessions)-1]
			}
			return nil
		}
		return ops(op)
	}, func() *plan {
		if t.sess == nil {
			return nil
		}
		return ops(s.engineWriteWith(t.sess))
	})
	// Purge-now of the soft-dropped table needs TABLE_DROP_WITH_PURGE, not
	// TABLE_UNDROP: refused without the first, accepted without the second.
	steps = append(steps, func() *plan { return ops(s.catalogSetOp("soft-delete.enabled", "true")) }, func() *plan {
		if g := t.live("a"); g != nil {
			t.gens["soft"] = g
			return ops(s.dropOp(g.ns, g.name, g, admin, false))
		}
		return nil
	})
	for _, priv := range []string{"TABLE_DROP_WITH_PURGE", "TABLE_UNDROP"} {
		steps = append(steps,
			func() *plan { return ops(s.grantTo(writer, without(priv))) },
			func() *plan {
				if g := t.gens["soft"]; g != nil && g.state == soft {
					return ops(s.purgeNowBy(g, writer))
				}
				return nil
			})
	}
	return append(steps, func() *plan { return ops(s.grantTo(writer, writerPrivileges)) })
}

// tmplCopyOnWrite: a copy-on-write table, whose rewrites leave files only
// older snapshots reach. Rows on four days; a read of main's head; an
// overwrite of some rows (an "overwrite" snapshot); a partition drop based
// on the read is refused (409: data was removed since), one based on the
// head lands, and a drop of a third day follows (in manifests the last
// drop rewrote); a delete rewrites files again. Then the clock jumps 8 days
// and a retention sweep expires what no ref keeps, and a purge: at each
// step the files a retained snapshot reaches stay, and the purge counts
// every file any snapshot reached.
// kinded: a template's op counted in the coverage as its kind (the
// template is where a rare kind is sure to run).
func kinded(op *Op, kind string) *Op {
	if op != nil {
		op.kind = kind
	}
	return op
}

func tmplCopyOnWrite(s *Sim, t *tmplRun) []step {
	var ns string
	var read int64
	days := []string{}
	for i := range 4 {
		days = append(days, s.w.clock.Now().AddDate(0, 0, i-3).Format("2006-01-02"))
	}
	onLive := func(f func(g *Gen) *Op) step {
		return func() *plan {
			if g := t.live("a"); g != nil {
				if op := f(g); op != nil {
					return ops(op)
				}
			}
			return nil
		}
	}
	appendDays := func(g *Gen) *Op {
		rows := map[int64]string{}
		for _, d := range days {
			s.m.nextRow++
			rows[s.m.nextRow] = d
		}
		return s.appendRowsOp(g.ns, g.name, g, admin, rows)
	}
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAtWith(t, "a", ns, t.tbl(0), "", map[string]string{"format-version": "2", "write.delete.mode": "copy-on-write"}))
		},
		onLive(appendDays),
		onLive(appendDays),
		onLive(func(g *Gen) *Op {
			if r := s.readable(g); r != nil {
				read = r.current
			}
			return kinded(s.overwriteRowsOf(g), "overwrite-rows")
		}),
		onLive(func(g *Gen) *Op {
			if read == 0 {
				return nil
			}
			op := s.partitionDropRead(g.ns, g.name, g, []string{days[1]}, read)
			for i := 0; i < 8 && (op.invalid || !slices.Contains(op.want, 409)); i++ {
				op = s.partitionDropRead(g.ns, g.name, g, []string{days[1]}, read) // a well-formed body, a privileged caller
			}
			after := op.after
			op.after = func(o Outcome, c bool) error {
				t.reached = t.reached || o.Status == 409
				return after(o, c)
			}
			return op
		}),
		onLive(func(g *Gen) *Op {
			r := s.readable(g)
			if r == nil || r.current == 0 {
				return nil
			}
			return s.partitionDropRead(g.ns, g.name, g, []string{days[0]}, r.current)
		}),
		// A drop of another day, held in manifests the last drop rewrote
		// (their entries all EXISTING now): it must end its files too.
		onLive(func(g *Gen) *Op {
			drop := s.partitionDropOf(g.ns, g.name, g, []string{days[2]})
			for i := 0; i < 8 && (drop.invalid || !slices.Contains(drop.want, 200)); i++ {
				drop = s.partitionDropOf(g.ns, g.name, g, []string{days[2]}) // a well-formed body, a privileged caller
			}
			return drop
		}),
		onLive(func(g *Gen) *Op { return kinded(s.deleteRowsOf(g), "delete-rows") }),
		onLive(func(g *Gen) *Op { return s.retentionOp(g, "P30D") }),
		func() *plan { return &plan{b: s.makeBarrier("clock-8d")} },
		func() *plan { return &plan{b: s.makeBarrier("retention-sweep")} },
		onLive(func(g *Gen) *Op { return s.dropOp(g.ns, g.name, g, admin, true) }),
	}
}

// tmplRevalidate: an engine of the writer loads a table with vended
// credentials, something the answer depends on changes (the writer's
// TABLE_WRITE is revoked, the table's legal hold is set, a commit moves
// its metadata, or nothing), and the engine
// revalidates with the tag it got: a 304 is right only when a load now
// would answer the same, credentials included (engines_test.go,
// revalidated).
func tmplRevalidate(s *Sim, t *tmplRun) []step {
	change := pick(s, []string{"revoke", "revoke", "legal hold", "commit", "nothing"})
	var saved []string
	return []step{
		func() *plan {
			ns, mk := s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""))
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				return ops(s.engineLoad(g.ns, g.name, g, writer, false))
			}
			return nil
		},
		func() *plan {
			g := t.live("a")
			switch {
			case g == nil:
				return nil
			case change == "revoke":
				// The writer's TABLE_WRITE goes (a grant change moves no
				// metadata: only the credentials tell).
				saved = slices.Clone(s.m.grants[writer])
				return ops(s.grantTo(writer, slices.DeleteFunc(slices.Clone(saved), func(p string) bool { return p == "TABLE_WRITE" })))
			case change == "legal hold":
				return ops(s.opSetLegalHoldProp(g, admin, true))
			case change == "commit":
				return ops(s.opAppendTo(g, admin))
			}
			return nil
		},
		func() *plan {
			if g := t.live("a"); g != nil {
				t.reached = true
				return ops(s.engineLoad(g.ns, g.name, g, writer, true))
			}
			return nil
		},
		func() *plan {
			var o []*Op
			if g := t.live("a"); g != nil && g.legalHold {
				o = append(o, s.opSetLegalHoldProp(g, admin, false))
			}
			if saved != nil {
				o = append(o, s.grantTo(writer, saved))
			}
			return ops(o...)
		},
	}
}

// tmplSweepBeside: the orphan sweep's schedule fires in rounds where
// commits and a create are under way (EventBridge keeps its own time),
// its calls interleaved with theirs: whatever it reads between a
// request's metadata write and its transaction is young, and the tables
// must read every row after the settle deletes what it took.
func tmplSweepBeside(s *Sim, t *tmplRun) []step {
	var ns string
	round := func(i int) step {
		return func() *plan {
			var o []*Op
			for _, k := range []string{"a", "b"} {
				if g := t.live(k); g != nil {
					o = append(o, s.opAppendTo(g, admin))
				}
			}
			o = append(o, s.createAt(t, fmt.Sprintf("c%d", i), ns, t.tbl(2+i), ""), s.orphanSweeps(6, true))
			t.reached = t.reached || len(o) > 2
			return ops(o...)
		}
	}
	// placed: a create, or an append to a, preempted between its metadata
	// write and the transaction that makes it current, the sweeps run
	// there.
	placed := func(i int) step {
		return func() *plan {
			first := s.createAt(t, fmt.Sprintf("p%d", i), ns, t.tbl(5+i), "")
			if g := t.live("a"); i%2 == 1 && g != nil {
				first = s.opAppendTo(g, admin)
			}
			return preemptedOn("TransactWriteItems", first, s.orphanSweeps(2, true))
		}
	}
	return []step{
		func() *plan {
			var mk *Op
			ns, mk = s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""), s.createAt(t, "b", ns, t.tbl(1), ""))
		},
		round(0), placed(0), round(1), placed(1), round(2),
	}
}
