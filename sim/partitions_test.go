package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// Partition drop, retention (and the snapshot expiry its sweep runs),
// snapshot removal and refs, set-location: the operations that change what
// a live table's snapshots reach.

// policy is a retention policy as the model set it: it belongs to the
// generation it was set on (a table of another uuid at the name has none).
type policy struct {
	uuid, keep string
}

// daysOf lists the distinct days of g's rows.
func daysOf(g *Gen) []string {
	var out []string
	for _, d := range g.rows {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// removeDays drops the rows of days from g (maybe when contended).
func removeDays(g *Gen, days []string, contended bool) {
	for id, d := range g.rows {
		if slices.Contains(days, d) {
			delete(g.rows, id)
			if contended {
				g.maybe[id] = d
			}
		}
	}
	for id, d := range g.maybe {
		if slices.Contains(days, d) && !contended {
			delete(g.maybe, id)
		}
	}
}

func (s *Sim) opPartitionDrop() *Op {
	ns, name, g := s.target()
	var days []string
	if g != nil {
		days = daysOf(g)
	}
	dropped := []string{}
	for range 1 + s.rng.IntN(2) {
		d := s.day()
		if len(days) > 0 && s.chance(0.8) {
			d = pick(s, days)
		}
		if !slices.Contains(dropped, d) {
			dropped = append(dropped, d)
		}
	}
	return s.partitionDropOf(ns, name, g, dropped)
}

// readable: what g's current metadata reaches (nil: no table, or unread).
func (s *Sim) readable(g *Gen) *reach {
	if g == nil || g.meta == "" {
		return nil
	}
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
	if err != nil {
		return nil
	}
	return r
}

// partitionDropOf drops the partitions of days (dropped) of ns.name (g:
// the table there).
func (s *Sim) partitionDropOf(ns, name string, g *Gen, dropped []string) *Op {
	return s.partitionDropRead(ns, name, g, dropped, 0)
}

// partitionDropRead: the drop names read as the snapshot its caller read
// (0: a third of the time one of main's, at random).
func (s *Sim) partitionDropRead(ns, name string, g *Gen, dropped []string, read int64) *Op {
	var tuples []map[string]any
	for _, d := range dropped {
		tuples = append(tuples, map[string]any{"d": d})
	}
	fields := map[string]any{"partitions": tuples}
	if g != nil && s.chance(0.3) {
		fields["expected-table-uuid"] = g.uuid
	}
	// The snapshot the caller read (one of main's): a snapshot after it
	// that removed data (a delete or an overwrite) makes the drop a 409.
	removed := false
	if r := s.readable(g); r != nil && r.current != 0 && (read != 0 || s.chance(0.3)) {
		// The ancestors the metadata still holds: a parent an expiry
		// removed is no snapshot a caller can have read on main (the
		// catalog answers 409 "expired"; soak seed 1005 step 274).
		var chain []int64
		for id := r.current; id != 0 && !slices.Contains(chain, id); id = r.snapParent[id] {
			if _, held := r.snapFiles[id]; !held {
				break
			}
			chain = append(chain, id)
		}
		i := s.rng.IntN(len(chain))
		if read != 0 {
			i = max(slices.Index(chain, read), 0)
		}
		fields["read-snapshot-id"] = chain[i]
		for _, id := range chain[:i] {
			if op := r.snapOp[id]; op == "delete" || op == "overwrite" {
				removed = true
			}
		}
	}
	body, bad := s.lifecycleBody(fields, "partitions")
	if bad == "" && s.chance(0.1) && s.allow("bad-body") {
		// A tuple with a duplicated key, an unknown field, a wrong type.
		body, bad = pick(s, []string{
			`{"partitions": [{"d": "` + dropped[0] + `", "d": "` + dropped[0] + `"}]}`,
			`{"partitions": [{"dd": "` + dropped[0] + `"}]}`,
			`{"partitions": [{"d": 20260101}]}`,
		}), "a malformed partition tuple" // (null is a partition value: the null partition)
	}
	p := pick(s, []string{admin, writer})
	op := &Op{desc: fmt.Sprintf("%s drops partitions of %s.%s: %s", p, ns, name, trunc(body, 120)), keys: tableKeys(ns, name)}
	switch {
	case bad != "":
		op.invalid, op.why = true, bad
	case g == nil:
		op.want = []int{404}
	case removed:
		op.want, op.why = []int{409}, "a snapshot after the one read removed data"
		op.keys = append(op.keys, "uuid:"+g.uuid)
	default:
		op.want = []int{200}
		if g.forged {
			// Its metadata reaches its lender's files, which the lender's
			// purge may have deleted: a 422 naming the file.
			op.want = append(op.want, 422)
		}
		op.keys = append(op.keys, "uuid:"+g.uuid)
	}
	s.privileged(op, p, "PARTITION_DROP")
	// A quarter of the well-formed drops carry an Idempotency-Key and are
	// sent again under it: the same payload replays the answer (same
	// snapshot, no commit), another payload (a guard added or left out)
	// is a 422 (SPEC §5).
	var key, other string
	var replay, changed, cross Outcome
	// q: another principal, whose own request under the same key must
	// run as its own (receipts are per principal): a drop of a table that
	// does not exist, a 404 (not a 422 for a key "used for another
	// request", held-out 13).
	q := admin
	if p == admin {
		q = writer
	}
	if bad == "" && g != nil && s.chance(0.25) {
		key = uuid.NewString()
		alt := map[string]any{"partitions": tuples}
		for k, v := range fields {
			alt[k] = v
		}
		if _, ok := alt["expected-table-uuid"]; ok {
			delete(alt, "expected-table-uuid")
		} else {
			alt["expected-table-uuid"] = g.uuid
		}
		raw, _ := json.Marshal(alt)
		other = string(raw)
		op.desc += " (with an Idempotency-Key, sent again)"
	}
	op.run = func() Outcome {
		path := lifecyclePath(ns, name) + "/partitions/drop"
		if key == "" {
			return s.w.call(s.ctx, p, "POST", path, body)
		}
		o := s.w.call(s.ctx, p, "POST", path, body, "Idempotency-Key", key)
		if o.Status == 200 {
			replay = s.w.call(s.ctx, p, "POST", path, body, "Idempotency-Key", key)
			changed = s.w.call(s.ctx, p, "POST", path, other, "Idempotency-Key", key)
			cross = s.w.call(s.ctx, q, "POST", lifecyclePath(ns, "nosuchtable0")+"/partitions/drop", body, "Idempotency-Key", key)
		}
		return o
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		if key != "" {
			if replay.Status != 200 || !bytes.Equal(replay.Body, o.Body) {
				return s.violatef("a partition drop sent again under its Idempotency-Key with the same payload: %s, want the first answer replayed: %s", replay, trunc(string(o.Body), 200))
			}
			if changed.Status != 422 {
				return s.violatef("a partition drop sent under a used Idempotency-Key with another payload %s: %s, want 422", other, changed)
			}
			if cross.Status == 422 || cross.Status == 409 {
				return s.violatef("%s's partition drop of %s.nosuchtable0 under the Idempotency-Key %s had used: %s, want its own answer (receipts are per principal)", q, ns, p, cross)
			}
		}
		if g := s.m.liveAt(ns, name); g != nil {
			removeDays(g, dropped, contended)
			var res struct {
				Meta string `json:"metadata-location"`
			}
			if json.Unmarshal(o.Body, &res) == nil && res.Meta != "" {
				s.advanceMeta(g, res.Meta)
				if g.meta == res.Meta {
					return s.record(g, res.Meta, false)
				}
			}
		}
		return nil
	}
	return op
}

func (s *Sim) opRetention() *Op {
	ns, name, g := s.target()
	remove := s.chance(0.25)
	v, ok := s.duration()
	field := "d"
	if s.chance(0.1) {
		field = "id" // not a time: refused
		ok = false
	}
	body, bad := s.lifecycleBody(map[string]any{"field": field, "keep": v}, "keep")
	op := &Op{keys: append(tableKeys(ns, name), "policy:"+ns+"."+name)}
	p := admin // half the time: the others mostly lack PARTITION_DROP
	if s.chance(0.5) {
		p = s.principal()
	}
	method := "PUT"
	if remove {
		method, body, bad = "DELETE", "", ""
		op.desc = fmt.Sprintf("%s removes the retention policy of %s.%s", p, ns, name)
	} else {
		op.desc = fmt.Sprintf("%s sets the retention policy of %s.%s: %s", p, ns, name, trunc(body, 100))
	}
	switch {
	case bad != "":
		op.invalid, op.why = true, bad
	case !remove && !ok:
		op.invalid, op.why = true, fmt.Sprintf("field %s keep %s is not a policy", field, v)
	case remove:
		op.want = []int{204, 404} // the policy of the name goes, whichever table holds it
	case g == nil:
		op.want = []int{404}
	default:
		op.want = []int{200}
	}
	// A policy drops partitions: it needs PARTITION_DROP (TABLE_WRITE is
	// not enough).
	s.privileged(op, p, "PARTITION_DROP")
	op.run = func() Outcome {
		var b any
		if body != "" {
			b = body
		}
		return s.w.call(s.ctx, p, method, lifecyclePath(ns, name)+"/partition-retention", b)
	}
	op.after = func(o Outcome, _ bool) error {
		switch {
		case o.Status == 200 && !remove:
			if g := s.m.liveAt(ns, name); g != nil {
				s.m.policies[ns+"."+name] = policy{uuid: g.uuid, keep: v}
			}
		case o.Status == 204 && remove:
			delete(s.m.policies, ns+"."+name)
		}
		return nil
	}
	return op
}

// sweepRetention runs the retention sweep at the clock's time: each live
// table with its own policy loses the days wholly before now - keep; the
// snapshot expiry it runs may move pointers and delete what no retained
// snapshot reaches.
func (s *Sim) sweepRetention() error {
	now := s.w.clock.Now()
	s.sweeping = true
	heads := map[*Gen]int64{} // main's head before, of the tables whose expiry the model predicts
	// kept: what refs keep by the record before the sweep (main's chain
	// one shorter: the sweep's drop may take its first place).
	kept := map[*Gen]map[int64]bool{}
	for _, g := range s.m.inState(live) {
		if names := s.refsExpirable(g, now); len(names) > 0 {
			s.expirable[g] = names
		}
		if s.expiryPredictable(g) {
			heads[g] = g.h.refs["main"].snapshot
			kept[g] = g.mustKeep(now, -1)
			delete(kept[g], -1)
		}
	}
	rep, err := s.w.srv.Partitions.SweepRetention(s.ctx, now, 0)
	if err != nil {
		return s.violatef("retention sweep: %v", err)
	}
	s.logf("   report tables %d dropped %d expired %d snapshots, jobs %v, failed %v", rep.Tables, rep.Dropped, rep.SnapshotsExpired, rep.ExpireJobs, rep.Failed)
	s.acted = rep.Dropped+rep.SnapshotsExpired > 0
	for _, f := range rep.Failed {
		name, why, _ := strings.Cut(strings.TrimPrefix(f, catalogName+"."), ": ")
		ns, tbl, _ := strings.Cut(name, ".")
		if g := s.m.liveAt(ns, tbl); g != nil && g.forged && strings.Contains(why, "no longer exist") {
			continue // a forgery whose lender's files are gone (see opPartitionDrop)
		}
		return s.violatef("retention sweep failed for %v", rep.Failed)
	}
	if err := s.checkExpired(now, heads, kept); err != nil {
		return err
	}
	for _, g := range s.m.inState(live) {
		pol, ok := s.m.policies[g.ident()]
		if !ok || pol.uuid != g.uuid {
			continue
		}
		keep, valid := parseHold(pol.keep)
		if !valid {
			continue
		}
		c := now.Add(-keep).UTC()
		cutoff := time.Date(c.Year(), c.Month(), c.Day(), 0, 0, 0, 0, time.UTC)
		var expired []string
		for _, d := range daysOf(g) {
			if day, err := time.Parse("2006-01-02", d); err == nil && !day.Add(24*time.Hour).After(cutoff) {
				expired = append(expired, d)
			}
		}
		if len(expired) > 0 {
			s.logf("   %s: days %v are past its retention (%s)", g, expired, pol.keep)
			removeDays(g, expired, g.legalHold)
		}
	}
	return nil
}

// expiryPredictable: the sweep expires g's snapshots (its own policy, no
// legal hold, gc on), and the model can tell which: its record holds
// exactly the refs g's metadata has (a ref the model does not hold would
// keep what the model expects to go), and no history.expire.* property
// changes Iceberg's defaults.
func (s *Sim) expiryPredictable(g *Gen) bool {
	pol, ok := s.m.policies[g.ident()]
	if !ok || pol.uuid != g.uuid || g.h == nil || g.forged || g.legalHold || g.holdUnsure {
		return false
	}
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
	if err != nil || held(r.props["icehold.legal-hold"]) || gcDisabled(r.props) || len(r.refs) != len(g.h.refs) {
		return false
	}
	if g.minKeep != 0 && r.props["history.expire.min-snapshots-to-keep"] != fmt.Sprint(g.minKeep) {
		return false // the model's setting is not in the metadata (a register went back before it)
	}
	for k, v := range r.props {
		if k == "history.expire.min-snapshots-to-keep" && v == fmt.Sprint(g.minKeep) {
			continue // the model's own (minKeepOf)
		}
		if strings.HasPrefix(k, "history.expire.") {
			return false
		}
	}
	for name, ref := range r.refs {
		if m, ok := g.h.refs[name]; !ok || m.snapshot != ref.snapshot || m.kind != ref.kind {
			return false
		}
	}
	_, ok = g.h.refs["main"]
	return ok
}

// checkExpired: after a sweep at now, no snapshot the model says must
// expire (mustExpire, from its own record) is left in the metadata of the
// tables it predicts (heads: main's head before the sweep).
func (s *Sim) checkExpired(now time.Time, heads map[*Gen]int64, kept map[*Gen]map[int64]bool) error {
	for _, g := range s.m.inState(live) {
		head, ok := heads[g]
		if !ok {
			continue
		}
		lo := s.w.call(s.ctx, admin, "GET", tablePath(g.ns, g.name), nil)
		if lo.Status != 200 {
			return s.violatef("%s after the retention sweep: load: %s", g, lo)
		}
		var t createResult
		if err := json.Unmarshal(lo.Body, &t); err != nil {
			return err
		}
		r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, t.MetadataLocation)
		if err != nil {
			return s.violatef("%s: its metadata %s cannot be read: %v", g, t.MetadataLocation, err)
		}
		drop := int64(0)
		if m := r.refs["main"]; m.snapshot != head {
			drop = m.snapshot // the sweep's partition drop committed on main
		}
		var left, lost []int64
		for _, id := range g.mustExpire(now, drop) {
			if slices.Contains(r.snaps, id) {
				left = append(left, id)
			}
		}
		for id := range kept[g] {
			if !slices.Contains(r.snaps, id) {
				lost = append(lost, id)
			}
		}
		if len(lost) > 0 {
			slices.Sort(lost)
			return s.violatef("%s: the retention sweep at %s expired snapshots %v, which a ref keeps by the model's record (min-snapshots-to-keep %d)",
				g, now.Format(time.RFC3339), lost, cmp.Or(g.minKeep, table.MinSnapshotsToKeepDefault))
		}
		if len(left) > 0 {
			var refs []string
			for _, name := range slices.Sorted(maps.Keys(g.h.refs)) {
				refs = append(refs, fmt.Sprintf("%s %s@%d", g.h.refs[name].kind, name, g.h.refs[name].snapshot))
			}
			return s.violatef("%s: the retention sweep at %s left snapshots %v, which by the model's record no ref keeps (%v; main's head after its drop %d; min-snapshots-to-keep %d) and which are older than max-snapshot-age (%d ms)",
				g, now.Format(time.RFC3339), left, refs, drop, table.MinSnapshotsToKeepDefault, table.MaxSnapshotAgeMsDefault)
		}
	}
	return nil
}

// --- snapshots and refs ---

func (s *Sim) opSnapshots() *Op {
	lives := s.m.inState(live)
	if len(lives) == 0 {
		return nil
	}
	return s.snapshotsOf(pick(s, lives))
}

// snapshotsOf: admin commits a snapshot update to g (removes one, or sets
// or removes the tag or branch "keep"); nil when g has no snapshot.
func (s *Sim) snapshotsOf(g *Gen) *Op {
	if g == nil {
		return nil
	}
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
	if err != nil || len(r.snaps) == 0 {
		return nil
	}
	if s.chance(0.25) {
		if op := s.mainRetentionOf(g, 0); op != nil {
			return op
		}
	}
	var update map[string]any
	switch n := s.rng.IntN(3); {
	case n == 0 && len(r.snaps) > 1:
		var old []int64
		for _, id := range r.snaps {
			if id != r.current {
				old = append(old, id)
			}
		}
		update = map[string]any{"action": "remove-snapshots", "snapshot-ids": []int64{pick(s, old)}}
	case n == 1:
		update = map[string]any{"action": "remove-snapshot-ref", "ref-name": "keep"}
	default:
		update = map[string]any{"action": "set-snapshot-ref", "ref-name": "keep", "type": pick(s, []string{"tag", "branch"}), "snapshot-id": pick(s, r.snaps)}
	}
	raw, _ := json.Marshal(update)
	ns, name := g.ns, g.name
	op := &Op{desc: fmt.Sprintf("admin commits %s to %s", raw, g), keys: append(tableKeys(ns, name), "uuid:"+g.uuid, "refs:"+g.uuid), want: []int{200, 400, 409}}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", tablePath(ns, name), map[string]any{"requirements": []any{}, "updates": []any{update}})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		return s.propsCommittedRefs(o, ns, name, true, func(*Gen) {})
	}
	return op
}

