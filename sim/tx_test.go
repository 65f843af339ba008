package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
)

// Multi-table transactions, register with overwrite, unregister, and the
// rest of the views' surface (replace, register): operations that move a
// pointer, a legal hold or a claim outside the plain commit.

// --- transactions/commit ---

type txChange struct {
	ns, name string
	g        *Gen
	set      map[string]string
	remove   []string
	// wrongUUID: the change asserts a uuid the table does not have.
	wrongUUID bool
}

func (s *Sim) opTransaction() *Op {
	n := 1 + s.rng.IntN(3)
	// Mostly admin: a transaction of up to three changes by anyone else
	// is nearly always refused, and one that never lands reaches nothing
	// of the commit path (make sim at 228b884: 7 sent, none accepted).
	p := pick(s, []string{admin, admin, s.principal()})
	var chs []txChange
	seen := map[string]bool{}
	for range n {
		ns, name, g := s.target()
		if seen[ns+"."+name] {
			continue
		}
		seen[ns+"."+name] = true
		ch := txChange{ns: ns, name: name, g: g, set: map[string]string{}}
		switch s.rng.IntN(6) {
		case 0, 1:
			ch.set["icehold.legal-hold"] = s.spelled(s.chance(0.6))
		case 2:
			v, _ := s.duration()
			ch.set["soft-delete.hold-period"] = v
		case 3:
			ch.remove = []string{"icehold.legal-hold"}
		default:
			ch.set["sim.note"] = fmt.Sprint(s.rng.IntN(100))
		}
		if g != nil && s.chance(0.08) {
			ch.wrongUUID = true
		}
		chs = append(chs, ch)
	}
	return s.txOp(p, chs)
}

// txOp commits the changes in one transaction as p.
func (s *Sim) txOp(p string, chs []txChange) *Op {
	op := &Op{want: []int{204}}
	var parts []string
	var reasons []string
	writesHold, missing, wrong, unsureHold := false, false, false, false
	for _, ch := range chs {
		op.keys = append(op.keys, tableKeys(ch.ns, ch.name)...)
		parts = append(parts, fmt.Sprintf("%s.%s set=%v remove=%v wrong-uuid=%v", ch.ns, ch.name, ch.set, ch.remove, ch.wrongUUID))
		if ch.g != nil {
			op.keys = append(op.keys, "uuid:"+ch.g.uuid)
		}
		if v, ok := ch.set["soft-delete.hold-period"]; ok {
			switch _, vd := judgeDuration(v); vd {
			case invalid:
				op.invalid = true
				reasons = append(reasons, "hold period "+v)
			case unsure:
				unsureHold = true
			}
		}
		if _, ok := ch.set["icehold.legal-hold"]; ok || slices.Contains(ch.remove, "icehold.legal-hold") {
			writesHold = true
		}
		missing = missing || ch.g == nil
		wrong = wrong || ch.wrongUUID
	}
	op.desc = fmt.Sprintf("%s commits a transaction: %s", p, strings.Join(parts, "; "))
	switch {
	case writesHold && !s.m.canLegalHold(p):
		// The whole transaction is refused (SPEC §2: an operation needs
		// the same privileges whichever endpoint carries it).
		op.invalid, op.want = true, []int{403}
		reasons = append(reasons, p+" writes a legal hold without TABLE_LEGAL_HOLD")
	case op.invalid || missing || wrong:
		// The first change that fails answers; nothing of any change lands.
		op.want = nil
		if op.invalid {
			op.want = append(op.want, 400)
		}
		if missing {
			op.want = append(op.want, 404)
			reasons = append(reasons, "a table is missing")
		}
		if wrong {
			op.want = append(op.want, 409)
			reasons = append(reasons, "a requirement fails")
		}
		op.invalid = true
	case unsureHold:
		op.want = []int{204, 400}
	}
	op.why = strings.Join(reasons, "; ")
	if writesHold && !s.m.canLegalHold(p) {
		op.keys = append(op.keys, "grants")
	}
	s.privileged(op, p, "TABLE_WRITE")
	body := map[string]any{}
	var changes []any
	for _, ch := range chs {
		var updates []any
		if len(ch.set) > 0 {
			updates = append(updates, map[string]any{"action": "set-properties", "updates": ch.set})
		}
		if len(ch.remove) > 0 {
			updates = append(updates, map[string]any{"action": "remove-properties", "removals": ch.remove})
		}
		reqs := []any{}
		if ch.wrongUUID {
			reqs = append(reqs, map[string]any{"type": "assert-table-uuid", "uuid": "00000000-0000-4000-8000-00000000000a"})
		}
		changes = append(changes, map[string]any{"identifier": map[string]any{"namespace": []string{ch.ns}, "name": ch.name},
			"requirements": reqs, "updates": updates})
	}
	body["table-changes"] = changes
	op.run = func() Outcome {
		return s.w.call(s.ctx, p, "POST", "/v1/"+catalogName+"/transactions/commit", body)
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 204 {
			return nil
		}
		for _, ch := range chs {
			g := s.m.liveAt(ch.ns, ch.name)
			if g == nil {
				continue // moved in the round: the observation finds it
			}
			if v, ok := ch.set["icehold.legal-hold"]; ok {
				g.legalHold, g.holdUnsure = held(v), false
			}
			if slices.Contains(ch.remove, "icehold.legal-hold") {
				g.legalHold, g.holdUnsure = false, false
			}
			if v, ok := ch.set["soft-delete.hold-period"]; ok {
				g.holdProp = v
			}
			if contended {
				g.holdUnsure = true
			}
		}
		return nil
	}
	return op
}

