package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/icehold/icehold/local/emulators"
)

// Corners the random rounds never reach on their own (docs/design/simulation.md,
// "Corners"): each barrier builds its own sequence from the model's ops,
// runs it alone and checks what it is there for on the spot. They came from
// the sixth held-out set's survivors: a FAILED job's claims and the
// operator's retry and abandon, a purge of a table with gc.enabled=false, a
// keyed retry after a conflict cleared, a session vended after a move
// writing the old location, a namespace legal hold in one catalog of two
// with a namespace of the same name, and S3 throttling single keys of a
// purge's DeleteObjects.

// corners are run on a schedule of their own, not drawn among the barriers:
// each seed's barrier picks are fewer than the barrier kinds, and the
// corners in the tour left a weighted kind unreached (make sim's coverage).
var corners = []string{"failed-job", "gc-off", "keyed-retry", "moved-session", "two-catalogs", "listings", "lost-delivery", "authz", "held-drop", "prefix-names", "gc-off-expiry", "recovered-purge", "warehouse-scope", "racing-commits", "required-vending", "version-window", "two-generations", "plain-drop"}

// cornerEvery: one corner is due every so many steps (seven in make sim's
// 150: over six seeds, each starting three places after the last, each of
// the eighteen corners is due twice or more), in turn from a place the
// seed picks.
const cornerEvery = 20

// corner: the corner barrier due now, if one is (due at steps 10, 30, …;
// run at the first round from then that no template scripts).
func (s *Sim) corner() *barrier {
	for s.cornersRun < (s.step+cornerEvery/2)/cornerEvery {
		k := corners[(int(s.seed)*3+s.cornersRun)%len(corners)]
		s.cornersRun++
		if !s.without[k] {
			return s.makeBarrier(k)
		}
	}
	return nil
}

// runFor runs one op alone, judges and applies it, and returns its answer.
func (s *Sim) runFor(op *Op) (Outcome, error) {
	// As a round of one: what it touches alone, the bucket as it starts.
	s.touched = map[string]int{}
	for _, k := range dedupe(op.keys) {
		s.touched[k]++
	}
	var err error
	if s.pre, err = s.bucketNow(); err != nil {
		return Outcome{}, err
	}
	o := op.run()
	s.logf("   » %s -> %s", op.desc, o)
	if err := s.judge(op, o); err != nil {
		return o, err
	}
	if op.kind != "" {
		cover.add("op "+op.kind, o.ok()) // a kind's scripted op (purgeNowBy)
	}
	if op.after != nil {
		return o, op.after(o, false)
	}
	return o, nil
}

