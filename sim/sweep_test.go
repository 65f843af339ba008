package sim

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/local/server"
)

// The storage sweep (docs/design/storagesweep.md): on an inventory report
// of the bucket, it deletes what no table needs. The model says what that
// is without asking the sweep: under the location of a live table with no
// legal hold, a latest version its current metadata does not reach (and
// that is no metadata file) older than the orphan window is an orphan: the
// sweep must delete it, with every older version of its key; a version
// noncurrent for longer than the version window (since the next newer one
// was written) must go too. Nothing else may go: not a file a retained
// snapshot reaches, nor a recent one (an engine may be about to commit
// it), nor a version repair may still restore from, nor anything of a
// held, soft-deleted or unregistered table, nor what lies under no table's
// claim. The bucket stamps on the simulated clock (world_test.go); the
// windows are the catalog's as the model last set them.
const (
	// The windows' defaults (storage-sweep.orphan-window P3D,
	// storage.version-window P7D); the simulation sets others
	// (sweepWindows).
	defaultOrphanWindow  = 72 * time.Hour
	defaultVersionWindow = 168 * time.Hour
	// windowSlack: how near a window's end the model says nothing (the
	// clock jumps by whole hours: an object can be exactly as old).
	windowSlack = time.Minute
)

// nothingWent: every version of preV (every key's, as listed) is still there.
func (s *Sim) nothingWent(preV map[string][]objVersion, what string) error {
	post, err := s.w.allVersions(s.ctx)
	if err != nil {
		return err
	}
	var gone []string
	for k, vs := range preV {
		for _, v := range vs {
			if !slices.ContainsFunc(post[k], func(p objVersion) bool { return p.id == v.id }) {
				gone = append(gone, k+" version "+v.id+" ("+s.whose(k)+")")
			}
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		return s.violatef("%s deleted %d objects or versions, e.g. %s", what, len(gone), strings.Join(gone[:min(3, len(gone))], ", "))
	}
	return nil
}

// storageSweep writes an inventory report now and runs the storage sweep on
// it, then checks what it deleted against the model. held: tables under a
// legal hold the rest of the model does not know (a scope hold set for the
// barrier), whose files must all stay.
func (s *Sim) storageSweep(held map[*Gen]bool) error { return s.storageSweepOf(held, nil, false) }

// storageSweepOf: api, the sweep an operator starts through the lifecycle
// API (POST …/storage-sweep), of the catalog or, only not nil, of that one
// table: then only what lies under its location may and must go.
func (s *Sim) storageSweepOf(held map[*Gen]bool, only *Gen, api bool) error {
	if err := s.drain(); err != nil { // no job in flight: nothing busy
		return err
	}
	pre, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	preV, err := s.w.allVersions(s.ctx)
	if err != nil {
		return err
	}
	cut := s.w.clock.Now()
	orphanWindow := s.window("storage-sweep.orphan-window", defaultOrphanWindow)
	versionWindow := s.window("storage.version-window", defaultVersionWindow)
	// age: how long ago a key's i-th version was written (i 0: the latest)
	// or, for an older one, became noncurrent; unknown for a key with
	// delete markers (their order among its versions is not listed).
	age := func(k string, i int) (time.Duration, bool) {
		vs := preV[k]
		if i >= len(vs) || slices.ContainsFunc(vs, func(v objVersion) bool { return v.marker }) {
			return 0, false
		}
		if i == 0 {
			return cut.Sub(vs[0].modified), true
		}
		return cut.Sub(vs[i-1].modified), true
	}
	// may: what the sweep may delete; must: what it must (the current
	// location's orphans: an old location is let go on its own terms);
	// vmay, vmust: the same for keys' noncurrent versions.
	may, must := map[string]bool{}, map[string]bool{}
	vmay, vmust := map[string]bool{}, map[string]bool{}
	// Who reaches what: the sweep keeps a file any table's retained
	// snapshot reaches, so one table's orphan is not one when another
	// table's metadata borrows its manifests (a forged register: soak seed
	// 1071 step 143).
	reachedBy := map[string][]*Gen{}
	for _, o := range s.m.inState(live, soft, purging, unregistered) {
		if o.meta == "" {
			continue
		}
		if r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, o.meta); err == nil {
			for k := range r.keys {
				reachedBy[k] = append(reachedBy[k], o)
			}
		}
	}
	elsewhere := func(g *Gen, k string) bool {
		return slices.ContainsFunc(reachedBy[k], func(o *Gen) bool { return o != g })
	}
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
			for k := range preV {
				if !strings.HasPrefix(k, p+"/") {
					continue
				}
				// A hold the model is unsure of (a raced change): the
				// sweep may delete, need not.
				sure := i == 0 && !g.forged && !g.holdUnsure && !s.sharedPrefix(g, k)
				vmay[k] = true
				vmust[k] = vmust[k] || sure
				if _, latest := pre[k]; !latest || r.keys[k] || metadataFile(k) {
					continue
				}
				a, known := age(k, 0)
				if known && a < orphanWindow-windowSlack {
					continue // recent: kept
				}
				may[k] = true
				// A file a snapshot once named may still be named by a
				// DELETED entry of a retained manifest, which the sweep
				// keeps (entries of any status): only files no commit
				// ever named, and no entry names now, must go (a
				// client's remove-snapshots takes a file out of the
				// history while a later manifest's DELETED entry still
				// names it: soak seed 1025 step 112).
				if sure && known && a > orphanWindow+windowSlack && (g.h == nil || !g.h.reached[k]) && !r.named[k] && !elsewhere(g, k) {
					must[k] = true
				}
			}
		}
	}
	if only != nil {
		// Its current location must be swept; what it owns elsewhere (an
		// old location) may be; nothing else may.
		under := func(locs ...string) func(string, bool) bool {
			return func(k string, _ bool) bool {
				return !slices.ContainsFunc(locs, func(l string) bool {
					p, ok := keyOf(strings.TrimRight(l, "/"))
					return ok && strings.HasPrefix(k, p+"/")
				})
			}
		}
		mine := []string{only.location}
		for _, m := range only.metas {
			if i := strings.LastIndex(m, "/metadata/"); i > 0 {
				mine = append(mine, m[:i])
			}
		}
		maps.DeleteFunc(may, under(mine...))
		maps.DeleteFunc(vmay, under(mine...))
		maps.DeleteFunc(must, under(only.location))
		maps.DeleteFunc(vmust, under(only.location))
	}
	if _, err := s.w.srv.WriteInventory(s.ctx); err != nil {
		return s.violatef("inventory report: %v", err)
	}
	var out any
	switch {
	case api:
		path := "/lifecycle/v1/catalogs/" + catalogName + "/storage-sweep"
		if only != nil {
			path = lifecyclePath(only.ns, only.name) + "/storage-sweep"
		}
		// First a dry run on the same report: it classifies and counts,
		// and nothing may go, whatever it finds (held-out 9: a dry run
		// that deleted what the sweep would; drawn a third of the time,
		// it met no orphan within make sim's budget).
		if o := s.w.call(s.ctx, admin, "POST", path, map[string]any{"dry-run": true}); o.Status != 202 {
			return s.violatef("POST %s (a dry run): %s, want 202", path, o)
		}
		if err := s.drain(); err != nil {
			return err
		}
		if err := s.nothingWent(preV, "a dry run of the storage sweep"); err != nil {
			return err
		}
		var body any
		if s.chance(0.3) {
			// A dry run classifies and counts: nothing may go.
			body = map[string]any{"dry-run": true}
			for _, m := range []map[string]bool{may, must, vmay, vmust} {
				clear(m)
			}
			s.logf("   (a dry run)")
		}
		o := s.w.call(s.ctx, admin, "POST", path, body)
		if o.Status != 202 {
			return s.violatef("POST %s: %s, want 202", path, o)
		}
		out = o.Header.Get("Location")
	default:
		if out, err = s.w.srv.RunSchedule(s.ctx, server.ScheduleStorageSweep); err != nil {
			return s.violatef("storage sweep: %v", err)
		}
	}
	s.logf("   %+v; %d objects, %d orphans by the model", out, len(pre), len(must))
	if err := s.drain(); err != nil {
		return err
	}
	post, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	postV, err := s.w.allVersions(s.ctx)
	if err != nil {
		return err
	}
	var wrong, kept []string
	for k := range post {
		if _, was := pre[k]; !was {
			// A sweep only deletes: a key current after it and not before
			// is a delete marker taken off the versions behind it.
			wrong = append(wrong, k+" (current again: "+s.whose(k)+")")
		}
	}
	for k := range pre {
		_, there := post[k]
		switch {
		case !there && !may[k]:
			wrong = append(wrong, k+" ("+s.whose(k)+")")
		case there && must[k]:
			kept = append(kept, k+" ("+s.whose(k)+")")
		}
	}
	for k, vs := range preV {
		_, orphaned := pre[k]
		orphaned = orphaned && may[k]
		if _, there := post[k]; there {
			orphaned = false
		}
		for i := 1; i < len(vs); i++ {
			a, known := age(k, i)
			if !known {
				continue
			}
			there := slices.ContainsFunc(postV[k], func(v objVersion) bool { return v.id == vs[i].id })
			switch {
			case !there && !orphaned && (!vmay[k] || a < versionWindow-windowSlack):
				wrong = append(wrong, fmt.Sprintf("%s version %s, noncurrent for %v (%s)", k, vs[i].id, a, s.whose(k)))
			case there && vmust[k] && a > versionWindow+windowSlack && cut.Sub(firstAfter(vs, vs[i].modified)) > versionWindow+windowSlack:
				// (Versions of one instant have no order in an inventory
				// report: the sweep may keep one as if replaced by the
				// first write after it.)
				kept = append(kept, fmt.Sprintf("%s version %s, noncurrent for %v (%s)", k, vs[i].id, a, s.whose(k)))
			}
		}
	}
	if err := s.sweepCounted(out, preV, postV); err != nil {
		return err
	}
	slices.Sort(wrong)
	slices.Sort(kept)
	s.acted = len(post) < len(pre)
	switch {
	case len(wrong) > 0:
		return s.violatef("the storage sweep deleted %d objects or versions the model says someone needs (reached by a retained snapshot, a metadata file, within the orphan or version window, of a held, soft-deleted or unregistered table, or under no table's claim), e.g. %s",
			len(wrong), strings.Join(wrong[:min(3, len(wrong))], ", "))
	case len(kept) > 0:
		return s.violatef("the storage sweep left %d orphans or expired versions (under a live, unheld table, reached by no retained snapshot, past the orphan window; noncurrent past the version window), e.g. %s",
			len(kept), strings.Join(kept[:min(3, len(kept))], ", "))
	}
	return nil
}

