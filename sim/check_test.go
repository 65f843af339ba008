package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/icehold/icehold/shared/purge"
)

// The checks after every round: observe what the catalog shows (live
// tables, soft-deleted records), hold it against the model, and require
// every object the model protects to exist.

type liveObs struct{ ns, name, uuid, meta string }

type softObs struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
	UUID      string   `json:"table-uuid"`
	Meta      string   `json:"metadata-location"`
	PurgeAt   string   `json:"purge-at"`
	Hold      string   `json:"hold-period"`
	LegalHold bool     `json:"legal-hold"`
	// PurgeOnExpiry: the catalog's setting when it was dropped.
	PurgeOnExpiry bool `json:"purge-on-expiry"`
}

func (o softObs) ident() string { return strings.Join(o.Namespace, ".") + "." + o.Name }

// paged: a listing's path with the page token and the seed's page size.
func (s *Sim) paged(path, token string) string {
	var q []string
	if s.pageSize > 0 {
		q = append(q, "pageSize="+strconv.Itoa(s.pageSize))
	}
	if token != "" {
		q = append(q, "pageToken="+url.QueryEscape(token))
	}
	if len(q) == 0 {
		return path
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + strings.Join(q, "&")
}

func (s *Sim) observe() ([]liveObs, []softObs, error) {
	var lives []liveObs
	// The pool's and those the corners made (prefix-names).
	all := slices.Clone(namespaces)
	for _, ns := range slices.Sorted(maps.Keys(s.m.namespaces)) {
		if !slices.Contains(all, ns) {
			all = append(all, ns)
		}
	}
	for _, ns := range all {
		token := ""
		for {
			path := s.paged("/v1/"+catalogName+"/namespaces/"+ns+"/tables", token)
			o := s.w.call(s.ctx, admin, "GET", path, nil)
			if o.Status == 404 {
				break
			}
			if o.Status != 200 {
				return nil, nil, s.violatef("list tables of %s: %s", ns, o)
			}
			var res struct {
				Identifiers []struct {
					Namespace []string `json:"namespace"`
					Name      string   `json:"name"`
				} `json:"identifiers"`
				Next *string `json:"next-page-token"`
			}
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return nil, nil, err
			}
			for _, id := range res.Identifiers {
				lo := s.w.call(s.ctx, admin, "GET", tablePath(ns, id.Name), nil)
				if lo.Status == 404 {
					continue
				}
				if lo.Status != 200 {
					return nil, nil, s.violatef("load %s.%s: %s", ns, id.Name, lo)
				}
				var t createResult
				if err := json.Unmarshal(lo.Body, &t); err != nil {
					return nil, nil, err
				}
				lives = append(lives, liveObs{ns: ns, name: id.Name, uuid: t.Metadata.UUID, meta: t.MetadataLocation})
			}
			if res.Next == nil || *res.Next == "" {
				break
			}
			token = *res.Next
		}
	}
	softs, err := s.softListing("table")
	if err != nil {
		return nil, nil, err
	}
	return lives, softs, nil
}

// touchedGen: an op of this round named g (its identifier or its uuid).
func (s *Sim) touchedGen(g *Gen) bool {
	return s.touched["uuid:"+g.uuid] > 0 || s.touched["id:"+g.ident()] > 0
}

// check observes the catalog, reconciles the model with what the round's
// order made of it, and checks the invariants.
func (s *Sim) check() error {
	s.w.leaksMu.Lock()
	leaks, bad := s.w.leaks, s.w.badErrors
	s.w.leaksMu.Unlock()
	if len(leaks) > 0 {
		return s.violatef("%d answers carried credentials without Cache-Control: no-store (SPEC §2), e.g. %s", len(leaks), leaks[0])
	}
	if len(bad) > 0 {
		return s.violatef("%d error answers broke the error format (docs/spec.md), e.g. %s", len(bad), bad[0])
	}
	lives, softs, err := s.observe()
	if err != nil {
		return err
	}
	if err := s.reconcile(lives, softs); err != nil {
		return err
	}
	if err := s.checkOwnersApart(); err != nil {
		return err
	}
	// One listing serves every check of the round, and the next round's
	// "before" (nothing changes the bucket between them).
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	if err := s.checkViews(lives, objs); err != nil {
		return err
	}
	if err := s.checkProtected(objs); err != nil {
		return err
	}
	if err := s.checkHistory(objs); err != nil {
		return err
	}
	if err := s.checkHeldFiles(objs); err != nil {
		return err
	}
	if err := s.checkPurges(false, objs); err != nil {
		return err
	}
	s.fresh = objs
	return nil
}

// bucketNow is the bucket's listing: the last check's, when nothing has
// run since.
func (s *Sim) bucketNow() (map[string]int64, error) {
	if m := s.fresh; m != nil {
		s.fresh = nil
		return m, nil
	}
	return s.w.objects(s.ctx)
}