// freshTable creates a table of the barrier's own (prefix: its name's
// start) in an existing namespace, at loc ("" the default), and appends to
// it twice; nil when a step was refused (a grant, a name taken).
func (s *Sim) freshTable(prefix, loc string, props map[string]string) (*Gen, error) {
	ns, mk := s.ensureNS()
	if mk != nil {
		if o, err := s.runFor(mk); err != nil || !o.ok() {
			return nil, err
		}
	}
	if props == nil {
		props = map[string]string{"format-version": "2"}
	}
	s.m.nextID++
	name := fmt.Sprintf("%s%d", prefix, s.m.nextID)
	op := s.createOp(ns, name, admin, loc, props)
	if o, err := s.runFor(op); err != nil || o.Status != 200 {
		return nil, err
	}
	g := s.m.liveAt(ns, name)
	if g == nil {
		return nil, s.violatef("%s.%s created, and the model holds no live table there", ns, name)
	}
	for range 2 {
		if _, err := s.runFor(s.opAppendTo(g, admin)); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// keysUnder lists the bucket's current keys under a location.
func (s *Sim) keysUnder(loc string) (map[string]int64, error) {
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		return nil, err
	}
	prefix, _ := keyOf(strings.TrimRight(loc, "/"))
	out := map[string]int64{}
	for k, n := range objs {
		if strings.HasPrefix(k, prefix+"/") {
			out[k] = n
		}
	}
	return out, nil
}

// drainTo lets the pipeline come to rest and reads g's purge job, which
// must have ended in state want (why: the violation's reason).
func (s *Sim) drainTo(g *Gen, want, why string) (jobView, error) {
	if err := s.drain(); err != nil {
		return jobView{}, err
	}
	j, err := s.job(g.job)
	if err != nil {
		return j, err
	}
	if j.State != want {
		return j, s.violatef("%s: purge job %s ended %s, want %s (%s): %v", g, j.ID, j.State, want, why, j.Raw)
	}
	return j, nil
}

// --- a FAILED job: claims kept, retry, abandon ---

// failedJob: a table at an explicit location is dropped with purge while
// its metadata file cannot be read (a bad version put over it before the
// pipeline runs): its job must end FAILED and keep its claims (a create at
// the location is refused, naming it; no one without CATALOG_MANAGE may
// retry or abandon it). With the metadata back, the operator retries one
// such job (to SUCCEEDED, with S3 throttling two keys of its deletes: the
// counters stay exact) and abandons another (the claims go, every file
// stays, and a create there is accepted). Both, each time: the first
// retry of a job was drawn in half the runs, and a bug in it survived
// make sim (held-out 9).
func (s *Sim) failedJob() *barrier {
	return &barrier{kind: "failed-job", desc: "two purges that FAIL (their metadata unreadable), one retried, one abandoned", run: func() error {
		s.acted = false
		for _, retry := range []bool{true, false} {
			s.m.nextID++
			if err := s.failedJobAt(warehouse+fmt.Sprintf("/L/fj%d", s.m.nextID), retry); err != nil {
				return err
			}
		}
		return nil
	}}
}

// failedJobAt: a table at loc, its purge FAILED, then retried or
// abandoned (failedJob).
func (s *Sim) failedJobAt(loc string, retry bool) error {
	g, err := s.freshTable("fj", loc, nil)
	if err != nil || g == nil {
		return err
	}
	if o, err := s.runFor(s.dropOp(g.ns, g.name, g, admin, true)); err != nil || o.Status != 204 {
		return err
	}
	key, _ := keyOf(g.meta)
	put, err := s.w.s3.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("{ not metadata"))})
	if err != nil {
		return fmt.Errorf("spoil %s: %w", key, err)
	}
	before, err := s.keysUnder(g.location)
	if err != nil {
		return err
	}
	j, err := s.drainTo(g, "FAILED", "its metadata file is not one; SPEC §3: metadata unreadable is FAILED")
	if err != nil {
		return err
	}
	s.acted = true
	if claims, _ := j.Raw["claims"].([]any); len(claims) == 0 {
		return s.violatef("%s: its FAILED job %s keeps no claims (docs/operations.md: a FAILED job keeps them until retried or abandoned): %v", g, j.ID, j.Raw)
	}
	// teardown-check names it (deleting the stack would strand it).
	failedListed := func() (bool, error) {
		rep, err := s.w.srv.Catalog.Teardown(s.ctx)
		if err != nil {
			return false, s.violatef("teardown-check: %v", err)
		}
		return slices.ContainsFunc(rep.Failed, func(l string) bool { return strings.Contains(l, j.ID) }), nil
	}
	if listed, err := failedListed(); err != nil {
		return err
	} else if !listed {
		return s.violatef("%s: teardown-check does not name its FAILED job %s, which keeps its claims", g, j.ID)
	}
	jobPath := "/lifecycle/v1/catalogs/" + catalogName + "/purge-jobs/" + url.PathEscape(j.ID)
	probe := map[string]any{"name": "probe", "schema": json.RawMessage(schemaJSON), "location": loc}
	if o := s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces/"+url.PathEscape(g.ns)+"/tables", probe); o.Status != 409 {
		return s.violatef("%s: a create at %s while its FAILED job %s keeps the location: %s, want 409", g, loc, j.ID, o)
	}
	for _, p := range []string{writer, reader} {
		if s.may(p, "CATALOG_MANAGE") {
			continue
		}
		for _, v := range []string{"retry", "abandon"} {
			if o := s.w.call(s.ctx, p, "POST", jobPath+"/"+v, nil); o.Status != 403 {
				return s.violatef("%s (without CATALOG_MANAGE) %s FAILED job %s: %s, want 403", p, v, j.ID, o)
			}
		}
	}
	// The metadata back: the bad version removed by its id.
	if _, err := s.w.s3.DeleteObject(s.ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: put.VersionId}); err != nil {
		return fmt.Errorf("restore %s: %w", key, err)
	}
	if retry {
		if o := s.w.call(s.ctx, admin, "POST", jobPath+"/retry", nil); o.Status != 202 {
			return s.violatef("admin retries FAILED job %s: %s, want 202", j.ID, o)
		}
		// S3 throttles two keys of the retry's deletes: retried, each
		// counted once (checkCounters at the check).
		var n atomic.Int32
		s.afterHeal = func() {
			s.w.srv.S3Emulator.SetKeyFault(&emulators.KeyFault{Code: "SlowDown", Match: func(string) bool { return n.Add(1) <= 2 }})
		}
		j, err = s.drainTo(g, "SUCCEEDED", "retried with its metadata back")
		s.w.srv.S3Emulator.SetKeyFault(nil)
		if err != nil {
			return err
		}
		// The retry's own execution ran it: one attempt (a retry that
		// started under a name Step Functions already knew ran nothing,
		// and only a reconcile's restart did: held-out 9).
		if n, _ := num(j.Raw, "attempts"); n != 1 {
			return s.violatef("%s: job %s, retried and SUCCEEDED with nothing failing, took %v executions, want 1 (the retry's own)", g, j.ID, n)
		}
		s.logf("   %s: job %s retried to SUCCEEDED", g, j.ID)
		return nil // the check holds it to a purge's promises
	}
	o := s.w.call(s.ctx, admin, "POST", jobPath+"/abandon", nil)
	if o.Status != 200 {
		return s.violatef("admin abandons FAILED job %s: %s, want 200", j.ID, o)
	}
	if j, err = s.job(g.job); err != nil {
		return err
	}
	if claims, _ := j.Raw["claims"].([]any); j.State != "FAILED" || len(claims) > 0 {
		return s.violatef("%s: abandoned job %s is %s with claims %v, want FAILED with none", g, j.ID, j.State, j.Raw["claims"])
	}
	after, err := s.keysUnder(g.location)
	if err != nil {
		return err
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			return s.violatef("%s: abandoning job %s deleted %s (an abandon leaves every file)", g, j.ID, k)
		}
	}
	if listed, err := failedListed(); err != nil {
		return err
	} else if listed {
		return s.violatef("%s: teardown-check still names job %s, abandoned", g, j.ID)
	}
	g.state = released
	s.logf("   %s: job %s abandoned; its %d files stay, owned by nobody", g, j.ID, len(after))
	// Its location free again: a create there is accepted.
	if o, err := s.runFor(s.createOp(g.ns, "fjtaken"+fmt.Sprint(s.m.nextID), admin, loc, map[string]string{"format-version": "2"})); err != nil {
		return err
	} else if o.Status != 200 {
		return s.violatef("a create at %s after job %s was abandoned: %s, want 200 (its claims went)", loc, j.ID, o)
	}
	return nil
}