// mainRetentionOf: admin sets main's own retention at its head (asserted:
// a raced append makes it a 409), one of: every ancestor kept ten years
// (1), none kept past an hour beyond the two newest (2), or the three
// newest (3); 0 picks one. Every value is far from any snapshot's age
// (snapshots are stamped on the wall clock, a month behind the simulated
// one), so the model's expiry is exact either way. A partition drop or a
// sweep that commits must leave them as set.
func (s *Sim) mainRetentionOf(g *Gen, which int) *Op {
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
	if err != nil || r.current == 0 {
		return nil
	}
	if which == 0 {
		which = 1 + s.rng.IntN(3)
	}
	update := map[string]any{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": r.current}
	// The branch's own count, from 1 to 5: above, equal to or below the
	// table's history.expire.min-snapshots-to-keep, which it overrides.
	keep := 1 + s.rng.IntN(5)
	switch which {
	case 1:
		update["max-snapshot-age-ms"] = int64(10 * 365 * 24 * time.Hour / time.Millisecond)
	case 2:
		update["max-snapshot-age-ms"], update["min-snapshots-to-keep"] = int64(time.Hour/time.Millisecond), keep
	default:
		update["min-snapshots-to-keep"] = keep
	}
	raw, _ := json.Marshal(update)
	ns, name := g.ns, g.name
	op := &Op{kind: "main-retention", desc: fmt.Sprintf("admin commits %s to %s", raw, g), keys: append(tableKeys(ns, name), "uuid:"+g.uuid, "refs:"+g.uuid), want: []int{200, 409}}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", tablePath(ns, name), map[string]any{
			"requirements": []any{map[string]any{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": r.current}},
			"updates":      []any{update}})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		return s.propsCommittedRefs(o, ns, name, true, func(*Gen) {})
	}
	return op
}