// sweepCounted: a sweep run at rest deletes exactly what its jobs count
// as orphan or noncurrent-expired (held-out 10: a scope-held table's file
// counted an orphan and then kept by the delete step's own re-check, the
// job reporting a deletion that never happened). out: the run's jobs, or
// the Location of the one the API started.
func (s *Sim) sweepCounted(out any, preV, postV map[string][]objVersion) error {
	var ids []string
	switch o := out.(type) {
	case server.SweepRun:
		ids = o.Jobs
	case string:
		ids = []string{path.Base(o)}
	}
	jobs, err := s.allJobs()
	if err != nil {
		return err
	}
	var counted int64
	for _, id := range ids {
		i := slices.IndexFunc(jobs, func(j jobView) bool { return j.ID == id })
		if i < 0 || jobs[i].State != "SUCCEEDED" {
			return nil // another catalog's, or ended otherwise: not ours to count
		}
		sw, _ := jobs[i].Raw["storage-sweep"].(map[string]any)
		if dry, _ := sw["dry-run"].(bool); dry {
			continue
		}
		classes, _ := sw["classes"].(map[string]any)
		for _, c := range []string{"orphan", "noncurrent-expired"} {
			cv, _ := classes[c].(map[string]any)
			n, _ := cv["objects"].(float64)
			counted += int64(n)
		}
	}
	var gone int64
	for k, vs := range preV {
		for _, v := range vs {
			if !slices.ContainsFunc(postV[k], func(p objVersion) bool { return p.id == v.id }) {
				gone++
			}
		}
	}
	if counted != gone {
		return s.violatef("the storage sweep's jobs %v count %d objects or versions to delete (orphan, noncurrent-expired), and %d went", ids, counted, gone)
	}
	return nil
}