// --- gc.enabled=false ---

// gcOff: a table with gc.enabled=false is dropped with purge: its metadata
// layer goes and every data file stays (docs/spec.md §3; the final listing
// does not run: each data file would look unreferenced).
func (s *Sim) gcOff() *barrier {
	return &barrier{kind: "gc-off", desc: "a table with gc.enabled=false dropped with purge", run: func() error {
		s.acted = false
		g, err := s.freshTable("gc", "", map[string]string{"format-version": "2", "gc.enabled": s.spelled(false)})
		if err != nil || g == nil {
			return err
		}
		before, err := s.keysUnder(g.location)
		if err != nil {
			return err
		}
		if o, err := s.runFor(s.dropOp(g.ns, g.name, g, admin, true)); err != nil || o.Status != 204 {
			return err
		}
		j, err := s.drainTo(g, "SUCCEEDED", "gc.enabled=false")
		if err != nil {
			return err
		}
		s.acted = true
		after, err := s.keysUnder(g.location)
		if err != nil {
			return err
		}
		var lost, left []string
		for k := range before {
			_, ok := after[k]
			switch {
			case strings.Contains(k, "/data/") && !ok:
				lost = append(lost, k)
			case strings.Contains(k, "/metadata/") && ok:
				left = append(left, k)
			}
		}
		slices.Sort(lost)
		slices.Sort(left)
		if len(lost) > 0 {
			return s.violatef("%s (gc.enabled=false): its purge %s deleted %d data files, e.g. %v (only the metadata layer goes)", g, j.ID, len(lost), lost[:min(3, len(lost))])
		}
		if len(left) > 0 {
			return s.violatef("%s (gc.enabled=false): its purge %s SUCCEEDED and left %d metadata-layer files, e.g. %v", g, j.ID, len(left), left[:min(3, len(left))])
		}
		// Its data stays, owned by nobody; its metadata is gone.
		g.state = gone
		s.logf("   %s: metadata layer purged by %s, %d data files stay", g, j.ID, len(after))
		return nil
	}}
}

// --- a keyed retry after a conflict cleared ---