// --- set-location ---

func (s *Sim) opSetLocation() *Op {
	lives := s.m.inState(live)
	if len(lives) == 0 || !s.allow("location") {
		return nil
	}
	g := pick(s, lives)
	loc, plain, outside := s.location()
	if loc == "" {
		loc, plain = s.spell(warehouse+"/L/"+s.pickLoc()), false
	}
	return s.setLocationOf(g, loc, plain, outside)
}

// setLocationOf moves g to loc by a commit (set-location).
func (s *Sim) setLocationOf(g *Gen, loc string, plain, outside bool) *Op {
	ns, name := g.ns, g.name
	op := &Op{desc: fmt.Sprintf("admin sets the location of %s to %s", g, loc), keys: append(tableKeys(ns, name), "uuid:"+g.uuid, "loc")}
	other := s.ownerBesides(loc, g)
	switch {
	case outside:
		op.invalid, op.why = true, "location "+loc+" is not a table location inside the warehouse"
	case other != nil && other.state != purging:
		op.want, op.why = []int{409}, "the location overlaps "+other.String()+"'s"
	case plain && s.reachingFormerOwner(loc, g) != nil:
		fo := s.reachingFormerOwner(loc, g)
		op.want, op.why = []int{409}, "a retained snapshot of "+fo.String()+" still reaches its former location"
		op.keys = append(op.keys, "uuid:"+fo.uuid)
	case plain:
		op.want = []int{200, 409}
	default:
		op.want = []int{200, 400, 409}
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", tablePath(ns, name), map[string]any{"requirements": []any{},
			"updates": []any{map[string]any{"action": "set-location", "location": loc}}})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		var res createResult
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("commit answer: %v", err)
		}
		return s.propsCommitted(o, ns, name, func(g *Gen) { s.m.moveTo(g, res.Metadata.Location) })
	}
	return op
}