func (s *Sim) reconcile(lives []liveObs, softs []softObs) error {
	usedL, usedS := map[int]bool{}, map[int]bool{}
	// An observation with a generation's uuid and identifier is that
	// generation's: another of the same uuid (a registered copy) never
	// takes it as a rename.
	// Two live generations of one uuid at one identifier (a hard drop and
	// a register of the same table's older metadata in one round): the
	// one whose metadata pointer the observation shows is it (soak seed
	// 1018 step 211).
	exact, claimed := map[int]*Gen{}, map[*Gen]bool{}
	for _, sameMeta := range []bool{true, false} {
		for _, g := range s.m.inState(live) {
			for i, o := range lives {
				if _, taken := exact[i]; taken || claimed[g] || o.uuid != g.uuid || o.ns != g.ns || o.name != g.name {
					continue
				}
				if sameMeta && o.meta != g.meta {
					continue
				}
				exact[i], claimed[g] = g, true
				break
			}
		}
	}
	findLive := func(g *Gen) int {
		at := -1
		for i, o := range lives {
			if usedL[i] || o.uuid != g.uuid || (exact[i] != nil && exact[i] != g) {
				continue
			}
			if o.ns == g.ns && o.name == g.name {
				return i
			}
			if at < 0 {
				at = i
			}
		}
		return at
	}
	findSoft := func(g *Gen) int {
		at := -1
		for i, o := range softs {
			if usedS[i] || o.UUID != g.uuid {
				continue
			}
			if o.ident() == g.ident() {
				return i
			}
			if at < 0 {
				at = i
			}
		}
		return at
	}
	// Live generations first, then soft ones (a uuid may be both: a
	// registered copy); each as the model had it before this settling.
	softGens := s.m.inState(soft)
	for _, g := range s.m.inState(live) {
		if i := findLive(g); i >= 0 {
			usedL[i] = true
			o := lives[i]
			if o.ns != g.ns || o.name != g.name {
				if !s.touchedGen(g) {
					return s.violatef("%s is live as %s.%s, and no operation moved it", g, o.ns, o.name)
				}
				g.ns, g.name = o.ns, o.name
			}
			if err := s.pointer(g, o.meta); err != nil {
				return err
			}
			continue
		}
		if j := findSoft(g); j >= 0 && s.touchedGen(g) {
			usedS[j] = true
			// A drop of it in this round the model put on another generation.
			s.softDropped(g, nil, nil)
			if err := s.softMatches(g, softs[j], true); err != nil {
				return err
			}
			continue
		}
		if s.hardDrops[g.ident()] > 0 && s.touchedGen(g) {
			s.hardDrops[g.ident()]--
			g.state = released
			s.logf("   %s was the one dropped without purge", g)
			continue
		}
		return s.violatef("%s vanished: it is neither live nor soft-deleted, and no operation purged it", g)
	}
	for _, g := range softGens {
		if j := findSoft(g); j >= 0 {
			usedS[j] = true
			g.mayRelease = false
			if err := s.softMatches(g, softs[j], s.touchedGen(g)); err != nil {
				return err
			}
			continue
		}
		if i := findLive(g); i >= 0 && s.touchedGen(g) {
			usedL[i] = true
			g.state, g.ns, g.name = live, lives[i].ns, lives[i].name
			if err := s.pointer(g, lives[i].meta); err != nil {
				return err
			}
			continue
		}
		if g.mayRelease {
			// No TableSoftDeleted event for this drop (soak seed 1050
			// step 290); one for an earlier soft drop still counts.
			g.state, g.everSoft = released, g.softBefore
			s.logf("   %s was dropped hard (its drop raced soft-delete.enabled=false)", g)
			continue
		}
		return s.violatef("soft-deleted %s vanished (purge-at %s, now %s, legal hold %v): nothing the model did allowed its permanent delete",
			g, g.purgeAt.Format(time.RFC3339), s.w.clock.Now().Format(time.RFC3339), g.legalHold)
	}
	for i, o := range lives {
		if !usedL[i] {
			return s.violatef("live table %s.%s (uuid %s) is not one the model made", o.ns, o.name, o.uuid)
		}
	}
	for j, o := range softs {
		if !usedS[j] {
			return s.violatef("soft-deleted table %s (uuid %s) is not one the model dropped", o.ident(), o.UUID)
		}
	}
	return nil
}

// pointer: the catalog's metadata pointer of g is meta; it moves only by a
// commit the model made (or a sweep that commits) and never back.
func (s *Sim) pointer(g *Gen, meta string) error {
	if meta == g.meta {
		return nil
	}
	switch {
	case metaVersion(meta) < metaVersion(g.meta):
		return s.violatef("%s: its metadata pointer went back from %s to %s", g, g.meta, meta)
	case !s.touchedGen(g) && !s.sweeping:
		return s.violatef("%s: its metadata pointer moved from %s to %s, and no operation committed", g, g.meta, meta)
	}
	s.advanceMeta(g, meta)
	return s.recordMove(g, meta)
}

// recordMove records a pointer move the round explains: the refs follow
// the metadata when an op of the round set them, or for those a sweep may
// have expired.
func (s *Sim) recordMove(g *Gen, meta string) error {
	if err := s.record(g, meta, s.touched["refs:"+g.uuid] > 0); err != nil {
		return err
	}
	if names := s.expirable[g]; len(names) > 0 && g.h != nil {
		if r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, meta); err == nil {
			for _, n := range names {
				if _, ok := r.refs[n]; !ok {
					s.logf("   %s: its ref %q went past its max-ref-age", g, n)
					delete(g.h.refs, n)
				}
			}
		}
	}
	return nil
}

// holdRaced: another op of this round could have changed the hold period
// g's drop took (its own, its namespace's, the catalog's), landing before
// or after the drop. A drop alone in its round (touched, but by itself)
// must fix exactly the period the model says.
func (s *Sim) holdRaced(g *Gen) bool {
	return s.touched["props"] > 1 || s.touched["nsprops:"+g.ns] > 1 || s.touched["id:"+g.ident()] > 1 || s.touched["uuid:"+g.uuid] > 1
}

// softMatches compares a soft-deleted record with the model's.
func (s *Sim) softMatches(g *Gen, o softObs, touched bool) error {
	if o.ident() != g.ident() {
		if !touched {
			return s.violatef("soft-deleted %s is listed as %s", g, o.ident())
		}
		g.ns, g.name = strings.Join(o.Namespace, "."), o.Name
	}
	at, err := time.Parse(time.RFC3339, o.PurgeAt)
	if err != nil {
		return s.violatef("soft-deleted %s: purge-at %q: %v", g, o.PurgeAt, err)
	}
	if !at.Equal(g.purgeAt) {
		if !s.holdRaced(g) {
			return s.violatef("soft-deleted %s: purge-at %s, the model says %s (dropped %s, hold %v)", g, o.PurgeAt,
				g.purgeAt.Format(time.RFC3339), g.droppedAt.Format(time.RFC3339), g.purgeAt.Sub(g.droppedAt))
		}
		// The drop raced a change of the hold period: either is right.
		g.purgeAt = at
	}
	if o.LegalHold != g.legalHold {
		if !touched && !g.holdUnsure {
			return s.violatef("soft-deleted %s: legal hold %v, the model says %v", g, o.LegalHold, g.legalHold)
		}
		g.legalHold = o.LegalHold
	}
	g.holdUnsure = false
	if o.Meta != g.meta {
		if !touched {
			return s.violatef("soft-deleted %s: metadata %s, the model says %s", g, o.Meta, g.meta)
		}
		s.advanceMeta(g, o.Meta)
	}
	if o.PurgeOnExpiry != g.purgeOnExpiry && !g.poeUnsure {
		return s.violatef("soft-deleted %s: purge-on-expiry %v, the catalog said %v at its drop", g, o.PurgeOnExpiry, g.purgeOnExpiry)
	}
	g.purgeOnExpiry, g.poeUnsure = o.PurgeOnExpiry, false
	return nil
}

