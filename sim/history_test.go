package sim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
)

// The model's own history of what each generation's snapshots reached
// (docs/design/simulation.md, "The model"). Each time an operation the
// model accepted makes a metadata file current (a create, a commit, a
// register, an undrop, a sweep's commit the model ran), the model reads
// that file once and records every snapshot it names (the files each
// reads, with their sizes) and where main is. Tags and branches are the
// model's own: set by its set-snapshot-ref commits, removed by its
// remove-snapshot-ref commits, by a remove-snapshots commit that removed
// their snapshot, or by a sweep past the max-ref-age the model set. What
// must still exist is derived from that record, never from the table's
// metadata as it is now: a sweep that drops a tag with its snapshot leaves
// the metadata self-consistent, and the record still names the tag.

// snapRec is a snapshot as the model recorded it.
type snapRec struct {
	files  map[string]bool
	ts     int64
	parent int64 // 0: none
	// rows the snapshot holds, when the model knew them for sure when it
	// was made (nil: unknown).
	rows map[int64]string
}

// refRec is a ref the model holds: where it points and its own retention
// settings as a client's commit set them (icehold's own commits, a
// partition drop's or a sweep's, must leave them as they are).
type refRec = refInfo

// history is a generation's record.
type history struct {
	snaps map[int64]*snapRec
	refs  map[string]refRec
	// reached: every file any recorded snapshot or metadata file reached.
	reached map[string]bool
	// sizes: each file's size as first recorded (a data file's
	// file_size_in_bytes, a manifest's length, else the object's size when
	// the model first saw it).
	sizes map[string]int64
	// removed: snapshots a client's commit took out of the metadata
	// (remove-snapshots, a rollback): a branch's ancestry ends at one, as
	// Iceberg's does at a parent the metadata no longer holds.
	removed map[int64]bool
}

func newHistory() *history {
	return &history{snaps: map[int64]*snapRec{}, refs: map[string]refRec{}, reached: map[string]bool{}, sizes: map[string]int64{}, removed: map[int64]bool{}}
}

// record reads meta, which an accepted operation made g's current metadata,
// into g's history. refsToo: the operation set g's refs as meta has them
// (a register, a ref commit, a round that raced one); otherwise only main
// follows meta.
func (s *Sim) record(g *Gen, meta string, refsToo bool) error {
	if g.h == nil {
		g.h = newHistory()
	}
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, meta)
	if err != nil {
		return nil // unreadable metadata: the checks say so
	}
	h := g.h
	if !s.sweeping {
		// Snapshots a client's commit removed (remove-snapshots): their
		// files are the client's to delete (Iceberg's expire action), and
		// no icehold job does; a purge's final listing takes what is left
		// of them. (A sweep's expiry deletes its own through an expire job.)
		for id, sn := range h.snaps {
			if _, kept := r.snapFiles[id]; kept {
				continue
			}
			h.removed[id] = true
			for k := range sn.files {
				if !r.keys[k] {
					delete(h.reached, k)
				}
			}
		}
	}
	for id, files := range r.snapFiles {
		delete(h.removed, id)
		if h.snaps[id] == nil {
			h.snaps[id] = &snapRec{files: maps.Clone(files), ts: r.snapTS[id], parent: r.snapParent[id]}
		}
	}
	for k := range r.keys {
		h.reached[k] = true
	}
	for k, n := range r.sizes {
		if _, ok := h.sizes[k]; !ok {
			h.sizes[k] = n
		}
	}
	if m, ok := r.refs["main"]; ok {
		// A ref commit raced in the round: an append replayed on its stale
		// base may have reset main's retention (iceberg-go's commit sends
		// the ref as it read it: soak seed 1036 step 141).
		if old, had := h.refs["main"]; had && !refsToo && s.touched["refs:"+g.uuid] == 0 {
			// main moved by an append or icehold's own commit: its
			// retention is still what the last ref commit set.
			m.maxRefAge, m.maxSnapAge, m.minKeep = old.maxRefAge, old.maxSnapAge, old.minKeep
		}
		h.refs["main"] = m
	} else {
		delete(h.refs, "main")
	}
	if refsToo {
		for name := range h.refs {
			if _, ok := r.refs[name]; !ok {
				delete(h.refs, name)
			}
		}
		for name, ref := range r.refs {
			h.refs[name] = ref
		}
	}
	// Rows of main's head, when the model is sure of them.
	if m, ok := h.refs["main"]; ok && len(g.maybe) == 0 && !g.forged {
		if sn := h.snaps[m.snapshot]; sn != nil && sn.rows == nil {
			sn.rows = maps.Clone(g.rows)
		}
	}
	return nil
}