// --- register with overwrite ---

func (s *Sim) opRegisterOverwrite() *Op {
	lives := s.m.inState(live)
	if len(lives) == 0 {
		return nil
	}
	t := pick(s, lives)
	src := t
	if s.chance(0.4) {
		src = pick(s, s.m.inState(live, soft, released, gone, unregistered))
	}
	meta := src.meta
	if src.state != live && src.state != soft && !s.intact(meta) {
		// A released table's files may have gone as orphans of the table
		// that took its location since (soak seed 1071): as for an older
		// metadata file, the generator leaves it.
		src, meta = t, t.meta
	}
	if len(src.metas) > 1 && s.chance(0.6) {
		if m := pick(s, src.metas); s.intact(m) {
			meta = m
		}
	}
	return s.registerOverwriteOf(t, src, meta, pick(s, []string{admin, admin, writer}))
}

// registerOverwriteOf: p registers t's identifier with overwrite from meta
// (one of src's metadata files).
func (s *Sim) registerOverwriteOf(t, src *Gen, meta, p string) *Op {
	ns, name := t.ns, t.name
	op := &Op{desc: fmt.Sprintf("%s registers %s.%s with overwrite from %s's %s", p, ns, name, src, meta),
		keys: append(tableKeys(ns, name), "uuid:"+t.uuid, "uuid:"+src.uuid, "loc")}
	if src == t {
		op.want = []int{200}
		if i := strings.LastIndex(meta, "/metadata/"); i > 0 && !overlaps(meta[:i], t.location) {
			op.want = append(op.want, 400, 409) // from before a move
		}
	} else {
		op.want = []int{200, 400, 404, 409}
	}
	s.privileged(op, p, "TABLE_CREATE", "TABLE_WRITE")
	// The hold the metadata sets is a change of the table's hold.
	if r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, meta); err == nil && (held(r.props["icehold.legal-hold"])) != t.legalHold && !s.m.canLegalHold(p) {
		op.want = []int{403}
		if t.holdUnsure {
			op.want = append(op.want, 200, 400, 409)
		}
		if src.state == gone || src.state == purging || !s.exists(meta) {
			// The hold is read from the metadata file; one gone (or
			// going: a purge runs beside the round) cannot be read: 400.
			op.want = append(op.want, 400)
		}
		op.keys = append(op.keys, "grants")
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, p, "POST", "/v1/"+catalogName+"/namespaces/"+ns+"/register", map[string]any{"name": name, "metadata-location": meta, "overwrite": true})
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		var res createResult
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("register answer: %v", err)
		}
		if contended {
			// A commit of the round may have landed first, and its
			// metadata file (answered 204 in a transaction) is one the
			// model never saw: the register left it too (soak seed 1046).
			if err := s.abandonUnder(ns, name); err != nil {
				return err
			}
		}
		if pg := s.genByUUID(res.Metadata.UUID, ns, name, purging); pg != nil && res.MetadataLocation == pg.meta {
			// Register as recovery: a drop with purge of the round landed
			// first and its job was still PENDING.
			pg.state, pg.job = live, ""
			pg.recovered = true
			s.logf("   %s recovered from its pending purge", pg)
			return nil
		}
		old := s.genByUUID(t.uuid, ns, name, live)
		if old == nil {
			old = s.m.liveAt(ns, name)
		}
		if old != nil && old.uuid == res.Metadata.UUID {
			// The same table, moved to the metadata registered (an older
			// one brings back rows it deleted since).
			s.abandon(old)
			old.meta = res.MetadataLocation
			if !slices.Contains(old.metas, old.meta) {
				old.metas = append(old.metas, old.meta)
			}
			if res.Metadata.Location != "" && !overlaps(res.Metadata.Location, old.location) {
				s.m.moveTo(old, res.Metadata.Location)
			}
			old.legalHold, old.holdUnsure = held(res.Metadata.Props["icehold.legal-hold"]), false
			old.holdProp = res.Metadata.Props["soft-delete.hold-period"]
			// The registered file's own expiry setting (soak seed 1066
			// step 233: back to a file from before minKeepOf set one).
			old.minKeep, _ = strconv.Atoi(res.Metadata.Props["history.expire.min-snapshots-to-keep"])
			for id, d := range old.rows {
				old.maybe[id] = d
			}
			for id, d := range old.ever {
				old.maybe[id] = d
			}
			old.rows = map[int64]string{}
			// Its history starts again at the metadata registered: what
			// only the history it left reached is no longer the table's
			// (a purge's final listing takes it as unreferenced).
			old.h = nil
			s.logf("   %s now at %s", old, old.meta)
			return s.record(old, old.meta, true)
		}
		if old != nil {
			old.state = released
			s.abandon(old)
			s.logf("   %s replaced by another table's metadata: its files stay", old)
		}
		s.readopt(res)
		g := s.m.add(&Gen{uuid: res.Metadata.UUID, ns: ns, name: name, location: res.Metadata.Location, state: live,
			meta: res.MetadataLocation, metas: []string{res.MetadataLocation}, forged: src.forged,
			legalHold: held(res.Metadata.Props["icehold.legal-hold"]), holdProp: res.Metadata.Props["soft-delete.hold-period"]})
		for _, rows := range []map[int64]string{src.rows, src.maybe, src.ever} {
			for id, d := range rows {
				g.maybe[id], g.ever[id] = d, d
			}
		}
		s.logf("   %s registered over %s.%s at %s", g, ns, name, g.location)
		return s.record(g, g.meta, true)
	}
	return op
}