// checkProtected: every object reachable from the metadata of a live or
// soft-deleted generation exists.
func (s *Sim) checkProtected(objs map[string]int64) error {
	for _, g := range s.m.inState(live, soft, unregistered) {
		r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
		if err != nil {
			return s.violatef("%s: its metadata %s cannot be read: %v", g, g.meta, err)
		}
		// A forgery borrowed another table's files: it protects only what
		// lies under its own location.
		own, _ := keyOf(strings.TrimRight(g.location, "/"))
		if g.forged && len(g.oldLocs) > 0 {
			// Moved since: where it was registered is what it owns for sure
			// (its new location may be the lender's, whose files went).
			own, _ = keyOf(strings.TrimRight(g.oldLocs[0], "/"))
		}
		var missing []string
		for k := range r.keys {
			if g.forged && !strings.HasPrefix(k, own+"/") {
				continue
			}
			// A previous metadata file under a former location is history:
			// the former location stays the table's only while a retained
			// snapshot reaches it (docs/design/store.md, set-location), and
			// another table may take it, and purge it, after that.
			if k != metaKey(g.meta) && strings.HasSuffix(k, ".metadata.json") && !strings.HasPrefix(k, own+"/") {
				continue
			}
			if _, ok := objs[k]; !ok {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			return s.violatef("%s (legal hold %v, purge-at %s): %d objects its metadata reaches are gone, e.g. %s",
				g, g.legalHold, g.purgeAt.Format(time.RFC3339), len(missing), strings.Join(missing[:min(3, len(missing))], ", "))
		}
	}
	return nil
}

// checkRows scans g and compares its rows with the model's.
func (s *Sim) checkRows(g *Gen, why string) error {
	cat, _, err := s.w.client(s.ctx, admin)
	if err != nil {
		return err
	}
	ns, name := g.ns, g.name
	tbl, err := cat.LoadTable(s.ctx, table.Identifier{ns, name})
	if err != nil {
		return s.violatef("%s (%s): load: %v", g, why, err)
	}
	got, err := scanIDs(s, tbl.Scan())
	if err != nil {
		return s.violatef("%s (%s): scan: %v", g, why, err)
	}
	var lost, extra []int64
	for id := range g.rows {
		if !got[id] {
			lost = append(lost, id)
		}
	}
	for id := range got {
		if _, ok := g.rows[id]; !ok {
			if _, maybe := g.maybe[id]; !maybe {
				extra = append(extra, id)
			}
		}
	}
	if len(lost) > 0 || len(extra) > 0 {
		slices.Sort(lost)
		slices.Sort(extra)
		return s.violatef("%s (%s): scanned %d rows; lost %v, unexpected %v", g, why, len(got), lost, extra)
	}
	for id, d := range g.maybe {
		if got[id] {
			g.rows[id] = d
		}
		delete(g.maybe, id)
	}
	return nil
}

// scanIDs reads the ids a scan returns.
func scanIDs(s *Sim, scan *table.Scan) (map[int64]bool, error) {
	res, err := scan.ToArrowTable(s.ctx)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	got := map[int64]bool{}
	col := res.Column(0)
	for _, ch := range col.Data().Chunks() {
		raw, _ := json.Marshal(ch)
		var ids []*int64
		_ = json.Unmarshal(raw, &ids)
		for _, id := range ids {
			if id != nil {
				got[*id] = true
			}
		}
	}
	return got, nil
}

// --- barriers: steps that run alone ---

type barrier struct {
	kind string // for coverage (set by makeBarrier)
	desc string
	run  func() error
}

var barrierWeights = []struct {
	kind string
	w    int
}{
	{"clock", 6}, {"hold-expiry", 5}, {"quiesce", 1}, {"restart", 1},
	{"stale-sweep", 3}, {"stale-undrop", 2}, {"stale-hold", 2}, {"backfill", 3},
	{"retention-sweep", 4}, {"fault", 3}, {"overwrite-repair", 2}, {"scope-hold", 3},
	{"storage-sweep", 2}, {"nested-namespaces", 1}, {"pattern-grant", 1},
}

// barrierTour: the barrier kinds by weight, lightest first; kinds of one
// weight start at a place the seed says.
func barrierTour(seed uint64) []string {
	byW := map[int][]string{}
	var ws []int
	for _, b := range barrierWeights {
		if byW[b.w] == nil {
			ws = append(ws, b.w)
		}
		byW[b.w] = append(byW[b.w], b.kind)
	}
	slices.Sort(ws)
	var out []string
	for _, w := range ws {
		ks := byW[w]
		r := int(seed % uint64(len(ks)))
		out = append(out, append(ks[r:], ks[:r]...)...)
	}
	return out
}

func (s *Sim) pickBarrier() *barrier {
	// One backfill early in every seed, once a soft-deleted table is
	// there to claim again and before views and unregistered tables
	// (which no state from before the index holds) make it skip.
	if !s.backfilled && !s.without["backfill"] && s.step >= 8 && len(s.m.inState(soft)) > 0 {
		s.backfilled = true
		return s.makeBarrier("backfill")
	}
	if !s.chance(0.2) {
		return nil
	}
	// Each seed's first picks run every kind once, the rarest first, from
	// a place the seed says among equals (coverage: a rare kind is reached
	// in every seed, not by luck; a seed makes fewer random barrier picks
	// than there are kinds when templates fill its rounds).
	s.barriers++
	if i := s.barriers - 1; i < len(barrierWeights) {
		if b := barrierTour(s.seed)[i]; !s.without[b] {
			return s.makeBarrier(b)
		}
	}
	total := 0
	for _, b := range barrierWeights {
		if !s.without[b.kind] {
			total += b.w
		}
	}
	if total == 0 {
		return nil
	}
	n := s.rng.IntN(total)
	for _, b := range barrierWeights {
		if s.without[b.kind] {
			continue
		}
		if n < b.w {
			return s.makeBarrier(b.kind)
		}
		n -= b.w
	}
	return nil
}

// clock jumps, up to the extreme (a century and more at once), in whole
// half hours: snapshots are stamped on the wall clock, 30 days behind the
// simulated one (startOfClock), and a replay runs at another wall time;
// half-hour steps keep every comparison of a snapshot's age with a
// half-hour-aligned bound on the same side as long as a seed's run takes
// less than 15 minutes.
var jumps = []time.Duration{30 * time.Minute, 90 * time.Minute, 6 * time.Hour, 24 * time.Hour, 49 * time.Hour,
	3 * 24 * time.Hour, 8 * 24 * time.Hour, 31 * 24 * time.Hour, 400 * 24 * time.Hour}

// startOfClock is the simulated clock's start: today's midnight (UTC) plus
// 30 days. Whole days keep the partition days' boundaries where they were
// in the run replayed; 30 days ahead of the wall clock puts every snapshot
// past the default max-snapshot-age-ms (5 days) whenever it is compared.
func startOfClock() time.Time {
	return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 30)
}