// refsLost: a sweep at now may have removed g's refs past their
// max-ref-age (the model set them; it takes the metadata's word for those).
func (s *Sim) refsExpirable(g *Gen, now time.Time) []string {
	if g.h == nil {
		return nil
	}
	var out []string
	for name, ref := range g.h.refs {
		sn := g.h.snaps[ref.snapshot]
		if name == "main" || ref.maxRefAge == nil || sn == nil {
			continue
		}
		if now.UnixMilli()-sn.ts > *ref.maxRefAge {
			out = append(out, name)
		}
	}
	return out
}

// mustExist lists the files g's history says must still exist: what every
// ref the model holds reaches (main's head, tags, branches), with the size
// recorded. Only under own, when own is not "".
func (g *Gen) mustExist(own string) map[string]int64 {
	out := map[string]int64{}
	if g.h == nil {
		return out
	}
	for _, ref := range g.h.refs {
		sn := g.h.snaps[ref.snapshot]
		if sn == nil {
			continue
		}
		for k := range sn.files {
			if own != "" && !strings.HasPrefix(k, own+"/") {
				continue
			}
			n, ok := g.h.sizes[k]
			if !ok {
				n = -1
			}
			out[k] = n
		}
	}
	return out
}

// checkHistory holds each generation that still owns its files against its
// history: the refs the model holds are in its metadata at the snapshots
// the model says, and every file they reach exists with its size.
// objs is the bucket's listing (key → size).
func (s *Sim) checkHistory(objs map[string]int64) error {
	for _, g := range s.m.gens {
		if g.forged || g.h == nil {
			continue
		}
		own := ""
		switch {
		case g.state == live || g.state == soft || g.state == unregistered:
		case g.state == released && !s.superseded(g):
			// Dropped without purge: its files stay, owned by nobody, until
			// another table takes its location (and may purge there).
			own, _ = keyOf(strings.TrimRight(g.location, "/"))
		default:
			continue
		}
		if g.state != released {
			r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
			if err != nil {
				return s.violatef("%s: its metadata %s cannot be read: %v", g, g.meta, err)
			}
			for name, ref := range g.h.refs {
				got, ok := r.refs[name]
				switch {
				case !ok:
					return s.violatef("%s: its %s %q (snapshot %d, set by the model) is gone from its metadata %s", g, ref.kind, name, ref.snapshot, g.meta)
				case got.snapshot != ref.snapshot:
					return s.violatef("%s: its %s %q is at snapshot %d, the model says %d", g, ref.kind, name, got.snapshot, ref.snapshot)
				case got.retention() != ref.retention():
					return s.violatef("%s: its %s %q keeps %s; the last ref commit set %s (icehold's own commits must leave a ref's retention as it is)", g, ref.kind, name, got.retention(), ref.retention())
				}
				if !slices.Contains(r.snaps, ref.snapshot) {
					return s.violatef("%s: snapshot %d, which its %s %q holds, is gone from its metadata", g, ref.snapshot, ref.kind, name)
				}
			}
		}
		var missing, changed []string
		for k, size := range g.mustExist(own) {
			got, ok := objs[k]
			switch {
			case !ok:
				missing = append(missing, k)
			case size >= 0 && got != size:
				changed = append(changed, fmt.Sprintf("%s (%d bytes, committed %d)", k, got, size))
			}
		}
		if len(missing) > 0 || len(changed) > 0 {
			slices.Sort(missing)
			slices.Sort(changed)
			return s.violatef("%s (legal hold %v): files its refs reach, by the model's own record, are gone (%d, e.g. %v) or changed (%d, e.g. %v)",
				g, g.legalHold, len(missing), missing[:min(3, len(missing))], len(changed), changed[:min(3, len(changed))])
		}
	}
	return nil
}

// superseded: a table made after g took a location overlapping g's (its
// purge, expiry and partition drops may then delete g's files there).
func (s *Sim) superseded(g *Gen) bool {
	took := 0 // when g took its location
	for _, t := range g.takes {
		if t.loc == g.location {
			took = t.at
		}
	}
	for _, o := range s.m.gens {
		if o == g {
			continue
		}
		for _, t := range o.takes {
			// An older table moved onto it after it took it counts too
			// (soak seed 1053 step 229: a set-location onto a released
			// table's location, its purge later).
			if (o.id > g.id || t.at > took) && overlaps(t.loc, g.location) {
				return true
			}
		}
	}
	return false
}

