package sim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The lifecycle API's reads, so that every operation of it is in the
// coverage table: the catalog, a grant, the unregistered tables (each one
// listed must be one the model unregistered), a table's verify report and
// partition retention, the soft-deleted listing and the purge jobs. Each
// must answer (never a 5xx); what they report is checked where the model
// knows it without trusting the answer.

func (s *Sim) opRead(kind string) *Op {
	base := "/lifecycle/v1/catalogs/" + catalogName
	op := &Op{want: []int{200}}
	var path string
	var vg *Gen // the table read-verify verifies
	switch kind {
	case "read-catalog":
		path = base
	case "read-grant":
		p := pick(s, []string{writer, holder, reader})
		path, op.keys = base+"/grants/"+url.PathEscape(p), []string{"grants"}
	case "read-soft-deleted":
		path = base + "/soft-deleted-tables"
	case "read-purge-jobs":
		path = base + "/purge-jobs"
	case "read-unregistered":
		path = base + "/unregistered-tables"
	case "read-verify", "read-retention":
		lives := s.m.inState(live)
		if len(lives) == 0 {
			return nil
		}
		g := pick(s, lives)
		vg = g
		if kind == "read-retention" {
			// Mostly a table with a policy: a 404 reads nothing (and
			// a read never answered 200 is a kind never covered).
			var held []*Gen
			for _, l := range lives {
				if p, ok := s.m.policies[l.ident()]; ok && p.uuid == l.uuid {
					held = append(held, l)
				}
			}
			if len(held) > 0 && s.chance(0.8) {
				g = pick(s, held)
			}
		}
		path = lifecyclePath(g.ns, g.name) + "/verify"
		if kind == "read-retention" {
			path = lifecyclePath(g.ns, g.name) + "/partition-retention"
			op.want = []int{200, 404} // 404: no policy set
		}
		op.keys = append(tableKeys(g.ns, g.name), "uuid:"+g.uuid, "policy:"+g.ns+"."+g.name)
	default:
		return nil
	}
	op.desc = "admin reads " + path
	op.run = func() Outcome { return s.w.call(s.ctx, admin, "GET", path, nil) }
	if kind == "read-verify" {
		op.after = func(o Outcome, contended bool) error {
			if o.Status != 200 || contended {
				return nil
			}
			return s.verifyAnswered(vg, o)
		}
	}
	if kind == "read-unregistered" {
		op.after = func(o Outcome, contended bool) error {
			if o.Status != 200 || contended {
				return nil
			}
			var res struct {
				Tables []struct {
					UUID string `json:"table-uuid"`
				} `json:"tables"`
			}
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return s.violatef("unregistered tables: %v", err)
			}
			for _, t := range res.Tables {
				known := false
				for _, g := range s.m.inState(unregistered, released) {
					known = known || g.uuid == t.UUID
				}
				if !known {
					return s.violatef("unregistered tables list %s, which the model never unregistered", t.UUID)
				}
			}
			s.logf("   %d unregistered", len(res.Tables))
			return nil
		}
	}
	return op
}

// opReadETag: an engine revalidates a table it loaded (If-None-Match, SPEC
// §2: the tag is derived from everything the answer depends on, the
// snapshots mode included). A tag of a snapshots=refs answer never
// revalidates a full load (the client would keep metadata missing every
// snapshot no ref points at); a full answer's own tag revalidates it (304)
// while its metadata has not moved.
func (s *Sim) opReadETag() *Op {
	lives := s.m.inState(live)
	if len(lives) == 0 {
		return nil
	}
	g := pick(s, lives)
	// Mostly a table with a ref besides main (a tag, a branch): a refs
	// answer of main alone shows little.
	var tagged []*Gen
	for _, l := range lives {
		if l.h != nil && len(l.h.refs) > 1 {
			tagged = append(tagged, l)
		}
	}
	if len(tagged) > 0 && s.chance(0.7) {
		g = pick(s, tagged)
	}
	return s.readETagOf(g)
}