var extremeJumps = []time.Duration{3650 * 24 * time.Hour, 36600 * 24 * time.Hour, 106000 * 24 * time.Hour}

func (s *Sim) makeBarrier(kind string) *barrier {
	b := s.makeBarrierOf(kind)
	if b != nil && b.kind == "" {
		b.kind = kind
	}
	return b
}

func (s *Sim) makeBarrierOf(kind string) *barrier {
	switch kind {
	case "clock-8d", "clock-2h":
		d := map[string]time.Duration{"clock-8d": 8 * 24 * time.Hour, "clock-2h": 2 * time.Hour}[kind]
		return &barrier{kind: "clock", desc: "clock +" + d.String(), run: func() error {
			s.w.clock.Advance(d)
			s.logf("   now %s", s.w.clock.Now().Format(time.RFC3339))
			return nil
		}}
	case "clock":
		d := pick(s, jumps)
		if s.chance(0.08) {
			d = pick(s, extremeJumps)
		}
		// The clock stays before 2200: nanosecond timestamps (intents are
		// stamped so) end in 2262, and a century of hold must fit after it.
		for s.w.clock.Now().Add(d).Year() >= 2200 && d > time.Hour {
			d = (d / 16).Truncate(30 * time.Minute)
		}
		return &barrier{desc: "clock +" + d.String(), run: func() error {
			s.w.clock.Advance(d)
			s.logf("   now %s", s.w.clock.Now().Format(time.RFC3339))
			return nil
		}}
	case "hold-expiry":
		return &barrier{desc: "hold-expiry sweep", run: s.sweepHoldExpiry}
	case "failed-job":
		return s.failedJob()
	case "gc-off":
		return s.gcOff()
	case "keyed-retry":
		return s.keyedRetry()
	case "moved-session":
		return s.movedSession()
	case "two-catalogs":
		return s.twoCatalogs()
	case "listings":
		return s.listings()
	case "lost-delivery":
		return s.lostDelivery()
	case "authz":
		return s.authzProbe()
	case "held-drop":
		return s.heldDrop()
	case "prefix-names":
		return s.prefixNames()
	case "gc-off-expiry":
		return s.gcOffExpiry()
	case "recovered-purge":
		return s.recoveredPurge()
	case "warehouse-scope":
		return s.warehouseScope()
	case "racing-commits":
		return s.racingCommits()
	case "required-vending":
		return s.requiredVending()
	case "version-window":
		return s.versionWindow()
	case "two-generations":
		return s.twoGenerations()
	case "plain-drop":
		return s.plainDrop()
	case "quiesce":
		return &barrier{desc: "quiesce", run: func() error { return s.quiesce(false) }}
	case "restart":
		return &barrier{desc: "crash and restart from the state folder", run: func() error {
			s.faulty = false // the faults were the old process's
			return s.w.restart(s.ctx)
		}}
	case "fault":
		return s.faultBarrier()
	case "retention-sweep":
		return &barrier{desc: "retention sweep (partition drops, snapshot expiry)", run: s.sweepRetention}
	case "nested-namespaces":
		return s.nestedNamespaces()
	case "storage-sweep":
		// As the schedule runs it, or an operator through the API: the
		// catalog's, or one live table's (only its location's objects).
		switch lives := s.m.inState(live); {
		case len(lives) > 0 && s.chance(0.3):
			g := pick(s, lives)
			// An orphan under it (and, now and then, under another table
			// the sweep of this one must leave alone).
			strays := []*barrier{s.strayWrite(g), s.strayWrite(pick(s, lives))}
			return &barrier{desc: "storage sweep of " + g.String() + " alone (the API) on an inventory report written now, after stray writes", run: func() error {
				for _, b := range strays {
					if err := b.run(); err != nil {
						return err
					}
				}
				return s.storageSweepOf(nil, g, true)
			}}
		case s.chance(0.3):
			return &barrier{desc: "storage sweep of the catalog (the API) on an inventory report written now", run: func() error { return s.storageSweepOf(nil, nil, true) }}
		}
		return &barrier{desc: "storage sweep on an inventory report written now", run: func() error { return s.storageSweep(nil) }}
	case "backfill":
		return &barrier{desc: "the ownership backfill on a state from before the index", run: s.backfill}
	case "stale-sweep":
		return s.staleSweep()
	case "stale-undrop":
		return s.staleUndrop()
	case "stale-hold":
		return s.staleLegalHold()
	case "overwrite-repair":
		return s.overwriteRepair()
	case "scope-hold":
		return s.scopeHold()
	case "pattern-grant":
		return s.patternGrant()
	}
	return nil
}