// checkRefRows scans every ref the model holds rows for (tags and
// branches, main included) and compares.
func (s *Sim) checkRefRows(g *Gen) error {
	if g.h == nil || g.forged || g.bulk {
		return nil
	}
	cat, _, err := s.w.client(s.ctx, admin)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(g.h.refs))
	for _, name := range names {
		ref := g.h.refs[name]
		sn := g.h.snaps[ref.snapshot]
		if name == "main" || sn == nil || sn.rows == nil {
			continue
		}
		tbl, err := cat.LoadTable(s.ctx, table.Identifier{g.ns, g.name})
		if err != nil {
			return s.violatef("%s (rows of %s %q): load: %v", g, ref.kind, name, err)
		}
		got, err := scanIDs(s, tbl.Scan(table.WithSnapshotID(ref.snapshot)))
		if err != nil {
			return s.violatef("%s: scan of its %s %q (snapshot %d): %v", g, ref.kind, name, ref.snapshot, err)
		}
		var lost, extra []int64
		for id := range sn.rows {
			if !got[id] {
				lost = append(lost, id)
			}
		}
		for id := range got {
			if _, ok := sn.rows[id]; !ok {
				extra = append(extra, id)
			}
		}
		if len(lost) > 0 || len(extra) > 0 {
			slices.Sort(lost)
			slices.Sort(extra)
			return s.violatef("%s: its %s %q (snapshot %d) scans %d rows; lost %v, unexpected %v", g, ref.kind, name, ref.snapshot, len(got), lost, extra)
		}
	}
	return nil
}

// mustExpire lists the snapshots of g's record that an expiry at now must
// remove, by Iceberg's rules applied to the model's own record (the
// refs it holds, each snapshot's timestamp and parent as first recorded),
// with the default history.expire.* properties (the simulation sets
// none): a ref past its max-ref-age keeps nothing; any other keeps its
// snapshot, a branch its min-snapshots-to-keep newest ancestors; every
// snapshot younger than max-snapshot-age stays. drop: main's head after
// the sweep's partition drop committed (its parent is main's head
// before), or 0.
func (g *Gen) mustExpire(now time.Time, drop int64) []int64 {
	keep := g.mustKeep(now, drop)
	if keep == nil {
		return nil
	}
	nowMs := now.UnixMilli()
	var out []int64
	for id, sn := range g.h.snaps {
		if !keep[id] && nowMs-sn.ts > table.MaxSnapshotAgeMsDefault {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// mustKeep: the snapshots of g's record a ref keeps at now (its head, a
// branch's min-snapshots-to-keep newest ancestors: the table's own
// history.expire.min-snapshots-to-keep when the model set one); an
// expiry must leave every one of them, whatever its age.
func (g *Gen) mustKeep(now time.Time, drop int64) map[int64]bool {
	if g.h == nil {
		return nil
	}
	nowMs := now.UnixMilli()
	minKeep := cmp.Or(g.minKeep, table.MinSnapshotsToKeepDefault)
	keep := map[int64]bool{}
	for name, ref := range g.h.refs {
		head := g.h.snaps[ref.snapshot]
		if head == nil {
			continue
		}
		if name != "main" && ref.maxRefAge != nil && nowMs-head.ts > *ref.maxRefAge {
			continue // the sweep removes the ref
		}
		chain := []int64{ref.snapshot}
		if ref.kind == "branch" {
			// The ancestry ends at a parent a client's commit removed
			// (soak seed 1069 step 122: main kept every ancestor for ten
			// years, and the sweep expired those past the gap).
			for sn := head; sn.parent != 0 && g.h.snaps[sn.parent] != nil && !g.h.removed[sn.parent] && !slices.Contains(chain, sn.parent); sn = g.h.snaps[sn.parent] {
				chain = append(chain, sn.parent)
			}
		}
		if name == "main" && drop != 0 {
			chain = append([]int64{drop}, chain...)
		}
		n := 1
		if ref.kind == "branch" {
			n = cmp.Or(deref(ref.minKeep), minKeep)
		}
		for i, id := range chain {
			// A branch's own max snapshot age keeps every ancestor younger
			// (the simulation sets one far from every snapshot's age).
			if i < n || ref.kind == "branch" && ref.maxSnapAge != nil && g.h.snaps[id] != nil && nowMs-g.h.snaps[id].ts < *ref.maxSnapAge {
				keep[id] = true
			}
		}
	}
	return keep
}

// deref: *p, or the zero value for nil.
func deref[T any](p *T) (v T) {
	if p != nil {
		v = *p
	}
	return v
}