// intact: every file meta reaches is in the bucket (by the last check's
// listing). An older metadata file whose files a sweep's expiry deleted
// would be registered as it is (Iceberg's register reads no manifest), and
// the model cannot say what such a table holds: the generator leaves it.
func (s *Sim) intact(meta string) bool {
	r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, meta)
	if err != nil || s.fresh == nil {
		return err != nil // unreadable: refused either way
	}
	for k := range r.keys {
		if _, ok := s.fresh[k]; !ok {
			return false
		}
	}
	return true
}

// --- unregister ---

func (s *Sim) opUnregister() *Op {
	ns, name, g := s.target()
	return s.unregisterOp(ns, name, g, s.principal())
}

func (s *Sim) unregisterOf(g *Gen, p string) *Op { return s.unregisterOp(g.ns, g.name, g, p) }

func (s *Sim) unregisterOp(ns, name string, g *Gen, p string) *Op {
	op := &Op{desc: fmt.Sprintf("%s unregisters %s.%s", p, ns, name), keys: append(tableKeys(ns, name), "loc")}
	switch {
	case g == nil:
		op.want = []int{404}
	case g.legalHold && !s.m.canLegalHold(p):
		// It would leave every listing: only who may lift the hold may.
		op.want, op.why = []int{403}, p+" unregisters a legal-held table without TABLE_LEGAL_HOLD"
		if g.holdUnsure {
			op.want = append(op.want, 200, 409)
		}
		op.keys = append(op.keys, "uuid:"+g.uuid, "grants")
	case s.unregisteredUUID(g.uuid):
		op.want, op.why = []int{409}, "a table of its uuid is unregistered already"
	default:
		op.want = []int{200}
		op.keys = append(op.keys, "uuid:"+g.uuid)
	}
	s.privileged(op, p, "TABLE_DROP")
	op.run = func() Outcome {
		return s.w.call(s.ctx, p, "POST", tablePath(ns, name)+"/unregister", nil)
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		var res createResult
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("unregister answer: %v", err)
		}
		g := s.genByUUID(res.Metadata.UUID, ns, name, live)
		if g == nil {
			g = s.genByUUID(res.Metadata.UUID, "", "", live)
		}
		if g == nil {
			return s.violatef("unregister of %s.%s answered uuid %s, which the model holds as no live table", ns, name, res.Metadata.UUID)
		}
		g.state = unregistered
		s.logf("   %s unregistered: its files and claims stay", g)
		return nil
	}
	return op
}

