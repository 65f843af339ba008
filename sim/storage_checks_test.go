package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Storage checks (docs/design/simulation.md, "What the held-out set
// taught"). The warehouse bucket keeps versions, as a deployed one does
// (SPEC §2: the bucket enforces the lifecycle): a DeleteObjects by key only
// adds a delete marker, and the bytes stay as a noncurrent version. What
// icehold deletes (a purge's prefix, an expire job's files, the orphan
// sweep's) must leave nothing, versions and delete markers included; a
// listing of current objects cannot tell, so at rest the versions are
// listed.

// versionBucket turns the warehouse bucket's versioning on (once, before
// the first table).
func (w *World) versionBucket(ctx context.Context) error {
	_, err := w.s3.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}})
	if err != nil {
		return fmt.Errorf("turn the warehouse's versioning on: %w", err)
	}
	return nil
}

// versions lists every key of the warehouse with how many versions and
// delete markers it keeps (page by page: a bulk table alone passes 1,000).
func (w *World) versions(ctx context.Context) (map[string]int, error) {
	all, err := w.allVersions(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for k, vs := range all {
		out[k] = len(vs)
	}
	return out, nil
}

// objVersion is one version or delete marker of a key.
type objVersion struct {
	id       string
	marker   bool
	modified time.Time
}

// allVersions lists every version and delete marker of the warehouse, per
// key: its versions newest first (the order S3 lists them in), then its
// delete markers.
func (w *World) allVersions(ctx context.Context) (map[string][]objVersion, error) {
	out := map[string][]objVersion{}
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)}
	for {
		page, err := w.s3.ListObjectVersions(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list the warehouse's versions: %w", err)
		}
		for _, v := range page.Versions {
			k := aws.ToString(v.Key)
			out[k] = append(out[k], objVersion{id: aws.ToString(v.VersionId), modified: aws.ToTime(v.LastModified)})
		}
		for _, m := range page.DeleteMarkers {
			k := aws.ToString(m.Key)
			out[k] = append(out[k], objVersion{id: aws.ToString(m.VersionId), marker: true, modified: aws.ToTime(m.LastModified)})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.KeyMarker, in.VersionIdMarker = page.NextKeyMarker, page.NextVersionIdMarker
	}
}

// checkNothingDeletedLeft: at rest, every key the versions listing names
// still has a current object. Nothing but icehold deletes in the warehouse
// (a session's delete is refused), and every icehold delete leaves nothing:
// a key whose only remains are noncurrent versions or delete markers is a
// delete that left its bytes (a purge SUCCEEDED yet its prefix keeps them,
// an expire job's or the orphan sweep's file still recoverable). Prefixes
// left by design (tables released without purge, purges FAILED under an
// injected fault, old locations) are not held to it.
func (s *Sim) checkNothingDeletedLeft() error {
	vers, err := s.w.versions(s.ctx)
	if err != nil {
		return err
	}
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	var left []string
	for k, n := range vers {
		if _, ok := objs[k]; ok || s.leftByDesign(k) {
			continue
		}
		left = append(left, fmt.Sprintf("%s (%d versions and markers)", k, n))
	}
	if len(left) == 0 {
		return nil
	}
	slices.Sort(left)
	var whose []string
	for _, l := range left[:min(3, len(left))] {
		for _, g := range s.m.gens {
			if p, ok := keyOf(strings.TrimRight(g.location, "/")); ok && strings.HasPrefix(l, p+"/") {
				whose = append(whose, fmt.Sprintf("%s is under %s (%s)", strings.Fields(l)[0], g, g.state))
			}
		}
	}
	return s.violatef("%d deleted keys keep versions or delete markers at rest (every icehold delete leaves nothing, SPEC §2), e.g. %s\n%s",
		len(left), strings.Join(left[:min(3, len(left))], ", "), strings.Join(whose, "\n"))
}