// firstAfter: the earliest time after t that one of vs was written (t when
// none was).
func firstAfter(vs []objVersion, t time.Time) time.Time {
	out := t
	for _, v := range vs {
		if v.modified.After(t) && (out.Equal(t) || v.modified.Before(out)) {
			out = v.modified
		}
	}
	return out
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
// (it crashed): no snapshot reaches it. Two times in three it crashed ten
// days ago (the bucket stamps the write then: an orphan), else just now (a
// recent file the sweep must keep: the engine may still commit it).
func (s *Sim) strayWrite(g *Gen) *barrier {
	back := 10 * 24 * time.Hour
	if s.chance(1.0 / 3) {
		back = 0
	}
	return s.strayWriteAt(g, back)
}

// strayWriteAt: the stray write, back ago.
func (s *Sim) strayWriteAt(g *Gen, back time.Duration) *barrier {
	return &barrier{kind: "stray-write", desc: fmt.Sprintf("an engine writes a file under %s %v ago and never commits it", g, back), run: func() error {
		p, ok := keyOf(strings.TrimRight(g.location, "/"))
		if !ok {
			return nil
		}
		s.m.nextID++
		at := s.w.clock.Now().Add(-back)
		key := fmt.Sprintf("%s/data/d=%s/stray-%d.parquet", p, at.Format("2006-01-02"), s.m.nextID)
		store := s.w.srv.S3Emulator.Store
		store.SetClock(func() time.Time { return at })
		_, err := s.w.s3.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("PAR1 never committed"))})
		store.SetClock(s.w.clock.Now)
		if err != nil {
			return s.violatef("stray write %s: %v", key, err)
		}
		s.logf("   wrote %s", key)
		return nil
	}}
}