// sweepHoldExpiry runs the hold-expiry sweep at the clock's time: exactly
// the soft-deleted generations whose purge-at has passed and that are not
// legal-held end (into a purge, or released where the catalog does not
// purge on expiry).
func (s *Sim) sweepHoldExpiry() error {
	now := s.w.clock.Now()
	var err error
	if s.pre, err = s.bucketNow(); err != nil {
		return err
	}
	rep, err := s.w.srv.SoftDelete.Expire(s.ctx, 0)
	if err != nil {
		return s.violatef("hold-expiry sweep: %v", err)
	}
	s.logf("   report %+v", rep)
	s.acted = rep.Expired+rep.Purged > 0
	return s.expireModel(now)
}

// expireModel: what a complete hold-expiry sweep at now ends.
func (s *Sim) expireModel(now time.Time) error {
	for _, g := range s.m.inState(soft) {
		if g.legalHold || !g.purgeAt.Before(now) {
			continue
		}
		if g.purgeOnExpiry {
			s.startPurging(g, "", false)
		} else {
			g.state = released
			s.logf("   %s released (its files stay)", g)
		}
	}
	return nil
}

// --- quiescence ---

// quiesce lets the pipeline finish (reconcile runs, dead letters are
// redriven), moves the clock past the intent lifetime and runs the orphan
// sweep, then checks what only holds at rest: each finished purge left
// nothing under its prefix and counted what went, every live table reads
// its rows, no orphan metadata file is left, no index item lacks its record.
func (s *Sim) quiesce(final bool) error {
	if err := s.drain(); err != nil {
		return err
	}
	s.w.clock.Advance(purge.IntentTTL + time.Minute)
	s.logf("   clock +%v (past the intent lifetime): %s", purge.IntentTTL+time.Minute, s.w.clock.Now().Format(time.RFC3339))
	if err := s.drain(); err != nil {
		return err
	}
	if err := s.checkPurges(true, nil); err != nil {
		return err
	}
	if !s.skip["versions"] {
		if err := s.checkNothingDeletedLeft(); err != nil {
			return err
		}
	}
	for _, g := range s.m.inState(live) {
		if s.skip["rows"] {
			break
		}
		if g.forged || g.bulk {
			continue // its rows are another table's, borrowed (or 1,010 files')
		}
		if err := s.checkRows(g, "at rest"); err != nil {
			return err
		}
		if err := s.checkRefRows(g); err != nil {
			return err
		}
		// Its verify report calls missing only what is (verifyAnswered).
		if o := s.w.call(s.ctx, admin, "GET", lifecyclePath(g.ns, g.name)+"/verify", nil); o.Status != 200 {
			return s.violatef("%s: verify at rest: %s", g, o)
		} else if err := s.verifyAnswered(g, o); err != nil {
			return err
		}
	}
	if !s.skip["orphans"] {
		if err := s.checkOrphans(); err != nil {
			return err
		}
	}
	if !s.skip["index"] {
		if err := s.checkIndex(); err != nil {
			return err
		}
	}
	if !s.skip["events"] {
		if err := s.checkEvents(); err != nil {
			return err
		}
	}
	if err := s.checkViewPurges(); err != nil {
		return err
	}
	if err := s.checkTeardown(); err != nil {
		return err
	}
	if err := s.checkMetrics(); err != nil {
		return err
	}
	if final {
		s.logf("== quiescent: %s", s.census())
	}
	return nil
}