// readETagOf: opReadETag of g.
func (s *Sim) readETagOf(g *Gen) *Op {
	path := tablePath(g.ns, g.name)
	var refs, full, again Outcome
	op := &Op{desc: fmt.Sprintf("admin loads %s with snapshots=refs, then revalidates full loads", g),
		keys: append(tableKeys(g.ns, g.name), "uuid:"+g.uuid), want: []int{200}}
	op.run = func() Outcome {
		refs = s.w.call(s.ctx, admin, "GET", path+"?snapshots=refs", nil)
		if refs.Status != 200 {
			return refs
		}
		full = s.w.call(s.ctx, admin, "GET", path, nil, "If-None-Match", refs.Header.Get("ETag"))
		if full.Status == 200 {
			again = s.w.call(s.ctx, admin, "GET", path, nil, "If-None-Match", full.Header.Get("ETag"))
		}
		return refs
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		if tag := refs.Header.Get("ETag"); tag == "" {
			return s.violatef("%s: a load answered without an ETag", g)
		}
		if contended && (full.Status == 404 || again.Status == 404) {
			// A drop of the same round landed between the loads (soak
			// seed 1026 step 112): nothing to revalidate.
			s.logf("   %s: dropped between its loads", g)
			return nil
		}
		if full.Status != 200 {
			return s.violatef("%s: a full load revalidated with the tag of a snapshots=refs answer: %s, want 200 (the tag covers the snapshots mode)", g, full)
		}
		if err := s.refsAnswered(g, refs, full); err != nil {
			return err
		}
		var a, b struct {
			Meta string `json:"metadata-location"`
		}
		_ = json.Unmarshal(full.Body, &a)
		switch {
		case again.Status == 304:
		case again.Status == 200 && json.Unmarshal(again.Body, &b) == nil && b.Meta != a.Meta:
			// A pipeline's commit (an expiry) moved it in between.
		default:
			return s.violatef("%s: a full load revalidated with its own tag: %s, want 304 (its metadata %s has not moved)", g, again, a.Meta)
		}
		return nil
	}
	return op
}