// overwriteRepair: an engine overwrites a committed file of a live table
// (a data file or manifest of its current snapshot) with other bytes, as
// the static engine policy allows. The model knows the file changed: the
// table's verify must name it (ok false), its repair must restore it, and
// the table must then scan the rows it had (every committed byte is current
// or restored by repair: SPEC §2, the bucket enforces the lifecycle).
func (s *Sim) overwriteRepair() *barrier {
	var gs []*Gen
	for _, g := range s.m.inState(live) {
		if !g.forged && !g.bulk && !g.legalHold && !g.holdUnsure && g.meta != "" {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return &barrier{desc: "overwrite and repair: no live table", run: func() error { return nil }}
	}
	return s.overwriteRepairOf(pick(s, gs), 0)
}

// overwriteRepairOf: the overwrite and repair of a committed file of g
// (half the time its oldest: repair restores what the bucket has kept
// longest), then, when that file is older than the version window (or one
// time in three), a storage sweep at once: the versions the overwrite and
// the repair left are noncurrent since now, however old the file (the
// window counts from the replacement, SPEC §2). age > 0: between the
// overwrite and the repair the clock moves on by age and a storage sweep
// runs (the version the overwrite replaced is then age old: the sweep
// keeps it while age is within the version window, whatever the orphan
// window).
func (s *Sim) overwriteRepairOf(g *Gen, age time.Duration) *barrier {
	oldest := s.chance(0.5)
	sweepAnyway := s.chance(1.0 / 3)
	return &barrier{kind: "overwrite-repair", desc: "an engine overwrites a committed file of " + g.String() + ", then verify and repair", run: func() error {
		if g.state != live || g.legalHold || g.holdUnsure || g.meta == "" {
			s.logf("   %s: not a live unheld table now", g)
			return nil
		}
		r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
		if err != nil {
			return s.violatef("%s: %v", g, err)
		}
		var files []string
		for f := range r.snapFiles[r.current] {
			if _, sized := r.sizes[f]; sized {
				files = append(files, f)
			}
		}
		if len(files) == 0 {
			s.logf("   %s: no committed file to overwrite", g)
			return nil
		}
		slices.Sort(files)
		vers, err := s.w.allVersions(s.ctx)
		if err != nil {
			return err
		}
		written := func(k string) time.Time {
			if vs := vers[k]; len(vs) > 0 {
				return vs[0].modified
			}
			return s.w.clock.Now()
		}
		// The model's files are keys of the warehouse bucket; verify and
		// repair name them by path (s3://bucket/key): a key matches both.
		f := pick(s, files)
		if oldest {
			f = slices.MinFunc(files, func(a, b string) int { return written(a).Compare(written(b)) })
		}
		k := f
		old := s.w.clock.Now().Sub(written(k)) > s.window("storage.version-window", defaultVersionWindow)
		body := []byte("PAR1 overwritten by an engine")
		for int64(len(body)) == r.sizes[f] {
			body = append(body, '!')
		}
		if _, err := s.w.s3.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(body)}); err != nil {
			return fmt.Errorf("overwrite %s: %w", k, err)
		}
		s.fresh = nil
		s.acted = true
		s.logf("   overwrote %s (%d bytes recorded, %d written)", f, r.sizes[f], len(body))
		if age > 0 {
			s.w.clock.Advance(age)
			s.logf("   now %s, %v after the overwrite", s.w.clock.Now().Format(time.RFC3339), age)
			if err := s.storageSweep(nil); err != nil {
				return err
			}
			s.acted = true // the overwrite changed state, whatever the sweep did
		}
		path := lifecyclePath(g.ns, g.name)
		o := s.w.call(s.ctx, admin, "GET", path+"/verify", nil)
		if o.Status != 200 {
			return s.violatef("%s: verify after an overwrite: %s", g, o)
		}
		if ok, named := verifyNames(o.Body, f); ok || !named {
			return s.violatef("%s: %s was overwritten with other bytes, yet verify answers ok %v and names it %v: %s", g, f, ok, named, o.Body)
		}
		// The writer repairs (TABLE_WRITE); one whose grant lost it
		// (grants change under the actors) is refused, and admin repairs.
		p := writer
		if !s.may(writer, "TABLE_WRITE") {
			if o = s.w.call(s.ctx, writer, "POST", path+"/repair", map[string]any{}); o.Status != 403 {
				return s.violatef("%s: repair by %s without TABLE_WRITE: %s, want 403", g, writer, o)
			}
			p = admin
		}
		o = s.w.call(s.ctx, p, "POST", path+"/repair", map[string]any{})
		if o.Status != 200 {
			return s.violatef("%s: repair of the overwritten %s: %s", g, f, o)
		}
		if !strings.Contains(string(o.Body), f) {
			return s.violatef("%s: repair does not restore the overwritten %s: %s", g, f, o.Body)
		}
		o = s.w.call(s.ctx, admin, "GET", path+"/verify", nil)
		if _, named := verifyNames(o.Body, f); o.Status != 200 || named {
			return s.violatef("%s: verify after the repair still names %s: %s", g, f, o)
		}
		if err := s.checkRows(g, "after an overwrite and its repair"); err != nil {
			return err
		}
		if old || sweepAnyway {
			return s.storageSweep(nil)
		}
		return nil
	}}
}