func (s *Sim) unregisteredUUID(uuid string) bool {
	for _, g := range s.m.inState(unregistered) {
		if g.uuid == uuid {
			return true
		}
	}
	return false
}

// --- views: replace (properties, the legal hold among them) and register ---

func (s *Sim) opViewReplace() *Op {
	lives := s.m.viewsIn(live)
	if len(lives) == 0 {
		return nil
	}
	return s.viewReplaceOf(pick(s, lives), s.principal())
}

// viewReplaceOf: p replaces v's properties (a comment; now and then its
// legal hold).
func (s *Sim) viewReplaceOf(v *View, p string) *Op {
	set := map[string]string{"comment": fmt.Sprint(s.rng.IntN(1000))}
	on := v.legalHold
	if s.chance(0.4) {
		on = s.chance(0.5)
		set["icehold.legal-hold"] = s.spelled(on)
	}
	op := &Op{kind: "view-replace", desc: fmt.Sprintf("%s replaces %s: set %v", p, v, set), keys: append(tableKeys(v.ns, v.name), "uuid:"+v.uuid), want: []int{200}}
	if _, writes := set["icehold.legal-hold"]; writes && !s.m.canLegalHold(p) {
		// Any write of the property needs TABLE_LEGAL_HOLD (the route
		// decides from the body), a change of it all the more.
		op.invalid, op.want, op.why = true, []int{403}, p+" writes a view's legal hold without TABLE_LEGAL_HOLD"
		op.keys = append(op.keys, "grants")
	}
	s.privileged(op, p, "TABLE_WRITE")
	ns, name := v.ns, v.name
	op.run = func() Outcome {
		return s.w.call(s.ctx, p, "POST", viewPath(ns, name), map[string]any{"requirements": []any{},
			"updates": []any{map[string]any{"action": "set-properties", "updates": set}}})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		var res struct {
			Meta string `json:"metadata-location"`
		}
		_ = json.Unmarshal(o.Body, &res)
		if v.state == live && v.ns == ns && v.name == name {
			v.legalHold = on
			if res.Meta != "" {
				v.meta = res.Meta
				v.metas = append(v.metas, res.Meta)
			}
		}
		return nil
	}
	return op
}

func (s *Sim) opViewRegister() *Op {
	var all []*View
	for _, st := range []state{live, soft, purging, gone} {
		all = append(all, s.m.viewsIn(st)...)
	}
	if len(all) == 0 {
		return nil
	}
	src := pick(s, all)
	ns, name := s.pickNS(), s.pickName()
	if (src.state == live || src.state == soft) && s.chance(0.3) {
		return s.viewRegisterCopy(ns, name, src)
	}
	op := &Op{kind: "view-register", desc: fmt.Sprintf("admin registers view %s.%s from %s's %s", ns, name, src, src.meta), keys: append(tableKeys(ns, name), "uuid:"+src.uuid)}
	_, nsOK := s.m.namespaces[ns]
	switch {
	case !nsOK:
		op.want = []int{404}
	case s.m.liveAt(ns, name) != nil || s.m.viewAt(ns, name) != nil:
		op.want = []int{409}
	case src.state == live || src.state == soft:
		op.want = []int{409} // its location is owned
	default:
		op.want = []int{200, 409}
	}
	if src.state != live && src.state != soft {
		op.want = append(op.want, 400) // its metadata file may be gone (read first)
	}
	meta := src.meta
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces/"+ns+"/register-view", map[string]any{"name": name, "metadata-location": meta})
	}
	op.after = s.viewRegistered(ns, name, src)
	return op
}

