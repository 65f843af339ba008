package sim

import (
	"fmt"
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
		return nil
	}}
}
