package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/purge"
)

// --- a drop that keeps the files ---

// plainDrop: with soft delete off, a drop keeps every file and lets the
// location go (docs/design/store.md, Ownership). Past the intent
// lifetime the orphan sweep runs: the dropped table's metadata file must
// outlive it (its commits left no intent behind), and a register of it
// under a new name must take the location back at once and read every row
// (held-out 11: a plain drop that kept its claims, so the register was a
// 409 naming a table that no longer exists; a plain commit that left its
// intent, so the sweep took the metadata once the location was let go).
func (s *Sim) plainDrop() *barrier {
	return &barrier{kind: "plain-drop", desc: "a drop with soft delete off, the orphan sweep past the intent lifetime, then a register of its metadata", run: func() error {
		s.acted = false
		s.m.nextID++
		g, err := s.freshTable("pd", warehouse+fmt.Sprintf("/L/pd%d", s.m.nextID), nil)
		if err != nil || g == nil {
			return err
		}
		left, err := s.refusedCommit(g)
		if err != nil {
			return err
		}
		was := s.m.catProps["soft-delete.enabled"]
		if was == "" {
			was = "true"
		}
		if was != "false" {
			if o, err := s.runFor(s.catalogSetOp("soft-delete.enabled", "false")); err != nil || o.Status != 200 {
				return err
			}
		}
		o, err := s.runFor(s.dropOp(g.ns, g.name, g, admin, false))
		if was != "false" {
			if _, err := s.runFor(s.catalogSetOp("soft-delete.enabled", was)); err != nil {
				return err
			}
		}
		if err != nil || o.Status != 204 || g.state != released {
			return err
		}
		s.w.clock.Advance(purge.IntentTTL + time.Minute)
		if err := s.drain(); err != nil { // reconcile runs the orphan sweep
			return err
		}
		objs, err := s.keysUnder(g.location)
		if err != nil {
			return err
		}
		for _, k := range left {
			if _, ok := objs[k]; ok {
				return s.violatef("%s: a commit whose intent write was refused left %s, and the orphan sweep past the intent lifetime did not take it (no intent names it: it stays as long as the bucket)", g, k)
			}
		}
		if _, ok := objs[metaKey(g.meta)]; !ok {
			return s.violatef("%s dropped without purge: its metadata file %s is gone after the orphan sweep (%d files left under its location); a drop that keeps the files keeps what registers them again", g, g.meta, len(objs))
		}
		s.m.nextID++
		name := fmt.Sprintf("pdr%d", s.m.nextID)
		back := s.registerOf(g.ns, name, g, g.meta)
		back.want, back.why = []int{200}, "a drop without purge let its location go, and its metadata file is there"
		if o, err := s.runFor(back); err != nil || o.Status != 200 {
			return err
		}
		r := s.m.liveAt(g.ns, name)
		if r == nil {
			return s.violatef("%s.%s registered, and the model holds no live table there", g.ns, name)
		}
		if err := s.checkRows(r, "registered again after a drop without purge"); err != nil {
			return err
		}
		s.acted = true
		s.logf("   %s dropped keeping its files, swept, registered again as %s", g, r)
		// The event bus refuses its next two calls, whenever they come
		// (an outage): the outbox must keep what they carried until a
		// relay publishes it (checkEvents at rest; held-out 13: a relay
		// that deleted an event before publishing it lost it).
		s.w.busRefusals.Store(2)
		return nil
	}}
}

// refusedCommit: a commit of g whose intent write is refused (an outage
// past the SDK's retries) must fail and change nothing; what it wrote
// (the new keys under g's location) must be named by an intent, which the
// caller checks by the orphan sweep past the intent lifetime taking it
// (held-out 13: a metadata file written before its intent is named by
// none, and no sweep ever takes it).
func (s *Sim) refusedCommit(g *Gen) ([]string, error) {
	before, err := s.keysUnder(g.location)
	if err != nil {
		return nil, err
	}
	r := &refusal{prefix: "INTENT#"}
	s.w.refuse.Store(r)
	body := map[string]any{"requirements": []any{}, "updates": []any{map[string]any{"action": "set-properties", "updates": map[string]string{"sim.refused": "1"}}}}
	o := s.w.call(s.ctx, admin, "POST", tablePath(g.ns, g.name), body)
	s.w.refuse.Store(nil)
	if !r.hit.Load() {
		s.logf("   a commit of %s made no intent write: %s", g, o)
		return nil, nil
	}
	if o.Status < 500 {
		return nil, s.violatef("%s: a commit whose intent write was refused answered %s, want a 5xx and no change", g, o)
	}
	if lo := s.w.call(s.ctx, admin, "GET", tablePath(g.ns, g.name), nil); lo.Status != 200 || !strings.Contains(string(lo.Body), g.meta) {
		return nil, s.violatef("%s: after a commit whose intent write was refused, the load answers %s, want the table at %s", g, lo, g.meta)
	}
	after, err := s.keysUnder(g.location)
	if err != nil {
		return nil, err
	}
	var left []string
	for k := range after {
		if _, ok := before[k]; !ok {
			left = append(left, k)
		}
	}
	slices.Sort(left)
	s.logf("   a commit of %s with its intent write refused: %d, %d new files", g, o.Status, len(left))
	return left, nil
}