// drain runs reconcile until no job is active (about two minutes at most).
func (s *Sim) drain() error {
	if s.faulty {
		s.logf("   healing the faults to come to rest")
	}
	s.heal()
	if f := s.afterHeal; f != nil {
		s.afterHeal = nil
		f()
	}
	if s.w.gate != nil {
		s.w.gate.set(true)
		defer s.w.gate.set(false)
	}
	// The deadline counts from the pipeline's last progress, not from the
	// start: on a loaded machine a purge of thousands of files is slow but
	// moving (soak seed 1000 step 235 timed out beside three other runs
	// and passed alone). A pipeline that keeps moving for a quarter of an
	// hour is stuck in a loop all the same.
	const still = 3 * time.Minute
	deadline, limit, last := time.Now().Add(still), time.Now().Add(15*time.Minute), ""
	for {
		rep, err := s.w.srv.Purge.Reconcile(s.ctx)
		if err != nil {
			return s.violatef("reconcile: %v", err)
		}
		if len(rep.Orphans.Jobs) > 0 {
			s.logf("   orphan sweep: %d jobs", len(rep.Orphans.Jobs))
		}
		active, err := s.w.activeJobs(s.ctx)
		if err != nil {
			return err
		}
		if len(active) == 0 {
			return nil
		}
		if n, err := s.w.srv.QueueDepth(s.ctx, true); err == nil && n > 0 && !s.faulty {
			_ = s.w.srv.Redrive(s.ctx)
		}
		busy, moved := s.progressOf(active)
		if now := fmt.Sprint(moved); now != last {
			last, deadline = now, time.Now().Add(still)
		}
		if time.Now().After(deadline) || time.Now().After(limit) {
			var ids []string
			for _, a := range active {
				j, _ := s.job(a.ID)
				ids = append(ids, fmt.Sprintf("%s %v", a.ID, j.Raw))
			}
			dlq, _ := s.w.srv.QueueDepth(s.ctx, true)
			q, _ := s.w.srv.QueueDepth(s.ctx, false)
			return s.violatef("purge jobs still active at rest, %v without progress or 15 minutes in all (delete queue %d, DLQ %d; %v): %v", still, q, dlq, busy, ids)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *Sim) allJobs() ([]jobView, error) { return s.jobsOf(catalogName) }

// jobsOf lists every job of a catalog (none of one that does not exist).
func (s *Sim) jobsOf(cat string) ([]jobView, error) {
	var out []jobView
	token := ""
	for {
		path := s.paged("/lifecycle/v1/catalogs/"+cat+"/purge-jobs", token)
		o := s.w.call(s.ctx, admin, "GET", path, nil)
		if o.Status == 404 && cat != catalogName {
			return nil, nil
		}
		if o.Status != 200 {
			return nil, s.violatef("list jobs: %s", o)
		}
		var res struct {
			Jobs []json.RawMessage `json:"jobs"`
			Next *string           `json:"next-page-token"`
		}
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return nil, err
		}
		for _, raw := range res.Jobs {
			var j jobView
			_ = json.Unmarshal(raw, &j)
			_ = json.Unmarshal(raw, &j.Raw)
			out = append(out, j)
		}
		if res.Next == nil || *res.Next == "" {
			return out, nil
		}
		token = *res.Next
	}
}

func num(raw map[string]any, k string) (int64, bool) {
	v, ok := raw[k].(float64)
	return int64(v), ok
}

// checkPurges: every accepted purge ended SUCCEEDED with nothing left under
// the prefix its table owned, and counted the objects that went.
func (s *Sim) checkPurges(atRest bool, objs map[string]int64) error {
	var jobs []jobView
	var err error
	if atRest {
		if jobs, err = s.allJobs(); err != nil {
			return err
		}
	} else {
		// After a round: the purges with a known job that have ended.
		for _, g := range s.m.inState(purging) {
			if g.job == "" {
				continue
			}
			j, err := s.job(g.job)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		if len(jobs) == 0 {
			return nil
		}
	}
	byID := map[string]jobView{}
	taken := map[string]bool{}
	for _, g := range s.m.gens {
		if g.job != "" {
			taken[g.job] = true
		}
	}
	for _, j := range jobs {
		byID[j.ID] = j
	}
	if objs == nil {
		if objs, err = s.w.objects(s.ctx); err != nil {
			return err
		}
	}
	for _, g := range s.m.inState(purging) {
		if g.job == "" { // the hold-expiry sweep's: find it by its table
			for _, j := range jobs {
				// (A CANCELLED one was an earlier purge of the table that a
				// register took back: soak seed 1080 step 300.)
				if j.TableUUID == g.uuid && (j.Kind == "" || j.Kind == "purge") && j.State != "CANCELLED" && !taken[j.ID] {
					g.job, taken[j.ID] = j.ID, true
					break
				}
			}
		}
		j, ok := byID[g.job]
		if !atRest && (!ok || (j.State != "SUCCEEDED" && j.State != "FAILED")) {
			continue // still running: at rest it must have ended
		}
		if !ok {
			return s.violatef("%s: no purge job deletes it", g)
		}
		if j.State != "SUCCEEDED" && g.forged && (j.State == "FAILED" || j.State == "DEAD_LETTERED") {
			// A forgery's metadata reaches another table's files; once
			// that table is purged its purge cannot read them (SPEC §3:
			// metadata unreadable is FAILED).
			g.state = gone
			s.logf("   %s: purge job %s FAILED: %v", g, j.ID, j.Raw["last-error"])
			continue
		}
		le, _ := j.Raw["last-error"].(string)
		dead, _ := num(j.Raw, "batches-dead")
		if j.State == "FAILED" && dead == 0 && (strings.Contains(le, "injected fault") || strings.Contains(le, "s3 throttled")) {
			// The S3 outage the generator injected outlasted a step's
			// retries: FAILED, attempts exhausted (SPEC §3); what is left
			// stays (nobody owns it any more). Not while a batch is dead:
			// a dead batch waits for its redrive (DEAD_LETTERED), and the
			// job must not go on to finalize without it.
			g.state = released
			s.logf("   %s: purge job %s FAILED under an injected S3 fault", g, j.ID)
			continue
		}
		if j.State != "SUCCEEDED" {
			return s.violatef("%s: purge job %s ended %s: %v", g, j.ID, j.State, j.Raw["last-error"])
		}
		prefix, _ := keyOf(strings.TrimRight(g.location, "/"))
		others := s.othersAt(g)
		var left []string
		for k := range objs {
			if strings.HasPrefix(k, prefix+"/") && !others(k) && !s.m.strays[k] {
				left = append(left, k)
			}
		}
		if len(left) > 0 && g.contendedPurge && !slices.ContainsFunc(left, func(k string) bool { return strings.HasSuffix(k, ".metadata.json") }) {
			// An append of the same round wrote its data, manifest and list
			// after the purge's final listing and then found the table gone
			// (no metadata file: its commit never happened). No catalog can
			// delete what an engine writes after it looked; a later orphan
			// listing is the remedy (docs/design/purge.md, purge).
			s.logf("   %s: purge job %s left %d files an append of the same round wrote after its listing", g, j.ID, len(left))
			left = nil
		}
		gcOff, meta := false, g.purgeMeta
		if meta == "" {
			meta = g.meta // the hold-expiry sweep's purge
		}
		if r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, meta); err == nil && gcDisabled(r.props) {
			// gc.enabled=false in the metadata it was purged with: only
			// the metadata layer that metadata names goes (its log,
			// manifest lists and manifests; no final listing: files a
			// register with overwrite left behind stay). Soak seed 1075
			// step 184: a register with overwrite went back to a file from
			// before the corner set gc.enabled=true.
			gcOff = true
			left = slices.DeleteFunc(left, func(k string) bool { return !strings.Contains(k, "/metadata/") || !r.keys[k] })
			s.logf("   %s: purged with gc.enabled=false: its data files stay", g)
		}
		if len(left) > 0 && !s.skip["leftovers"] {
			slices.Sort(left)
			return s.violatef("%s: purge job %s SUCCEEDED with %d objects left under %s, e.g. %s (job %v)", g, j.ID, len(left), prefix,
				strings.Join(left[:min(3, len(left))], ", "), j.Raw)
		}
		if len(g.oldLocs) > 0 && !g.contendedPurge && !g.forged && !gcOff && !s.skip["leftovers"] {
			if err := s.checkOldLocations(g, j, objs, others); err != nil {
				return err
			}
		}
		if !g.contendedPurge && len(g.oldLocs) == 0 && !g.forged && !gcOff && !s.skip["counters"] {
			if err := s.checkCounters(g, j); err != nil {
				return err
			}
		}
		g.state = gone
		s.logf("   %s purged by %s: %d objects", g, j.ID, len(g.before))
	}
	return nil
}

// checkOldLocations: a moved table's purge deleted what its metadata
// reaches under the locations it had before (a retained snapshot there
// keeps that prefix its own, SPEC §2), not only under its location
// (held-out 10: the job handed the location's claim alone). Metadata
// files written there before the move are not reached by a snapshot: a
// prefix no snapshot reaches is released, and they stay.
func (s *Sim) checkOldLocations(g *Gen, j jobView, objs map[string]int64, others func(string) bool) error {
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.purgeMeta)
	if err != nil {
		return s.violatef("%s: the metadata it was purged with, %s: %v", g, g.purgeMeta, err)
	}
	var left []string
	for k := range r.planned {
		if _, there := objs[k]; !there || strings.HasSuffix(k, ".metadata.json") || others(k) || s.m.strays[k] {
			continue
		}
		for _, l := range g.oldLocs {
			if p, ok := keyOf(strings.TrimRight(l, "/")); ok && strings.HasPrefix(k, p+"/") {
				left = append(left, k)
			}
		}
	}
	if len(left) > 0 {
		slices.Sort(left)
		return s.violatef("%s: purge job %s SUCCEEDED and left %d files its metadata reaches under its old locations %v, e.g. %s (job %v)", g, j.ID, len(left), g.oldLocs,
			strings.Join(left[:min(3, len(left))], ", "), j.Raw)
	}
	return nil
}