// keyedRetry: a create with an Idempotency-Key over a name a table holds is
// a 409; the table dropped, the same request with the same key runs for
// real (a conflict depends on the catalog's state: it is never replayed);
// sent again it replays the 200 word for word and creates nothing; the key
// with another body is a 422.
func (s *Sim) keyedRetry() *barrier {
	s.m.nextID++
	key := fmt.Sprintf("sim-key-%d-%d", s.seed, s.m.nextID)
	return &barrier{kind: "keyed-retry", desc: "a keyed create over a taken name, the name freed, the same key again", run: func() error {
		s.acted = false
		g, err := s.freshTable("kr", "", nil)
		if err != nil || g == nil {
			return err
		}
		ns, name := g.ns, g.name
		body := map[string]any{"name": name, "schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON)}
		path := "/v1/" + catalogName + "/namespaces/" + url.PathEscape(ns) + "/tables"
		keyed := func(b any) Outcome { return s.w.call(s.ctx, admin, "POST", path, b, "Idempotency-Key", key) }
		if o := keyed(body); o.Status != 409 {
			return s.violatef("a keyed create of %s.%s, which %s holds: %s, want 409", ns, name, g, o)
		}
		if o, err := s.runFor(s.dropOp(ns, name, g, admin, false)); err != nil || o.Status != 204 {
			return err
		}
		op := s.createOp(ns, name, admin, "", map[string]string{})
		op.desc = "admin retries the keyed create of " + ns + "." + name
		op.run = func() Outcome { return keyed(body) }
		first, err := s.runFor(op)
		if err != nil {
			return err
		}
		if first.Status != 200 {
			return s.violatef("a keyed create of %s.%s retried after the name was freed: %s, want 200 (a 409 is never replayed)", ns, name, first)
		}
		s.acted = true
		again := keyed(body)
		if again.Status != 200 || !bytes.Equal(again.Body, first.Body) {
			return s.violatef("the keyed create of %s.%s sent again: %s, want the first answer replayed (200, same body)", ns, name, again)
		}
		// Keys are each caller's own: another principal's request under
		// the same key runs for real (the name is taken now: a 409, or a
		// 403 without TABLE_CREATE), never replays admin's answer.
		if o := s.w.call(s.ctx, writer, "POST", path, body, "Idempotency-Key", key); o.Status == 200 {
			return s.violatef("%s sent admin's keyed create of %s.%s with admin's key and got its answer replayed: %s", writer, ns, name, o)
		}
		other := map[string]any{"name": name + "x", "schema": json.RawMessage(schemaJSON)}
		if o := keyed(other); o.Status != 422 {
			return s.violatef("key %s with another request: %s, want 422", key, o)
		}
		if s.m.liveAt(ns, name+"x") == nil {
			if o := s.w.call(s.ctx, admin, "HEAD", tablePath(ns, name+"x"), nil); o.Status != 404 {
				return s.violatef("a refused keyed create made %s.%s: HEAD %s", ns, name+"x", o)
			}
		}
		// The query string is part of the request: a keyed drop sent again
		// with ?purgeRequested=true is another request (a 422), never the
		// first one's 204 replayed over a purge that did not happen.
		g2 := s.m.liveAt(ns, name)
		if g2 == nil {
			return nil
		}
		dropKey := key + "-drop"
		drop := s.dropOp(ns, name, g2, admin, false)
		drop.run = func() Outcome {
			return s.w.call(s.ctx, admin, "DELETE", tablePath(ns, name), nil, "Idempotency-Key", dropKey)
		}
		if o, err := s.runFor(drop); err != nil || o.Status != 204 {
			return err
		}
		if o := s.w.call(s.ctx, admin, "DELETE", tablePath(ns, name)+"?purgeRequested=true", nil, "Idempotency-Key", dropKey); o.Status != 422 {
			return s.violatef("key %s of a drop of %s.%s, sent again with ?purgeRequested=true: %s, want 422", dropKey, ns, name, o)
		}
		// A replay repeats the handles the first answer gave: a drop with
		// purge retried after a lost answer still names its job.
		g3, err := s.freshTable("kp", "", nil)
		if err != nil || g3 == nil {
			return err
		}
		purgeKey := key + "-purge"
		keyedPurge := func() Outcome {
			return s.w.call(s.ctx, admin, "DELETE", tablePath(g3.ns, g3.name)+"?purgeRequested=true", nil, "Idempotency-Key", purgeKey)
		}
		purge := s.dropOp(g3.ns, g3.name, g3, admin, true)
		purge.run = keyedPurge
		first2, err := s.runFor(purge)
		if err != nil || first2.Status != 204 {
			return err
		}
		again2 := keyedPurge()
		if again2.Status != first2.Status || !bytes.Equal(again2.Body, first2.Body) {
			return s.violatef("the keyed drop with purge of %s sent again: %s, want the first answer %s replayed", g3, again2, first2)
		}
		for _, h := range []string{"Icehold-Purge-Job", "Location"} {
			if again2.Header.Get(h) != first2.Header.Get(h) {
				return s.violatef("the keyed drop with purge of %s sent again: header %s %q, the first answer's %q", g3, h, again2.Header.Get(h), first2.Header.Get(h))
			}
		}
		return nil
	}}
}

// --- a session vended after a move ---

// movedSession: a table moved to a new location keeps its old one read-only
// while its retained snapshots reach it; a session vended after the move
// reads the old files but writes neither beside them nor over them.
func (s *Sim) movedSession() *barrier {
	s.m.nextID++
	to := warehouse + fmt.Sprintf("/L/mv%d", s.m.nextID)
	return &barrier{kind: "moved-session", desc: "a table moved to " + to + ", a session vended after, its old location", run: func() error {
		s.acted = false
		g, err := s.freshTable("mv", "", nil)
		if err != nil || g == nil {
			return err
		}
		old := g.location
		if o, err := s.runFor(s.setLocationOf(g, to, true, false)); err != nil || o.Status != 200 {
			return err
		}
		// Verified now, the files its snapshots keep under the old
		// location are inside what it owns.
		if err := s.verifyAnswered(g, s.w.call(s.ctx, admin, "GET", lifecyclePath(g.ns, g.name)+"/verify", nil)); err != nil {
			return err
		}
		n := len(s.sessions)
		if o, err := s.runFor(s.engineLoadOf(g.ns, g.name, g, admin)); err != nil || o.Status != 200 {
			return err
		}
		if len(s.sessions) == n && (n == 0 || s.sessions[n-1].g != g) {
			return nil // no credentials for it (a location no policy can name)
		}
		se := s.sessions[len(s.sessions)-1]
		olds, err := s.keysUnder(old)
		if err != nil {
			return err
		}
		var data []string
		for k := range olds {
			if strings.Contains(k, "/data/") {
				data = append(data, k)
			}
		}
		if len(data) == 0 {
			return s.violatef("%s: no data file under its old location %s after two appends", g, old)
		}
		slices.Sort(data)
		s.acted = true
		b, _ := bucketKey(old)
		c := s.sessionS3(se)
		src := pick(s, data)
		if _, err := c.GetObject(s.ctx, &s3.GetObjectInput{Bucket: aws.String(b), Key: aws.String(src)}); err != nil {
			return s.violatef("%s: reads %s, a file its retained snapshots reach under its old location: %v, want it read", se, src, err)
		}
		oldKey, _ := keyOf(strings.TrimRight(old, "/"))
		for _, k := range []string{oldKey + "/data/engine-after-move.parquet", src} {
			_, err := c.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: bytes.NewReader([]byte("PAR1 after the move"))})
			if code := s3Code(err); code != "AccessDenied" {
				return s.violatef("%s (vended after %s moved to %s) writes %s under the old location: %q, want AccessDenied", se, g, to, k, code)
			}
		}
		// The same through the refresh endpoint.
		o := s.w.call(s.ctx, admin, "GET", tablePath(g.ns, g.name)+"/credentials", nil)
		var res struct {
			Creds []struct {
				Config map[string]string `json:"config"`
			} `json:"storage-credentials"`
		}
		if o.Status != 200 || json.Unmarshal(o.Body, &res) != nil || len(res.Creds) != 1 {
			return s.violatef("%s: its credentials refreshed after the move: %s, want one credential", g, o)
		}
		ref := &session{g: g, principal: admin, cfg: res.Creds[0].Config}
		k := oldKey + "/data/engine-refreshed.parquet"
		_, err = s.sessionS3(ref).PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: bytes.NewReader([]byte("PAR1 after the move"))})
		if code := s3Code(err); code != "AccessDenied" {
			return s.violatef("credentials of %s refreshed after its move to %s write %s under the old location: %q, want AccessDenied", g, to, k, code)
		}
		// Last, a drop with purge: its job owns the old location too, and
		// when it ends nothing a snapshot reached is left there
		// (checkOldLocations).
		_, err = s.runFor(s.dropOp(g.ns, g.name, g, admin, true))
		return err
	}}
}