// verifyNames: a verify report's ok, and whether its failed files-intact
// check names f (another check may name it for its own reason: a
// retention window an append since the last sweep overshot, soak seed
// 1055 step 296).
func verifyNames(body []byte, f string) (ok, named bool) {
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Name     string   `json:"name"`
			OK       bool     `json:"ok"`
			Detail   string   `json:"detail"`
			Examples []string `json:"examples"`
		} `json:"checks"`
	}
	if json.Unmarshal(body, &rep) != nil {
		return false, false
	}
	for _, c := range rep.Checks {
		if c.Name == "files-intact" && !c.OK && (strings.Contains(c.Detail, f) || slices.ContainsFunc(c.Examples, func(e string) bool { return strings.Contains(e, f) })) {
			named = true
		}
	}
	return rep.OK, named
}

// checkHeldFiles: no byte of a legal-held table is ever deleted while it is
// held (SPEC §4: a legal hold stops every deletion: purge, expiry, the
// sweeps). Each round the files the snapshots its metadata retains reach
// (its data, delete files, manifests and manifest lists; metadata files
// past the metadata log are the orphan sweep's) join what it keeps; every
// one must still be there while the hold lasts. Only files retained when
// the hold was on count: an expire job decided before the hold deletes
// files its commit had already let go.
func (s *Sim) checkHeldFiles(objs map[string]int64) error {
	for _, g := range s.m.gens {
		held := g.legalHold && !g.holdUnsure && (g.state == live || g.state == soft) && !g.forged && !s.superseded(g)
		if !held {
			g.heldKeep = nil
			continue
		}
		r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
		if err != nil {
			continue // unreadable metadata: checkHistory says so
		}
		var gone []string
		for k := range g.heldKeep {
			if _, ok := objs[k]; !ok {
				gone = append(gone, k)
			}
		}
		if len(gone) > 0 {
			slices.Sort(gone)
			return s.violatef("%s is legal-held, yet %d files its retained snapshots reached while held are deleted, e.g. %v", g, len(gone), gone[:min(3, len(gone))])
		}
		if g.heldKeep == nil {
			g.heldKeep = map[string]bool{}
		}
		for k := range r.keys {
			if _, ok := objs[k]; ok && !strings.HasSuffix(k, ".metadata.json") {
				g.heldKeep[k] = true
			}
		}
	}
	return nil
}

func init() {
	templates = append(templates, template{heldTmpl, tmplHeldRetention})
}

const heldTmpl = "held-retention-expiry"