// viewRegisterCopy registers at ns.name a copy of src's metadata file that
// another catalog could have written: its own location and view uuid (a
// view moved between catalogs). The copy is written when the op runs; a
// refused register leaves it, by design.
func (s *Sim) viewRegisterCopy(ns, name string, src *View) *Op {
	loc := fmt.Sprintf("%s/FV/v%d", warehouse, s.m.nextID+1000*len(s.m.forged))
	s.m.nextID++
	op := &Op{kind: "view-register", desc: fmt.Sprintf("admin registers view %s.%s from a copy of %s's metadata at %s", ns, name, src, loc), keys: tableKeys(ns, name)}
	_, nsOK := s.m.namespaces[ns]
	switch {
	case !nsOK:
		op.want = []int{404}
	case s.m.liveAt(ns, name) != nil || s.m.viewAt(ns, name) != nil:
		op.want = []int{409}
	default:
		op.want = []int{200, 409} // 409: a purging table's tombstone holds the name
	}
	var meta string
	op.run = func() Outcome {
		var err error
		if meta, err = s.copyViewMetadata(src, loc); err != nil {
			return Outcome{Err: err}
		}
		return s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces/"+ns+"/register-view", map[string]any{"name": name, "metadata-location": meta})
	}
	after := s.viewRegistered(ns, name, nil)
	op.after = func(o Outcome, c bool) error {
		if meta != "" {
			s.m.forged = append(s.m.forged, meta)
		}
		return after(o, c)
	}
	return op
}

// copyViewMetadata writes src's metadata file at loc/metadata/ with loc as
// its location and a new view uuid.
func (s *Sim) copyViewMetadata(src *View, loc string) (string, error) {
	k, _ := keyOf(src.meta)
	out, err := s.w.s3.GetObject(s.ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	var md map[string]any
	if err := json.NewDecoder(out.Body).Decode(&md); err != nil {
		return "", err
	}
	md["location"], md["view-uuid"] = loc, uuid.NewString()
	b, _ := json.Marshal(md)
	path := loc + "/metadata/00000-" + uuid.NewString() + ".metadata.json"
	pk, _ := keyOf(path)
	_, err = s.w.s3.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(pk), Body: bytes.NewReader(b)})
	return path, err
}

