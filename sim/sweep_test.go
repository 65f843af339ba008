package sim

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/local/server"
)

// The storage sweep (docs/design/storagesweep.md): on an inventory report
// of the bucket, it deletes what no table needs. The model says what that
// is without asking the sweep: under the location of a live table with no
// legal hold, a latest version its current metadata does not reach (and
// that is no metadata file) is an orphan: the sweep must delete it. Nothing
// else may go: not a file a retained snapshot reaches, nor anything of a
// held, soft-deleted or unregistered table, nor what lies under no
// table's claim. (The simulated clock runs a month ahead of the stamps on
// the objects, so every object is past the orphan window.)

// storageSweep writes an inventory report now and runs the storage sweep on
// it, then checks what it deleted against the model. held: tables under a
// legal hold the rest of the model does not know (a scope hold set for the
// barrier), whose files must all stay.
func (s *Sim) storageSweep(held map[*Gen]bool) error {
	if err := s.drain(); err != nil { // no job in flight: nothing busy
		return err
	}
	pre, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	// may: what the sweep may delete; must: what it must (the current
	// location's orphans: an old location is let go on its own terms).
	may, must := map[string]bool{}, map[string]bool{}
	for _, g := range s.m.inState(live) {
		if g.legalHold || held[g] || g.meta == "" {
			continue
		}
		r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
		if err != nil {
			s.logf("   %s: its metadata is unreadable (%v): the sweep must keep its files", g, err)
			continue
		}
		prefixes := []string{g.location}
		for _, m := range g.metas {
			if i := strings.LastIndex(m, "/metadata/"); i > 0 {
				prefixes = append(prefixes, m[:i])
			}
		}
		for i, loc := range prefixes {
			p, ok := keyOf(strings.TrimRight(loc, "/"))
			if !ok {
				continue
			}
			for k := range pre {
				if strings.HasPrefix(k, p+"/") && !r.keys[k] && !metadataFile(k) {
					may[k] = true
					// A hold the model is unsure of (a raced change): the
					// sweep may delete, need not.
					// A file a snapshot once named may still be named by a
					// DELETED entry of a retained manifest, which the sweep
					// keeps (entries of any status): only files no commit
					// ever named, and no entry names now, must go (a
					// client's remove-snapshots takes a file out of the
					// history while a later manifest's DELETED entry still
					// names it: soak seed 1025 step 112).
					if i == 0 && !g.forged && !g.holdUnsure && (g.h == nil || !g.h.reached[k]) && !r.named[k] && !s.sharedPrefix(g, k) {
						must[k] = true
					}
				}
			}
		}
	}
	if _, err := s.w.srv.WriteInventory(s.ctx); err != nil {
		return s.violatef("inventory report: %v", err)
	}
	out, err := s.w.srv.RunSchedule(s.ctx, server.ScheduleStorageSweep)
	if err != nil {
		return s.violatef("storage sweep: %v", err)
	}
	s.logf("   %+v; %d objects, %d orphans by the model", out, len(pre), len(must))
	if err := s.drain(); err != nil {
		return err
	}
	post, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	var wrong, kept []string
	for k := range pre {
		_, there := post[k]
		switch {
		case !there && !may[k]:
			wrong = append(wrong, k+" ("+s.whose(k)+")")
		case there && must[k]:
			kept = append(kept, k+" ("+s.whose(k)+")")
		}
	}
	slices.Sort(wrong)
	slices.Sort(kept)
	s.acted = len(post) < len(pre)
	switch {
	case len(wrong) > 0:
		return s.violatef("the storage sweep deleted %d objects the model says someone needs (reached by a retained snapshot, a metadata file, of a held, soft-deleted or unregistered table, or under no table's claim), e.g. %s",
			len(wrong), strings.Join(wrong[:min(3, len(wrong))], ", "))
	case len(kept) > 0:
		return s.violatef("the storage sweep left %d orphans (under a live, unheld table, reached by no retained snapshot, past the orphan window), e.g. %s",
			len(kept), strings.Join(kept[:min(3, len(kept))], ", "))
	}
	return nil
}

// sharedPrefix: k is also under another generation's location that still
// owns it (a registered copy, a nested claim the model cannot rule out).
func (s *Sim) sharedPrefix(g *Gen, k string) bool {
	for _, o := range s.m.inState(live, soft, purging, unregistered) {
		if o == g {
			continue
		}
		if p, ok := keyOf(strings.TrimRight(o.location, "/")); ok && strings.HasPrefix(k, p+"/") {
			return true
		}
	}
	return false
}

// whose names the generations whose location holds k (for a violation).
func (s *Sim) whose(k string) string {
	var out []string
	for _, g := range s.m.gens {
		if p, ok := keyOf(strings.TrimRight(g.location, "/")); ok && strings.HasPrefix(k, p+"/") {
			out = append(out, fmt.Sprintf("%s %s hold=%v", g, g.state, g.legalHold))
		}
	}
	if len(out) == 0 {
		return "under no table the model knows"
	}
	return strings.Join(out, "; ")
}

// metadataFile: a table metadata file (the sweep keeps every one).
func metadataFile(k string) bool {
	base := k[strings.LastIndexByte(k, '/')+1:]
	return strings.HasSuffix(base, ".metadata.json") || strings.HasSuffix(base, ".metadata.json.gz") ||
		strings.HasSuffix(base, ".gz.metadata.json") || base == "version-hint.text"
}

// strayWrite: an engine writes a data file under g and never commits it
// (it crashed): no snapshot reaches it.
func (s *Sim) strayWrite(g *Gen) *barrier {
	return &barrier{kind: "stray-write", desc: "an engine writes a file under " + g.String() + " and never commits it", run: func() error {
		p, ok := keyOf(strings.TrimRight(g.location, "/"))
		if !ok {
			return nil
		}
		s.m.nextID++
		key := fmt.Sprintf("%s/data/d=%s/stray-%d.parquet", p, s.w.clock.Now().Format("2006-01-02"), s.m.nextID)
		_, err := s.w.s3.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("PAR1 never committed"))})
		if err != nil {
			return s.violatef("stray write %s: %v", key, err)
		}
		s.logf("   wrote %s", key)
		return nil
	}}
}