// tmplHeldRetention: a legal-held table with older snapshots gets a
// retention policy, then the retention sweep runs (its snapshot expiry
// must leave a held table alone: checkHeldFiles), then the hold is lifted. Before the hold, its namespace is held and
// released (scopeHold). Then it is soft-dropped, held and released on its
// record, and must expire at its purge-at (the hold-expiry sweep past it).
func tmplHeldRetention(s *Sim, t *tmplRun) []step {
	do := func(f func(g *Gen) *Op) step {
		return func() *plan {
			if g := t.live("a"); g != nil {
				return ops(f(g))
			}
			return nil
		}
	}
	// record: admin sets (or clears) the legal hold of a's soft-deleted
	// record.
	record := func(on bool) step {
		return func() *plan {
			if sg := t.gens["soft"]; sg != nil && sg.state == soft {
				return ops(s.legalHoldRecordOf(sg, sg.uuid, admin, on))
			}
			return nil
		}
	}
	sweep := func() *plan {
		if g := t.live("a"); g != nil && g.legalHold {
			t.reached = true
		}
		return &plan{b: s.makeBarrier("retention-sweep")}
	}
	// storage: a storage sweep (while a is held, soft-deleted or free).
	storage := func() *plan { return &plan{b: s.makeBarrier("storage-sweep")} }
	return []step{
		func() *plan {
			ns, mk := s.ensureNS()
			return ops(mk, s.createAt(t, "a", ns, t.tbl(0), ""))
		},
		do(func(g *Gen) *Op { return s.opAppendTo(g, admin) }),
		do(func(g *Gen) *Op { return s.opAppendTo(g, admin) }),
		// A file an engine wrote under it and never committed: an orphan
		// only the storage sweep deletes, and only while nothing holds a.
		func() *plan {
			if g := t.live("a"); g != nil {
				return &plan{b: s.strayWrite(g)}
			}
			return nil
		},
		// Its namespace held (and released) before its own hold, a
		// storage sweep under the namespace's hold.
		func() *plan {
			if g := t.live("a"); g != nil {
				return &plan{b: s.scopeHoldOf(g, false, true)}
			}
			return nil
		},
		// Namespaces below its own: a parent with a child is not
		// dropped; a table two levels down is held by the parent's hold.
		func() *plan { return &plan{b: s.nestedNamespaces()} },
		do(func(g *Gen) *Op { return s.opSetLegalHoldProp(g, admin, true) }),
		storage,
		do(func(g *Gen) *Op { return s.retentionOp(g, "P1D") }),
		sweep,
		// Soft-dropped, held on its record, the hold cleared: it expires
		// at its purge-at as if it had never been held.
		func() *plan {
			if g := t.live("a"); g != nil {
				// Its policy read back (the random reads seldom find a
				// table with one: coverage).
				read := &Op{kind: "read-retention", desc: "admin reads the retention policy of " + g.String(), want: []int{200, 404},
					keys: append(tableKeys(g.ns, g.name), "policy:"+g.ns+"."+g.name)}
				path := lifecyclePath(g.ns, g.name) + "/partition-retention"
				read.run = func() Outcome { return s.w.call(s.ctx, admin, "GET", path, nil) }
				return ops(s.opSetLegalHoldProp(g, admin, false), s.catalogSetOp("soft-delete.enabled", "true"), read)
			}
			return nil
		},
		// Free now: the orphan must go; another, then the soft drop: it
		// must stay.
		storage,
		func() *plan {
			if g := t.live("a"); g != nil {
				return &plan{b: s.strayWrite(g)}
			}
			return nil
		},
		do(func(g *Gen) *Op {
			t.gens["soft"] = g
			return s.dropOp(g.ns, g.name, g, admin, false)
		}),
		storage,
		record(true), record(false),
		func() *plan {
			sg := t.gens["soft"]
			if sg == nil || sg.state != soft || sg.legalHold || sg.holdUnsure {
				return nil
			}
			// Past its purge-at in whole half hours (see jumps), unless
			// its hold period is too long for the clock.
			d := (sg.purgeAt.Sub(s.w.clock.Now())/(30*time.Minute) + 2) * 30 * time.Minute
			if d <= 0 || d > 2*365*24*time.Hour {
				return nil
			}
			return &plan{b: &barrier{kind: "clock", desc: fmt.Sprintf("clock +%v (past the purge-at of %s)", d, sg), run: func() error {
				s.w.clock.Advance(d)
				s.logf("   now %s", s.w.clock.Now().Format(time.RFC3339))
				return nil
			}}}
		},
		func() *plan { return &plan{b: s.makeBarrier("hold-expiry")} },
	}
}