// verifyAnswered: what a verify report calls missing is a file a retained
// snapshot of the metadata it verified reads (its manifest list, a
// manifest, a live data or delete file), not one a DELETED entry names
// (held-out 10: every entry counted), and it is not in the bucket. And what
// it calls outside the table's location is (g: the table verified).
func (s *Sim) verifyAnswered(g *Gen, o Outcome) error {
	var rep struct {
		Meta   string `json:"metadata-location"`
		Checks []struct {
			Name     string   `json:"name"`
			OK       bool     `json:"ok"`
			Examples []string `json:"examples"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(o.Body, &rep); err != nil {
		return s.violatef("verify answer: %v: %s", err, o)
	}
	var named []string
	for _, c := range rep.Checks {
		if c.Name == "files-inside-location" && !c.OK && g != nil && !g.forged {
			// A file it calls outside is under no location the table
			// ever took (its own, or one a set-location left behind
			// while retained snapshots reach it).
			for _, e := range c.Examples {
				for _, t := range g.takes {
					if under(e, t.loc) {
						return s.violatef("verify of %s calls %s outside the table's locations, and %s took %s: %s", g, e, g, t.loc, o)
					}
				}
			}
		}
		if c.Name != "files-intact" || c.OK {
			continue
		}
		for _, e := range c.Examples {
			if p, ok := strings.CutSuffix(e, ": missing"); ok {
				named = append(named, strings.SplitN(p, " (", 2)[0])
			}
		}
	}
	if len(named) == 0 {
		return nil
	}
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, rep.Meta)
	if err != nil {
		return nil // unreadable: the metadata check says so
	}
	read := map[string]bool{}
	for _, files := range r.snapFiles {
		for k := range files {
			read[k] = true
		}
	}
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	for _, f := range named {
		k, ok := keyOf(f)
		if !ok {
			continue
		}
		if _, there := objs[k]; there {
			return s.violatef("verify of %s calls %s missing, and it is in the bucket: %s", rep.Meta, f, o)
		}
		if !read[k] {
			return s.violatef("verify of %s calls %s missing, which no retained snapshot reads (a DELETED entry, or no entry, names it): %s", rep.Meta, f, o)
		}
	}
	return nil
}

// refsAnswered: a snapshots=refs answer is the full answer's metadata with
// only the snapshots some ref points at (the REST spec's
// snapshot-loading-mode): every ref of the full answer is in it, every
// ref's snapshot is among its snapshots (a client refuses a ref to a
// snapshot it does not have, and a tag is read by time travel), and
// nothing else is. Judged only when both answers are of one metadata file.
func (s *Sim) refsAnswered(g *Gen, refs, full Outcome) error {
	type answer struct {
		Meta     string `json:"metadata-location"`
		Metadata struct {
			Refs map[string]struct {
				SnapshotID int64  `json:"snapshot-id"`
				Type       string `json:"type"`
			} `json:"refs"`
			Snapshots []struct {
				ID int64 `json:"snapshot-id"`
			} `json:"snapshots"`
		} `json:"metadata"`
	}
	var r, f answer
	if json.Unmarshal(refs.Body, &r) != nil || json.Unmarshal(full.Body, &f) != nil || r.Meta != f.Meta {
		return nil // moved in between (an expiry's commit)
	}
	have := map[int64]bool{}
	for _, sn := range r.Metadata.Snapshots {
		have[sn.ID] = true
	}
	pointed := map[int64]bool{}
	for name, ref := range f.Metadata.Refs {
		got, ok := r.Metadata.Refs[name]
		switch {
		case !ok || got != ref:
			return s.violatef("%s: a snapshots=refs answer has ref %s as %+v, the full answer as %+v", g, name, got, ref)
		case !have[ref.SnapshotID]:
			return s.violatef("%s: a snapshots=refs answer lacks snapshot %d, which its %s %s points at", g, ref.SnapshotID, ref.Type, name)
		}
		pointed[ref.SnapshotID] = true
	}
	for id := range have {
		if !pointed[id] {
			return s.violatef("%s: a snapshots=refs answer has snapshot %d, which no ref points at", g, id)
		}
	}
	if len(r.Metadata.Refs) != len(f.Metadata.Refs) {
		return s.violatef("%s: a snapshots=refs answer has %d refs, the full answer %d", g, len(r.Metadata.Refs), len(f.Metadata.Refs))
	}
	return nil
}

// opOrphanSweep: the orphan sweep's schedule fires while the actors'
// requests are under way (EventBridge keeps its own time): it runs as an
// actor of the round, its AWS calls interleaved with theirs, so it may
// read the intents between a commit's metadata write and its transaction.
// It may take only intents older than their lifetime; what it takes is
// deleted at the settle, and the model's checks say whether a table lost
// a file it reads.
func (s *Sim) opOrphanSweep() *Op {
	return s.orphanSweeps(1, false)
}

// orphanSweeps: the orphan sweep runs n times in a row (each a request,
// the other actors' calls between them). tick: the clock moves a second
// before each (the round's one instant is the simulation's simplification:
// in AWS a request's writes are older than a sweep that reads them a
// moment later, and only the intents' lifetime keeps them), and the
// orphans job of a sweep that took intents runs at once, while the other
// actors wait where they are: in AWS the pipeline does not wait for a
// commit between its metadata write and its transaction (between rounds,
// the commit it raced would have landed before the job's check).
func (s *Sim) orphanSweeps(n int, tick bool) *Op {
	op := &Op{kind: "orphan-sweep", desc: fmt.Sprintf("the orphan sweep's schedule runs %d times", n), want: []int{200}}
	took := 0
	var settled error
	op.run = func() Outcome {
		var o Outcome
		for range n {
			if tick {
				s.w.clock.Advance(time.Second)
			}
			if o = s.w.call(s.ctx, admin, "POST", "/local/v1/schedules/orphans/run", nil); o.Status != 200 {
				break
			}
			var rep struct {
				Report struct {
					Intents int `json:"intents"`
				} `json:"report"`
			}
			if json.Unmarshal(o.Body, &rep) == nil {
				took += rep.Report.Intents
			}
			if tick && rep.Report.Intents > 0 && settled == nil {
				// From a goroutine no actor plays: its calls do not park,
				// and the others stay where they are until it is done.
				done := make(chan error, 1)
				go func() { done <- s.settle() }()
				settled = <-done
				s.logf("   the orphans job of %d intents ran mid-round", rep.Report.Intents)
			}
		}
		return o
	}
	op.after = func(Outcome, bool) error {
		s.logf("   the sweeps took %d intents", took)
		return settled
	}
	return op
}

// under: path lies under location loc (as keys: schemes and trailing
// slashes spelled either way).
func under(path, loc string) bool {
	k, ok := keyOf(normLoc(path))
	l, ok2 := keyOf(normLoc(loc))
	return ok && ok2 && strings.HasPrefix(k, l+"/")
}