// checkCounters: a purge's counters are exact. files-deleted counts what
// the pipeline deleted from what the metadata it purged reaches (its
// metadata layer and every file an ADDED entry names, SPEC §3), and
// files-unreferenced what its final listing found besides; and the final
// listing may find only files the model says no snapshot ever reached
// (failed commits' files, engines' uncommitted writes, metadata files past
// the metadata log). A batch marked done without deleting would leave its
// files to the listing: deleted short, unreferenced over, and files a
// snapshot reached among what the listing took.
func (s *Sim) checkCounters(g *Gen, j jobView) error {
	deleted, _ := num(j.Raw, "files-deleted")
	unref, _ := num(j.Raw, "files-unreferenced")
	n := int64(len(g.before))
	if g.expiring {
		// An expire job of the table ran beside the purge and deleted
		// some (each object is deleted once).
		if deleted+unref > n {
			return s.violatef("%s: purge job %s counted %d + %d objects, its prefix held %d (job %v)", g, j.ID, deleted, unref, n, j.Raw)
		}
		s.logf("   %s: purge job %s deleted %d and found %d of %d objects, an expire job the others", g, j.ID, deleted, unref, n)
		return nil
	}
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.purgeMeta)
	if err != nil {
		return s.violatef("%s: the metadata it was purged with, %s: %v", g, g.purgeMeta, err)
	}
	var wantDeleted, wantUnref int64
	var reachedOnce []string
	for k := range g.before {
		if r.planned[k] {
			wantDeleted++
			continue
		}
		wantUnref++
		// Reached once, yet left to the listing: expiry should have
		// deleted it, or (in the current snapshot) the purge should have
		// counted it. A file only older retained snapshots still name,
		// carried over by rewritten manifests or named by a DELETED entry,
		// may be the listing's: no batch can tell it is counted nowhere
		// else (docs/design/purge.md, who counts a file).
		if g.h != nil && g.h.reached[k] && !strings.HasSuffix(k, ".metadata.json") && (!r.keys[k] || r.snapFiles[r.current][k]) {
			reachedOnce = append(reachedOnce, k)
		}
	}
	if deleted != wantDeleted || unref != wantUnref {
		return s.violatef("%s: purge job %s counted files-deleted %d and files-unreferenced %d; of the %d objects under its location, the metadata it purged reaches %d (job %v)",
			g, j.ID, deleted, unref, n, wantDeleted, j.Raw)
	}
	if len(reachedOnce) > 0 {
		slices.Sort(reachedOnce)
		return s.violatef("%s: purge job %s left %d files its snapshots once reached to its final listing, e.g. %v (no retained snapshot names them: expiry should have deleted them; or the current one does: the purge should have counted them)",
			g, j.ID, len(reachedOnce), reachedOnce[:min(3, len(reachedOnce))])
	}
	return nil
}

// checkOrphans: no metadata file icehold wrote is left unreachable past the
// intent lifetime, except under the locations of tables ended without a
// purge (their files are left by design) and the simulation's forgeries.
func (s *Sim) checkOrphans() error {
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	reached := map[string]bool{}
	for _, g := range s.m.inState(live, soft, unregistered) {
		r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta)
		if err != nil {
			return s.violatef("%s: %v", g, err)
		}
		for k := range r.keys {
			reached[k] = true
		}
	}
	var left []string
	for k := range objs {
		if !strings.HasSuffix(k, ".metadata.json") || reached[k] || s.leftByDesign(k) || s.underView(k) {
			continue
		}
		left = append(left, k)
	}
	if len(left) > 0 {
		slices.Sort(left)
		var why []string
		for _, k := range left[:min(3, len(left))] {
			for _, g := range s.m.gens {
				for _, m := range g.metas {
					if mk, _ := keyOf(m); mk == k {
						why = append(why, fmt.Sprintf("%s was %s's (now at %s)", k, g, g.meta))
					}
				}
			}
		}
		return s.violatef("%d metadata files no table reaches are left past the intent lifetime, e.g. %s\n%s", len(left), strings.Join(left[:min(3, len(left))], ", "), strings.Join(why, "\n"))
	}
	return nil
}

// othersAt: whether a key lies under the location of a table other than g
// that took g's prefix after g's purge (a create or set-location there).
func (s *Sim) othersAt(g *Gen) func(string) bool {
	var prefixes []string
	for _, o := range s.m.gens {
		// Tables that still own their files, and any made after g (a
		// create, register or set-location there once g's purge ended).
		if o == g || (o.id < g.id && o.state != live && o.state != soft && o.state != purging && o.state != unregistered) {
			continue
		}
		for _, l := range append([]string{o.location}, o.oldLocs...) {
			if p, ok := keyOf(strings.TrimRight(l, "/")); ok {
				prefixes = append(prefixes, p+"/")
			}
		}
	}
	return func(k string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				return true
			}
		}
		return false
	}
}