// scopeHold: a legal hold on a namespace or on the whole catalog
// (icehold.legal-hold in its properties), set and lifted within the step
// (the rest of the model knows only table holds). Under it every table of
// the scope is held: a session vended to a principal who may write is
// read-only (its PutObject is refused), and only a principal holding
// TABLE_LEGAL_HOLD besides the scope's own privilege may lift it, whether
// by setting it false or by removing it (SPEC §4).
func (s *Sim) scopeHold() *barrier {
	var gs []*Gen
	for _, g := range s.m.inState(live) {
		if _, ok := s.m.namespaces[g.ns]; ok && !g.forged && !g.bulk {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return &barrier{desc: "scope legal hold: no live table", run: func() error { return nil }}
	}
	return s.scopeHoldOf(pick(s, gs), s.chance(0.4), s.chance(0.5))
}

// scopeHoldOf: the legal hold of g's namespace (or of the catalog); with
// sweep, a storage sweep runs under it (every table of the scope keeps
// every file).
func (s *Sim) scopeHoldOf(g *Gen, catalogWide, sweep bool) *barrier {
	scope, path, priv := "namespace "+g.ns, "/v1/"+catalogName+"/namespaces/"+url.PathEscape(g.ns)+"/properties", "NAMESPACE_CREATE"
	if catalogWide {
		scope, path, priv = "the catalog", "/lifecycle/v1/catalogs/"+catalogName+"/properties", "CATALOG_MANAGE"
	}
	return &barrier{kind: "scope-hold", desc: fmt.Sprintf("legal hold on %s, then a vended write to %s and lifts by every principal", scope, g), run: func() error {
		set := func(p string, body map[string]any) Outcome { return s.w.call(s.ctx, p, "POST", path, body) }
		on := map[string]any{"updates": map[string]string{"icehold.legal-hold": "true"}}
		if o := set(admin, on); o.Status != 200 {
			return s.violatef("admin sets the legal hold of %s: %s", scope, o)
		}
		s.acted = true
		lifted := false
		defer func() {
			if !lifted {
				set(admin, map[string]any{"removals": []string{"icehold.legal-hold"}})
			}
		}()
		if err := s.heldSessionReadOnly(g, scope); err != nil {
			return err
		}
		if sweep {
			// An engine's file under the held table, older than any
			// orphan window: unheld, the sweep would take it (held-out
			// 10: a sweep that read the table's own flag alone did).
			if err := s.strayWriteAt(g, 10*24*time.Hour).run(); err != nil {
				return err
			}
			held := map[*Gen]bool{}
			for _, o := range s.m.inState(live) {
				held[o] = catalogWide || o.ns == g.ns
			}
			if err := s.storageSweep(held); err != nil {
				return err
			}
			// The barrier did its part (held, refused, released) though a
			// sweep under a hold ends nothing.
			s.acted = true
		}
		lifts := []map[string]any{{"removals": []string{"icehold.legal-hold"}}, {"updates": map[string]string{"icehold.legal-hold": "false"}}}
		for _, p := range []string{writer, holder, reader} {
			if s.may(p, priv) && s.m.canLegalHold(p) {
				continue // may lift it: admin does below
			}
			for _, body := range lifts {
				if o := set(p, body); o.Status != 403 {
					return s.violatef("%s (without %s and TABLE_LEGAL_HOLD both) lifts the legal hold of %s with %v: %s, want 403", p, priv, scope, body, o)
				}
			}
		}
		lift := pick(s, lifts)
		o := set(admin, lift)
		if o.Status != 200 {
			return s.violatef("admin lifts the legal hold of %s: %s", scope, o)
		}
		lifted = true
		// The lift reads back: a removal or a false (a lift lost behind a
		// 200 holds every table of the scope).
		if catalogWide {
			_, removal := lift["removals"]
			if err := s.catalogAnswered(o, "icehold.legal-hold", "false", removal); err != nil {
				return err
			}
		} else {
			if _, removal := lift["removals"]; removal {
				// The answer names the key removed, as the namespace had it.
				var res struct {
					Removed []string `json:"removed"`
					Missing []string `json:"missing"`
				}
				if err := json.Unmarshal(o.Body, &res); err != nil || !slices.Equal(res.Removed, []string{"icehold.legal-hold"}) || len(res.Missing) > 0 {
					return s.violatef("namespace %s's legal hold removed: the answer says removed %v, missing %v, want removed [icehold.legal-hold]: %s", g.ns, res.Removed, res.Missing, o)
				}
			}
			o := s.w.call(s.ctx, admin, "GET", "/v1/"+catalogName+"/namespaces/"+url.PathEscape(g.ns), nil)
			var ns struct {
				Properties map[string]string `json:"properties"`
			}
			if err := json.Unmarshal(o.Body, &ns); o.Status != 200 || err != nil || held(ns.Properties["icehold.legal-hold"]) {
				return s.violatef("namespace %s read after its legal hold was lifted (%v): %s", g.ns, lift, o)
			}
		}
		s.logf("   %s held and released", scope)
		return nil
	}}
}

// heldSessionReadOnly: a session vended for g while its scope is held does
// not write, whoever asks.
func (s *Sim) heldSessionReadOnly(g *Gen, scope string) error {
	p := writer
	if !s.may(p, "TABLE_WRITE") || !s.may(p, "TABLE_READ") {
		return nil
	}
	// Both ways an engine gets keys: the load, and the refresh endpoint
	// (client.refresh-credentials-endpoint) a long job calls later; and
	// the load again with the namespace's reads refused (a throttle past
	// the retries): an unread hold counts as held (held-out 13: one that
	// counted as none vended write credentials).
	for _, via := range []struct {
		what, path string
		refused    bool
	}{
		{"loads " + g.String() + " with vended credentials", tablePath(g.ns, g.name), false},
		{"refreshes the credentials of " + g.String(), tablePath(g.ns, g.name) + "/credentials", false},
		{"loads " + g.String() + " with vended credentials, its namespace's reads refused,", tablePath(g.ns, g.name), true},
	} {
		if via.refused {
			s.w.refuse.Store(&refusal{prefix: "NS#", reads: true})
		}
		o := s.w.call(s.ctx, p, "GET", via.path, nil, delegation, "vended-credentials")
		if via.refused {
			s.w.refuse.Store(nil)
			if o.Status >= 500 {
				continue // it could not tell, and said so
			}
		}
		if o.Status != 200 {
			return s.violatef("%s %s under the legal hold of %s: %s", p, via.what, scope, o)
		}
		var res struct {
			Creds []struct {
				Config map[string]string `json:"config"`
			} `json:"storage-credentials"`
		}
		if err := json.Unmarshal(o.Body, &res); err != nil || len(res.Creds) != 1 {
			continue // no session to hold to it (a location no policy covers)
		}
		b, k := bucketKey(g.location)
		s.m.nextRow++
		key := fmt.Sprintf("%s/data/held-probe-%d.parquet", k, s.m.nextRow)
		se := &session{g: g, principal: p, cfg: res.Creds[0].Config}
		_, err := s.sessionS3(se).PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(key), Body: bytes.NewReader([]byte("PAR1 under a hold"))})
		if st := s3Status(err); st.Status != 403 {
			return s.violatef("%s %s under the legal hold of %s, and its session writes %s: %s, want 403 (a held table's sessions are read-only)", p, via.what, scope, key, st)
		}
	}
	return nil
}