// viewRegistered applies an accepted register-view (of src's metadata, or
// nil for a copy) to the model.
func (s *Sim) viewRegistered(ns, name string, src *View) func(o Outcome, _ bool) error {
	return func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		var res struct {
			MetadataLocation string `json:"metadata-location"`
			Metadata         struct {
				UUID     string            `json:"view-uuid"`
				Location string            `json:"location"`
				Props    map[string]string `json:"properties"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("register view answer: %v", err)
		}
		s.m.nextID++
		v := &View{seq: s.m.nextID, uuid: res.Metadata.UUID, ns: ns, name: name, location: res.Metadata.Location,
			meta: res.MetadataLocation, state: live, legalHold: held(res.Metadata.Props["icehold.legal-hold"])}
		if old := s.m.views[v.uuid]; old != nil && old.state != gone && old.state != purging {
			from := "a copy"
			if src != nil {
				from = src.String() + "'s metadata"
			}
			return s.violatef("register view of %s made %s, while %s still holds its uuid", from, v, old)
		}
		s.m.views[v.uuid] = v
		s.logf("   %s registered at %s", v, v.location)
		return nil
	}
}

// --- staged creates ---

// staged turns a create into the Iceberg REST client's other way to make a
// table: a stage-create answers metadata and writes nothing, then a commit
// with assert-create makes the table, on the table's route, or through
// transactions/commit beside a second new table of the namespace (each
// must count as a child of the namespace, own its location and be
// purgeable as any other). The model's outcome is the create's: the
// transaction's 204 is read back as the table's load.
func (s *Sim) staged(op *Op, p, ns, name string, body map[string]any) {
	if !op.invalid {
		// The commit that creates it needs TABLE_WRITE besides
		// (docs/design/authorization.md); a body the stage-create refuses
		// is a 400 before it (soak seed 1071 step 156).
		s.privileged(op, p, "TABLE_WRITE")
	}
	tx := s.chance(0.5)
	also := ""
	if tx && s.chance(0.7) {
		also = name + "_tx"
		op.keys = append(op.keys, tableKeys(ns, also)...)
		if s.m.liveAt(ns, also) != nil && !slices.Contains(op.want, 409) && !op.invalid {
			op.want = append(op.want, 409)
		}
	}
	ids := map[string]string{} // the uuid each stage-create answered
	kind := map[bool]string{false: "staged-create", true: "staged-create-tx"}[tx]
	op.desc = strings.Replace(op.desc, " creates ", fmt.Sprintf(" stage-creates and commits (%s) ", kind), 1)
	if also != "" {
		op.desc += " with " + ns + "." + also + " in the same transaction"
	}
	base := "/v1/" + catalogName + "/namespaces/" + ns + "/tables"
	op.run = func() Outcome {
		var changes []any
		var locs []string
		for _, n := range []string{name, also} {
			if n == "" {
				continue
			}
			sb := maps.Clone(body)
			sb["name"], sb["stage-create"] = n, true
			if n == also {
				delete(sb, "location")
				sb["properties"] = map[string]string{"format-version": "2"}
			}
			o := s.w.call(s.ctx, p, "POST", base, sb)
			if o.Status != 200 {
				return o
			}
			var res createResult
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return Outcome{Err: fmt.Errorf("stage-create answer: %w", err)}
			}
			props, _ := sb["properties"].(map[string]string)
			ids[n] = res.Metadata.UUID // a client assigns the staged uuid
			locs = append(locs, res.Metadata.Location)
			changes = append(changes, map[string]any{"identifier": map[string]any{"namespace": []string{ns}, "name": n},
				"requirements": []any{map[string]any{"type": "assert-create"}}, "updates": createUpdates(ids[n], res.Metadata.Location, props)})
		}
		if !tx {
			ch := changes[0].(map[string]any)
			o := s.w.call(s.ctx, p, "POST", base+"/"+url.PathEscape(name), map[string]any{"requirements": ch["requirements"], "updates": ch["updates"]})
			cover.add("op "+kind, o.ok())
			return o
		}
		o := s.w.call(s.ctx, p, "POST", "/v1/"+catalogName+"/transactions/commit", map[string]any{"table-changes": changes})
		cover.add("op "+kind, o.ok())
		if o.Status != 204 {
			return o
		}
		// Read back what the model needs; a table dropped again within
		// the round reads as the create's answer without its pointer.
		if got := s.w.call(s.ctx, p, "GET", base+"/"+url.PathEscape(name), nil); got.Status == 200 && strings.Contains(string(got.Body), ids[name]) {
			return got
		}
		raw, _ := json.Marshal(map[string]any{"metadata": map[string]any{"table-uuid": ids[name], "location": locs[0]}})
		return Outcome{Status: 200, Body: raw}
	}
	if also == "" {
		return
	}
	after := op.after
	op.after = func(o Outcome, contended bool) error {
		if err := after(o, contended); err != nil || o.Status != 200 {
			return err
		}
		got := s.w.call(s.ctx, admin, "GET", base+"/"+url.PathEscape(also), nil)
		var res createResult
		if got.Status != 200 || json.Unmarshal(got.Body, &res) != nil || res.Metadata.UUID != ids[also] {
			return nil // dropped or replaced within the round: the observation settles it
		}
		g := s.m.add(&Gen{uuid: ids[also], ns: ns, name: also, location: res.Metadata.Location, state: live,
			meta: res.MetadataLocation, metas: []string{res.MetadataLocation}})
		s.logf("   %s created at %s (in the transaction)", g, g.location)
		return s.record(g, g.meta, true)
	}
}

// createUpdates is what a client sends to finish a staged create (the
// format version is an update of its own, not a property).
func createUpdates(id, loc string, props map[string]string) []any {
	props = maps.Clone(props)
	delete(props, "format-version")
	return []any{
		map[string]any{"action": "assign-uuid", "uuid": id},
		map[string]any{"action": "upgrade-format-version", "format-version": 2},
		map[string]any{"action": "add-schema", "schema": json.RawMessage(schemaJSON), "last-column-id": 2},
		map[string]any{"action": "set-current-schema", "schema-id": -1},
		map[string]any{"action": "add-spec", "spec": json.RawMessage(specJSON)},
		map[string]any{"action": "set-default-spec", "spec-id": -1},
		map[string]any{"action": "add-sort-order", "sort-order": map[string]any{"order-id": 0, "fields": []any{}}},
		map[string]any{"action": "set-default-sort-order", "sort-order-id": -1},
		map[string]any{"action": "set-location", "location": loc},
		map[string]any{"action": "set-properties", "updates": props},
	}
}

// abandon: the metadata files g had, which a register with overwrite left
// behind: every pointer the model saw, and the metadata log of its last
// (a sweep commits twice in one barrier: the model sees only the second).
func (s *Sim) abandon(g *Gen) {
	for _, m := range g.metas {
		if k, ok := keyOf(m); ok {
			s.m.abandoned[k] = true
		}
	}
	if r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, g.meta); err == nil {
		for k := range r.keys {
			if strings.HasSuffix(k, ".metadata.json") {
				s.m.abandoned[k] = true
			}
		}
	}
}

// abandonUnder: every metadata file now under the location of the table
// the model holds live at ns.name (after a contended register with
// overwrite replaced whatever was current).
func (s *Sim) abandonUnder(ns, name string) error {
	g := s.m.liveAt(ns, name)
	if g == nil {
		return nil
	}
	p, ok := keyOf(strings.TrimRight(g.location, "/"))
	if !ok {
		return nil
	}
	objs, err := s.w.objects(s.ctx)
	if err != nil {
		return err
	}
	for k := range objs {
		if strings.HasPrefix(k, p+"/metadata/") && strings.HasSuffix(k, ".metadata.json") {
			s.m.abandoned[k] = true
		}
	}
	return nil
}

// txCreateAfterOf: p, short of TABLE_CREATE, commits a transaction whose
// first change is a property of lead and whose second creates ns.name
// (assert-create, the client's own uuid and default location): the create
// needs TABLE_CREATE wherever it sits in the body (SPEC §2), so a 403 that
// changes nothing. nil when p may create.
func (s *Sim) txCreateAfterOf(lead *Gen, p, name string) *Op {
	if p == admin || s.may(p, "TABLE_CREATE") {
		return nil
	}
	ns, id := lead.ns, uuid.NewString()
	loc := defaultLocation(ns, name, id)
	op := &Op{desc: fmt.Sprintf("%s commits a transaction: a property of %s, then a create of %s.%s", p, lead, ns, name),
		keys: append(append(tableKeys(lead.ns, lead.name), tableKeys(ns, name)...), "uuid:"+lead.uuid, "loc", "grants"),
		want: []int{403}, why: p + " lacks TABLE_CREATE (the create is the second change)"}
	op.run = func() Outcome {
		return s.w.call(s.ctx, p, "POST", "/v1/"+catalogName+"/transactions/commit", map[string]any{"table-changes": []any{
			map[string]any{"identifier": map[string]any{"namespace": []string{lead.ns}, "name": lead.name},
				"requirements": []any{map[string]any{"type": "assert-table-uuid", "uuid": lead.uuid}},
				"updates":      []any{map[string]any{"action": "set-properties", "updates": map[string]string{"sim.note": "tx"}}}},
			map[string]any{"identifier": map[string]any{"namespace": []string{ns}, "name": name},
				"requirements": []any{map[string]any{"type": "assert-create"}},
				"updates":      createUpdates(id, loc, map[string]string{"format-version": "2"})},
		}})
	}
	return op
}