// --- one namespace name, two catalogs ---

// twoCatalogs: two catalogs of the barrier's own, each with a namespace of
// the same name and a soft-deleted table in it; one namespace is under
// legal hold. The hold-expiry sweep past both purge-ats must end the free
// one and keep the held one (a hold is its catalog's: the same name
// elsewhere says nothing). The free one is dropped first, so the sweep
// reads its namespace first. Then the hold is lifted, the held one purged
// now, and both catalogs emptied.
func (s *Sim) twoCatalogs() *barrier {
	s.m.nextID++
	ns := fmt.Sprintf("tc%d", s.m.nextID)
	heldFirst := s.chance(0.5) // which catalog holds: its name sorts first or last
	return &barrier{kind: "two-catalogs", desc: "namespace " + ns + " in two catalogs, one under legal hold, then the hold-expiry sweep", run: func() error {
		s.acted = false
		cats := []string{"simx", "simy"}
		for _, c := range cats {
			if o := s.w.call(s.ctx, admin, "GET", "/lifecycle/v1/catalogs/"+c, nil); o.Status == 200 {
				continue
			}
			props := map[string]string{"soft-delete.enabled": "true", "soft-delete.hold-period": "PT1H"}
			if o := s.w.call(s.ctx, admin, "POST", "/lifecycle/v1/catalogs", map[string]any{"name": c, "warehouse": "s3://" + bucket + "/" + c, "properties": props}); o.Status != 201 {
				return s.violatef("create catalog %s: %s", c, o)
			}
		}
		held, free := cats[0], cats[1]
		if !heldFirst {
			held, free = free, held
		}
		call := func(want int, method, path string, body any) (Outcome, error) {
			o := s.w.call(s.ctx, admin, method, path, body)
			if o.Status != want {
				return o, s.violatef("two catalogs: %s %s: %s, want %d", method, path, o, want)
			}
			return o, nil
		}
		uuids := map[string]string{}
		locs := map[string]string{}
		// The free one first, then half an hour later the held one: the
		// sweep meets the free one's namespace first.
		for _, c := range []string{free, held} {
			nsPath := "/v1/" + c + "/namespaces/" + ns
			if _, err := call(200, "POST", "/v1/"+c+"/namespaces", map[string]any{"namespace": []string{ns}}); err != nil {
				return err
			}
			o, err := call(200, "POST", nsPath+"/tables", map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON)})
			if err != nil {
				return err
			}
			var res createResult
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return s.violatef("two catalogs: create answer: %v", err)
			}
			uuids[c], locs[c] = res.Metadata.UUID, res.Metadata.Location
			s.m.purgedApart[res.Metadata.UUID] = true
			if c == held {
				if _, err := call(200, "POST", nsPath+"/properties", map[string]any{"updates": map[string]string{"icehold.legal-hold": "true"}}); err != nil {
					return err
				}
			}
			if _, err := call(204, "DELETE", nsPath+"/tables/t", nil); err != nil {
				return err
			}
			s.w.clock.Advance(30 * time.Minute)
		}
		s.w.clock.Advance(90 * time.Minute) // past both purge-ats
		s.logf("   now %s", s.w.clock.Now().Format(time.RFC3339))
		if err := s.sweepHoldExpiry(); err != nil {
			return err
		}
		s.acted = true
		listed := func(c string) (bool, error) {
			o, err := call(200, "GET", "/lifecycle/v1/catalogs/"+c+"/soft-deleted-tables", nil)
			if err != nil {
				return false, err
			}
			return strings.Contains(string(o.Body), uuids[c]), nil
		}
		if ok, err := listed(held); err != nil {
			return err
		} else if !ok {
			return s.violatef("two catalogs: %s.%s.t, soft-deleted under its namespace's legal hold, was ended by the hold-expiry sweep (the same namespace of %s is not held)", held, ns, free)
		}
		if ok, err := listed(free); err != nil {
			return err
		} else if ok {
			return s.violatef("two catalogs: %s.%s.t is past its purge-at and under no hold, and the hold-expiry sweep kept it", free, ns)
		}
		// Lifted, the held one purged now; both catalogs left empty.
		if _, err := call(200, "POST", "/v1/"+held+"/namespaces/"+ns+"/properties", map[string]any{"removals": []string{"icehold.legal-hold"}}); err != nil {
			return err
		}
		if _, err := call(202, "POST", "/lifecycle/v1/catalogs/"+held+"/namespaces/"+ns+"/tables/t/purge-now", map[string]any{"table-uuid": uuids[held]}); err != nil {
			return err
		}
		if err := s.drain(); err != nil {
			return err
		}
		for _, c := range cats {
			if _, err := call(204, "DELETE", "/v1/"+c+"/namespaces/"+ns, nil); err != nil {
				return err
			}
			left, err := s.keysUnder(locs[c])
			if err != nil {
				return err
			}
			if len(left) > 0 {
				return s.violatef("two catalogs: %s's table at %s purged, %d objects left", c, locs[c], len(left))
			}
		}
		s.logf("   %s held in %s and not in %s: the sweep kept one and ended the other", ns, held, free)
		return nil
	}}
}