// ownerBesides: a generation other than g owning a prefix overlapping loc
// (its current location, or a former one its snapshots may still reach).
func (s *Sim) ownerBesides(loc string, g *Gen) *Gen {
	for _, o := range s.m.inState(live, soft, purging, unregistered) {
		if o == g || o.forged {
			continue
		}
		if overlaps(o.location, loc) {
			return o
		}
	}
	return nil
}

// formerOwner: a generation whose former location overlaps loc (set-location
// keeps it owned while retained snapshots reach it: either answer).
// stillReaches: a retained snapshot of o reaches a file under a former
// location of o that overlaps loc (o still owns it: SPEC §2).
func (s *Sim) stillReaches(o *Gen, loc string) bool {
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, o.meta)
	if err != nil {
		return false
	}
	for _, l := range o.oldLocs {
		p, ok := keyOf(strings.TrimRight(l, "/"))
		if !ok || !overlaps(l, loc) {
			continue
		}
		for _, files := range r.snapFiles {
			for k := range files {
				if strings.HasPrefix(k, p+"/") {
					return true
				}
			}
		}
	}
	return false
}

func (s *Sim) formerOwner(loc string, besides *Gen) *Gen {
	for _, o := range s.m.inState(live, soft, purging, unregistered) {
		if o == besides {
			continue
		}
		for _, l := range o.oldLocs {
			if overlaps(l, loc) {
				return o
			}
		}
	}
	return nil
}

// reachingFormerOwner: a generation other than besides that a retained
// snapshot keeps the owner of a former location overlapping loc (a
// purging one may have let it go: either answer).
func (s *Sim) reachingFormerOwner(loc string, besides *Gen) *Gen {
	for _, o := range s.m.inState(live, soft, unregistered) {
		if o != besides && !o.forged && s.stillReaches(o, loc) {
			return o
		}
	}
	return nil
}

var _ = strings.Cut