func (s *Sim) leftByDesign(key string) bool {
	for _, g := range s.m.inState(released, unregistered) {
		if p, ok := keyOf(strings.TrimRight(g.location, "/")); ok && strings.HasPrefix(key, p+"/") {
			return true
		}
	}
	// A set-location releases the old prefix once no retained snapshot
	// reaches it (SPEC §2), and a purge never deletes outside what its table
	// owns: the metadata files written there before the move stay.
	for _, g := range s.m.gens {
		for _, l := range g.oldLocs {
			if p, ok := keyOf(strings.TrimRight(l, "/")); ok && strings.HasPrefix(key, p+"/") {
				return true
			}
		}
	}
	for _, g := range s.m.gens {
		// A forgery's purge ends FAILED once its lender is purged.
		if p, ok := keyOf(strings.TrimRight(g.location, "/")); ok && g.forged && g.state == gone && strings.HasPrefix(key, p+"/") {
			return true
		}
	}
	for _, f := range s.m.forged {
		if k, _ := keyOf(f); k == key {
			return true
		}
	}
	// Metadata files a register with overwrite left behind (the table
	// moved to another, often older, metadata file: what it had since is
	// history no request of its own is undoing).
	return s.m.abandoned[key]
}

// checkIndex: no index item lacks its record: expiry items, claims,
// active-job markers, in-flight markers and tombstones.
func (s *Sim) checkIndex() error {
	type item = map[string]ddbtypes.AttributeValue
	records := map[string]item{}
	var all []item
	err := s.w.scan(s.ctx, func(it item) error {
		records[str(it, "pk")+"|"+str(it, "sk")] = it
		all = append(all, it)
		return nil
	})
	if err != nil {
		return err
	}
	// Every claim id a record holds: its location's (hold) and its former
	// locations' (extra_holds), on entries, soft-deleted records' entries,
	// jobs and catalogs.
	holds := map[string]bool{}
	var collect func(m map[string]ddbtypes.AttributeValue)
	collect = func(m map[string]ddbtypes.AttributeValue) {
		if h, ok := m["hold"].(*ddbtypes.AttributeValueMemberM); ok {
			if id := str(h.Value, "id"); id != "" {
				holds[id] = true
			}
		}
		if l, ok := m["extra_holds"].(*ddbtypes.AttributeValueMemberL); ok {
			for _, v := range l.Value {
				if h, ok := v.(*ddbtypes.AttributeValueMemberM); ok {
					if id := str(h.Value, "id"); id != "" {
						holds[id] = true
					}
				}
			}
		}
		if e, ok := m["entry"].(*ddbtypes.AttributeValueMemberM); ok {
			collect(e.Value)
		}
	}
	for _, it := range all {
		collect(it)
	}
	for _, it := range all {
		pk, sk := str(it, "pk"), str(it, "sk")
		switch {
		case pk == "SOFTEXP":
			// <purge-at>#<catalog>#<uuid>[#<generation>]
			parts := strings.SplitN(sk, "#", 4)
			if len(parts) < 3 {
				return s.violatef("expiry index item %q is malformed", sk)
			}
			id := parts[2]
			if len(parts) == 4 {
				id += "\x1e" + parts[3]
			}
			rec, ok := records["SOFT#"+parts[1]+"|U#"+id]
			if !ok {
				return s.violatef("expiry index item %q has no soft-deleted record", sk)
			}
			if b, ok := rec["legal_hold"].(*ddbtypes.AttributeValueMemberBOOL); ok && b.Value {
				return s.violatef("expiry index item %q names a legal-held record", sk)
			}
			if pa := str(rec, "purge_at"); !strings.HasPrefix(sk, pa+"#") {
				return s.violatef("expiry index item %q does not match its record's purge-at %s", sk, pa)
			}
		case strings.HasPrefix(pk, "SOFT#") && strings.HasPrefix(sk, "N#"):
			// N#<namespace>␞<name>␞<uuid>[␞<generation>]: the record is U#<the rest>.
			parts := strings.SplitN(sk, "\x1e", 3)
			if len(parts) != 3 {
				return s.violatef("soft-deleted name item %q is malformed", sk)
			}
			if _, ok := records[pk+"|U#"+parts[2]]; !ok {
				return s.violatef("soft-deleted name item %q has no record", sk)
			}
		case pk == "ACTIVEJOB":
			return s.violatef("job %s is still marked active at rest", sk)
		case strings.HasPrefix(pk, "INFLIGHT#"):
			j, _ := s.job(strings.TrimPrefix(pk, "INFLIGHT#"))
			return s.violatef("batch %s of %s is still in flight at rest (job %v)", sk, pk, j.Raw)
		case strings.HasPrefix(pk, "TBL#") && strings.HasPrefix(sk, "X#"):
			return s.violatef("tombstone %s %s is left at rest", pk, sk)
		case strings.HasPrefix(pk, "LOC#"):
			if owner := str(it, "owner_id"); owner != "" && !holds[owner] {
				return s.violatef("claim %s %s (owner %s) names no record that holds it", pk, sk, owner)
			}
		}
	}
	return nil
}

var _ = strconv.Itoa
var _ = fmt.Sprint

func metaKey(path string) string {
	k, _ := keyOf(path)
	return k
}

// checkOwnersApart: no two tables own overlapping locations (SPEC §3,
// location ownership), however the requests that made them interleaved
// (two creates at L/x and L/x/y in one round: at most one may succeed).
// Checked at rest, so the order the model applied the round in does not
// matter. Forged registrations own nothing (the model's owner skips them).
func (s *Sim) checkOwnersApart() error {
	var owners []*Gen
	for _, g := range s.m.inState(live, soft, unregistered) {
		if g.forged {
			continue
		}
		for _, o := range owners {
			if overlaps(o.location, g.location) {
				return s.violatef("%s (at %s) and %s (at %s) both own overlapping locations", o, o.location, g, g.location)
			}
		}
		owners = append(owners, g)
	}
	return nil
}