// --- listings filtered ---

// listings: at rest, each filter of the purge-job and soft-deleted
// listings (state, kind, namespace, table; kind, namespace) answers
// exactly the full listing's items that match it, page by page.
func (s *Sim) listings() *barrier {
	return &barrier{kind: "listings", desc: "the purge-job and soft-deleted listings, filtered, against the full ones", run: func() error {
		if err := s.drain(); err != nil {
			return err
		}
		type item = map[string]any
		list := func(path, field string) ([]item, error) {
			var out []item
			token := ""
			for {
				o := s.w.call(s.ctx, admin, "GET", s.paged(path, token), nil)
				if o.Status != 200 {
					return nil, s.violatef("GET %s: %s", path, o)
				}
				var res struct {
					Items []item  `json:"-"`
					Next  *string `json:"next-page-token"`
				}
				raw := map[string]json.RawMessage{}
				if err := json.Unmarshal(o.Body, &raw); err != nil {
					return nil, err
				}
				_ = json.Unmarshal(o.Body, &res)
				if err := json.Unmarshal(raw[field], &res.Items); err != nil {
					return nil, s.violatef("GET %s: no %q list: %s", path, field, o)
				}
				out = append(out, res.Items...)
				if res.Next == nil || *res.Next == "" {
					return out, nil
				}
				token = *res.Next
			}
		}
		ids := func(xs []item, id string, keep func(item) bool) []string {
			var out []string
			for _, x := range xs {
				if keep(x) {
					out = append(out, fmt.Sprint(x[id]))
				}
			}
			slices.Sort(out)
			return out
		}
		nsOf := func(x item) string {
			var levels []string
			if l, ok := x["namespace"].([]any); ok {
				for _, v := range l {
					levels = append(levels, fmt.Sprint(v))
				}
			}
			return strings.Join(levels, "\x1f")
		}
		type filter struct {
			query string
			keep  func(item) bool
		}
		compare := func(base, field, id string, filters []filter) error {
			all, err := list(base, field)
			if err != nil {
				return err
			}
			for _, f := range filters {
				got, err := list(base+"?"+f.query, field)
				if err != nil {
					return err
				}
				want := ids(all, id, f.keep)
				if have := ids(got, id, func(item) bool { return true }); !slices.Equal(have, want) {
					return s.violatef("GET %s?%s lists %d (%v), the full listing filtered %d (%v)", base, f.query, len(have), have[:min(4, len(have))], len(want), want[:min(4, len(want))])
				}
			}
			if len(all) > 0 {
				s.acted = true
			}
			return nil
		}
		base := "/lifecycle/v1/catalogs/" + catalogName
		var jobFilters []filter
		for _, st := range []string{"SUCCEEDED", "FAILED", "DEAD_LETTERED", "RUNNING"} {
			jobFilters = append(jobFilters, filter{"state=" + st, func(x item) bool { return x["state"] == st }})
		}
		for _, k := range []string{"purge", "expire", "sweep", "view"} {
			jobFilters = append(jobFilters, filter{"kind=" + k, func(x item) bool { return x["kind"] == k }})
		}
		for _, g := range s.m.gens {
			if g.job != "" && s.chance(0.2) {
				ns, name := g.ns, g.name
				jobFilters = append(jobFilters,
					filter{"namespace=" + url.QueryEscape(ns), func(x item) bool { return nsOf(x) == ns }},
					filter{"namespace=" + url.QueryEscape(ns) + "&table=" + url.QueryEscape(name), func(x item) bool { return nsOf(x) == ns && x["table"] == name }})
			}
		}
		if err := compare(base+"/purge-jobs", "jobs", "id", jobFilters); err != nil {
			return err
		}
		softFilters := []filter{
			{"kind=table", func(x item) bool { return x["kind"] == "table" }},
			{"kind=view", func(x item) bool { return x["kind"] == "view" }},
		}
		for ns := range s.m.namespaces {
			softFilters = append(softFilters, filter{"namespace=" + url.QueryEscape(ns), func(x item) bool { return nsOf(x) == ns }})
		}
		return compare(base+"/soft-deleted-tables", "tables", "table-uuid", softFilters)
	}}
}

// --- a delivery that dies without an answer ---

// lostDelivery: a table dropped with purge whose delete batch dies at every
// delivery without answering (a Lambda timeout, an out-of-memory kill):
// after its last receive SQS moves it to the DLQ, and the next reconcile,
// once that receive's lease has run out, must show it: the job
// DEAD_LETTERED with a dead batch and a PurgeDeadLettered event, and its
// table no longer recoverable by a register. Healed and redriven, it ends
// SUCCEEDED (the check holds it to a purge's promises). Then the same for
// a job that names its files (a table's storage sweep): redriven, it ends
// SUCCEEDED (held-out 11: such a job left DEAD_LETTERED once its redriven
// batch was done, to end FAILED keeping its claims).
func (s *Sim) lostDelivery() *barrier {
	return &barrier{kind: "lost-delivery", desc: "a purge, then a storage sweep, whose delete batch dies at every delivery without answering", run: func() error {
		s.acted = false
		g, err := s.freshTable("ld", "", nil)
		if err != nil || g == nil {
			return err
		}
		// Its first batch dies; the others (a manifest each) go on and
		// are done while it sits in the DLQ: the job must wait for it.
		s.crash.Store(&crashFault{point: "delete.start/0", every: true})
		defer s.crash.Store(nil)
		if o, err := s.runFor(s.dropOp(g.ns, g.name, g, admin, true)); err != nil || o.Status != 204 {
			return err
		}
		j, ok, err := s.deadLettered(g.String(), g.job)
		if err != nil || !ok {
			return err
		}
		evs, err := s.events()
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(evs, func(e eventLine) bool { return e.Type == "PurgeDeadLettered" && e.Detail.JobID == j.ID }) {
			return s.violatef("%s: job %s is DEAD_LETTERED and no PurgeDeadLettered event says so", g, j.ID)
		}
		// Its deletion started: a register of its own metadata is no
		// recovery now (the metadata is there: the batch died before
		// deleting anything).
		back := s.registerOf(g.ns, g.name, g, g.meta)
		back.want, back.why = []int{409}, "its job is DEAD_LETTERED: deletion started, so registering it back is a 409 (docs/design/purge.md, Tombstones)"
		if _, err := s.runFor(back); err != nil {
			return err
		}
		s.acted = true
		s.logf("   %s: job %s DEAD_LETTERED by reconcile, announced, not recoverable; healed and redriven", g, j.ID)
		s.crash.Store(nil)
		if err := s.drain(); err != nil {
			return err
		}
		return s.deadSweepBatch()
	}}
}