// catalogSetOp: admin sets one of the catalog's properties.
func (s *Sim) catalogSetOp(key, v string) *Op {
	return s.catalogPropsOp(fmt.Sprintf("admin sets the catalog's %s=%s", key, v), map[string]any{"updates": map[string]string{key: v}}, key, v)
}

// catalogPropsOp: admin posts body to the catalog's properties; accepted,
// the catalog's key is v ("": removed).
func (s *Sim) catalogPropsOp(desc string, body any, key, v string) *Op {
	op := &Op{desc: desc, keys: []string{"props"}, want: []int{200}}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", "/lifecycle/v1/catalogs/"+catalogName+"/properties", body)
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		if v == "" {
			delete(s.m.catProps, key)
		} else {
			s.m.catProps[key] = v
		}
		if contended {
			return nil
		}
		return s.catalogAnswered(o, key, v, v == "")
	}
	return op
}

// catalogAnswered: a catalog properties answer shows what its request
// wrote: key as v, or (gone) not at all (held-out 9: removals lost while
// the answer said 200).
func (s *Sim) catalogAnswered(o Outcome, key, v string, gone bool) error {
	var c struct {
		Properties map[string]string `json:"properties"`
	}
	if err := json.Unmarshal(o.Body, &c); err != nil {
		return s.violatef("catalog properties answer: %v: %s", err, o)
	}
	got, has := c.Properties[key]
	same := got == v
	if want, ok := parseHold(v); ok {
		// A duration is stored as the API answers durations (1d: P1D).
		d, ok := parseHold(got)
		same = ok && d == want
	}
	switch {
	case gone && has:
		return s.violatef("the catalog's %s was removed (200), and the answer still carries %q: %s", key, got, o)
	case !gone && !same:
		return s.violatef("the catalog's %s was set to %q (200), and the answer carries %q: %s", key, v, got, o)
	}
	return nil
}