// deadLettered opens the pipeline until job id's batch, dying at every
// delivery, is in the DLQ, lets that receive's lease run out and
// reconciles: the job must be DEAD_LETTERED with a dead batch. ok false:
// the job ended first (it had no batch to delete).
func (s *Sim) deadLettered(what, id string) (jobView, bool, error) {
	s.w.gate.set(true)
	deadline := time.Now().Add(time.Minute)
	for {
		if n, err := s.w.srv.QueueDepth(s.ctx, true); err == nil && n > 0 {
			break
		}
		if j, err := s.job(id); err == nil && j.State != "PENDING" && j.State != "RUNNING" {
			s.w.gate.set(false)
			if j.State != "SUCCEEDED" {
				// Only a job with nothing to delete ends first, and it
				// succeeds; a dead batch keeps it waiting for its redrive.
				return j, false, s.violatef("%s: job %s, a batch dying at every delivery, ended %s before the batch reached the DLQ: %v", what, id, j.State, j.Raw)
			}
			s.logf("   %s: job %s ended %s before a batch died", what, id, j.State)
			return j, false, nil
		}
		if time.Now().After(deadline) {
			s.w.gate.set(false)
			return jobView{}, false, s.violatef("%s: job %s's delete batch, dying at every delivery, never reached the DLQ in a minute", what, id)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.w.gate.set(false)
	s.w.clock.Advance(time.Minute) // past the last receive's lease
	if _, err := s.w.srv.Purge.Reconcile(s.ctx); err != nil {
		return jobView{}, false, s.violatef("reconcile: %v", err)
	}
	j, err := s.job(id)
	if err != nil {
		return j, false, err
	}
	if dead, _ := num(j.Raw, "batches-dead"); j.State != "DEAD_LETTERED" || dead == 0 {
		return j, false, s.violatef("%s: its batch died at its last receive and sits in the DLQ; after a reconcile its job %s is %s with %d dead batches, want DEAD_LETTERED (docs/operations.md)", what, j.ID, j.State, dead)
	}
	// Reconcile keeps running on its schedule while the job waits for
	// its operator; the workflow's wait must outlast it (a dead batch is
	// not a done one: the job may not go on to finalize without it).
	for range 2 {
		s.w.clock.Advance(time.Minute)
		if _, err := s.w.srv.Purge.Reconcile(s.ctx); err != nil {
			return j, false, s.violatef("reconcile: %v", err)
		}
	}
	for range 40 {
		if j, err = s.job(id); err != nil {
			return j, false, err
		}
		if j.State != "DEAD_LETTERED" {
			return j, false, s.violatef("%s: job %s, DEAD_LETTERED with a dead batch in the DLQ, became %s under the reconcile schedule before any redrive: %v", what, id, j.State, j.Raw)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return j, true, nil
}

// deadSweepBatch: a table's storage sweep finds a stray file past the
// orphan window; its delete batch dies at every delivery until the job is
// DEAD_LETTERED; healed and redriven, the job ends SUCCEEDED and the
// stray is gone.
func (s *Sim) deadSweepBatch() error {
	g, err := s.freshTable("lds", "", nil)
	if err != nil || g == nil {
		return err
	}
	before, err := s.keysUnder(g.location)
	if err != nil {
		return err
	}
	// One committed data file written again (a repair's copy back, an
	// engine rewriting it byte for byte): its first version is
	// noncurrent, and past the version window the sweep takes it.
	var again string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if strings.Contains(k, "/data/") && strings.HasSuffix(k, ".parquet") {
			again = k
			break
		}
	}
	if again != "" {
		if err := s.rewrite(again); err != nil {
			return err
		}
		s.w.clock.Advance(s.window("storage.version-window", defaultVersionWindow) + time.Hour)
	}
	back := s.window("storage-sweep.orphan-window", defaultOrphanWindow) + 2*24*time.Hour
	if err := s.strayWriteAt(g, back).run(); err != nil {
		return err
	}
	if _, err := s.w.srv.WriteInventory(s.ctx); err != nil {
		return s.violatef("inventory report: %v", err)
	}
	s.crash.Store(&crashFault{point: "delete.start", every: true})
	defer s.crash.Store(nil)
	path := lifecyclePath(g.ns, g.name) + "/storage-sweep"
	o := s.w.call(s.ctx, admin, "POST", path, nil)
	if o.Status != 202 {
		return s.violatef("POST %s: %s, want 202", path, o)
	}
	loc := o.Header.Get("Location")
	id := loc[strings.LastIndex(loc, "/")+1:]
	what := g.String() + "'s storage sweep"
	if _, ok, err := s.deadLettered(what, id); err != nil || !ok {
		return err // no batch: a hold keeps its files
	}
	// Between the sweep's plan and its redriven batch the table may be
	// put under legal hold or dropped: the batch must look at its owner
	// again and delete none of its versions (noncurrent ones included).
	change := pick(s, []string{"", "legal hold", "drop"})
	var pre map[string][]objVersion
	if change != "" {
		op := s.opSetLegalHoldProp(g, admin, true)
		if change == "drop" {
			op = s.dropOp(g.ns, g.name, g, admin, false)
		}
		if o, err := s.runFor(op); err != nil || !o.ok() {
			return err
		}
		all, err := s.w.allVersions(s.ctx)
		if err != nil {
			return err
		}
		prefix, _ := keyOf(strings.TrimRight(g.location, "/"))
		pre = map[string][]objVersion{}
		for k, vs := range all {
			if strings.HasPrefix(k, prefix+"/") {
				pre[k] = vs
			}
		}
	}
	s.crash.Store(nil)
	if err := s.drain(); err != nil {
		return err
	}
	j, err := s.job(id)
	if err != nil {
		return err
	}
	if j.State != "SUCCEEDED" {
		return s.violatef("%s: job %s, its dead batch redriven, ended %s, want SUCCEEDED: %v", what, id, j.State, j.Raw)
	}
	if change != "" {
		if err := s.nothingWent(pre, fmt.Sprintf("%s: %s set before its dead batch was redriven", what, change)); err != nil {
			return err
		}
		s.logf("   %s: job %s DEAD_LETTERED, %s, redriven, SUCCEEDED; nothing of it went", what, id, change)
		return nil
	}
	if again != "" {
		vs, err := s.w.allVersions(s.ctx)
		if err != nil {
			return err
		}
		if len(vs[again]) != 1 {
			return s.violatef("%s: job %s SUCCEEDED and %s keeps %d versions; its first, noncurrent past the version window, should have gone", what, id, again, len(vs[again]))
		}
	}
	after, err := s.keysUnder(g.location)
	if err != nil {
		return err
	}
	for k := range after {
		if _, was := before[k]; !was {
			return s.violatef("%s: job %s SUCCEEDED and left the stray %s", what, id, k)
		}
	}
	s.logf("   %s: job %s DEAD_LETTERED, redriven, SUCCEEDED; the stray went", what, id)
	return nil
}

// --- teardown-check at rest ---

// checkTeardown: at rest, `icehold migrate teardown-check`'s report
// (docs/operations.md, Teardown) names what the model says a teardown would
// strand, and nothing else: no unfinished job; every soft-deleted table and
// view, under "legal-held" when its own hold is on; every unregistered
// table. (A FAILED job that keeps its claims: failedJob checks it.)
func (s *Sim) checkTeardown() error {
	rep, err := s.w.srv.Catalog.Teardown(s.ctx)
	if err != nil {
		return s.violatef("teardown-check: %v", err)
	}
	if len(rep.Jobs) > 0 {
		return s.violatef("teardown-check at rest lists unfinished jobs: %v", rep.Jobs)
	}
	// uuid → the report's list that names it (main catalog only).
	in := map[string]string{}
	for list, lines := range map[string][]string{"soft-deleted": rep.SoftDeleted, "legal-held": rep.Held, "unregistered": rep.Unregistered} {
		for _, l := range lines {
			if !strings.HasPrefix(l, catalogName+": ") {
				continue
			}
			if i := strings.Index(l, "(uuid "); i > 0 {
				in[l[i+6:i+6+36]] = list
			}
		}
	}
	want := map[string][]string{} // uuid → the lists the model allows
	for _, g := range s.m.gens {
		switch {
		case g.state == soft && g.holdUnsure:
			want[g.uuid] = []string{"soft-deleted", "legal-held"}
		case g.state == soft && g.legalHold:
			want[g.uuid] = []string{"legal-held"}
		case g.state == soft:
			want[g.uuid] = []string{"soft-deleted"}
		case g.state == unregistered:
			want[g.uuid] = []string{"unregistered"}
		}
	}
	for _, v := range s.m.viewsIn(soft) {
		want[v.uuid] = []string{"soft-deleted"}
		if v.legalHold {
			want[v.uuid] = []string{"legal-held"}
		}
	}
	for uuid, lists := range want {
		if !slices.Contains(lists, in[uuid]) {
			return s.violatef("teardown-check lists %s under %q, the model says %v", uuid, in[uuid], lists)
		}
	}
	for uuid, list := range in {
		if want[uuid] == nil {
			return s.violatef("teardown-check lists %s under %q, which the model holds as neither soft-deleted nor unregistered", uuid, list)
		}
	}
	return nil
}

// rewrite writes key again with its own bytes (a second version).
func (s *Sim) rewrite(key string) error {
	out, err := s.w.s3.GetObject(s.ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return s.violatef("read %s: %v", key, err)
	}
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		return s.violatef("read %s: %v", key, err)
	}
	if _, err := s.w.s3.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
		return s.violatef("write %s again: %v", key, err)
	}
	s.logf("   wrote %s again (its first version is noncurrent)", key)
	return nil
}
