package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/icehold/icehold/shared/objects"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// Op is one request an actor makes, with what the model says of it.
type Op struct {
	kind  string
	actor int
	desc  string
	// keys name what the op touches (id:ns.t, uuid:…, loc:…, props): two
	// ops of a round that share one may land in either order.
	keys []string
	// invalid: the model says the request must be refused (a 4xx) and
	// change nothing; why says why.
	invalid bool
	why     string
	// conflict: the error type a 409 to it must carry (a refusal the model
	// foresaw, e.g. LegalHoldException; "" any).
	conflict string
	// want: the answers the model allows when the op runs alone (nil: any
	// but a 5xx).
	want []int
	// tolerateErr: a transport error is not a violation (iceberg-go ops
	// report their refusals as errors).
	tolerateErr bool
	// contingent: invalid only as the model stands before the round (a
	// legal hold): an op of the same round that shares a key may change
	// that, so contended it may be accepted.
	contingent bool
	// vended: an iceberg-go op asks for vended credentials (an engine).
	vended bool
	run    func() Outcome
	after  func(o Outcome, contended bool) error
}

// The small space of names: collisions are the point.
var (
	// c(1): a namespace whose name is no key-safe segment: the default
	// location of its tables escapes it (%28, %29), as SPEC §2's default
	// locations, never ambiguous, ask.
	// a and ab: a name that starts another (a filter or prefix query
	// without its separator reaches the other; held-out 7).
	namespaces = []string{"a", "ab", "c(1)"}
	tableNames = []string{"t", "u", "v"}
)

// weights of the operation kinds an actor picks from.
var opWeights = []struct {
	kind string
	w    int
}{
	{"ns-create", 2}, {"ns-drop", 1},
	{"create", 10}, {"append", 12}, {"delete-rows", 3}, {"overwrite-rows", 3},
	{"soft-drop", 6}, {"drop-purge", 3}, {"undrop", 7}, {"purge-now", 4},
	{"legal-hold", 5}, {"legal-hold-prop", 4}, {"hold-prop", 3},
	{"rename", 3}, {"register", 3},
	{"partition-drop", 4}, {"retention", 5}, {"snapshots", 3}, {"set-location", 2},
	{"catalog-hold", 2}, {"ns-hold", 2},
	{"bad-body", 4}, {"grant", 2}, {"catalog-setting", 2},
	{"view-create", 1}, {"view-drop", 2}, {"view-undrop", 1}, {"view-purge-now", 1}, {"view-rename", 1},
	{"view-replace", 2}, {"view-register", 1},
	{"transaction", 4}, {"register-overwrite", 3}, {"unregister", 2},
	{"engine-load", 4}, {"engine-append", 4}, {"engine-write", 2}, {"engine-escape", 3}, {"engine-upload", 1},
	{"bulk", 1},
	{"read-catalog", 1}, {"read-grant", 2}, {"read-soft-deleted", 1}, {"read-purge-jobs", 1},
	{"read-unregistered", 1}, {"read-verify", 1}, {"read-retention", 1}, {"read-etag", 1},
	{"orphan-sweep", 1},
}

func (s *Sim) pickOp(actor int) *Op {
	// From a third of the seed on (the common kinds have been accepted by
	// then), one pick in six goes to a kind not yet accepted.
	if s.step > s.steps/3 && s.chance(0.15) {
		if op := s.tourOp(actor); op != nil {
			return op
		}
	}
	total := 0
	for _, k := range opWeights {
		total += s.weight(k.kind, k.w)
	}
	for range 50 {
		n := s.rng.IntN(total)
		for _, k := range opWeights {
			w := s.weight(k.kind, k.w)
			if n < w {
				if op := s.makeOp(k.kind, actor); op != nil {
					op.kind, op.actor = k.kind, actor
					return op
				}
				break
			}
			n -= w
		}
	}
	op := s.opNSCreate(actor)
	op.kind, op.actor = "ns-create", actor
	return op
}

func (s *Sim) makeOp(kind string, actor int) *Op {
	switch kind {
	case "ns-create":
		return s.opNSCreate(actor)
	case "ns-drop":
		return s.opNSDrop()
	case "create":
		return s.opCreate()
	case "append":
		return s.opAppend()
	case "delete-rows":
		return s.opDeleteRows()
	case "overwrite-rows":
		return s.opOverwriteRows()
	case "soft-drop":
		return s.opDrop(false)
	case "drop-purge":
		return s.opDrop(true)
	case "undrop":
		return s.opUndrop()
	case "purge-now":
		return s.opPurgeNow()
	case "legal-hold":
		return s.opLegalHoldRecord()
	case "legal-hold-prop":
		return s.opLegalHoldProp()
	case "hold-prop":
		return s.opHoldProp()
	case "catalog-hold":
		return s.opCatalogHold()
	case "ns-hold":
		return s.opNamespaceHold()
	case "bad-body":
		return s.opBadBody()
	case "partition-drop":
		return s.opPartitionDrop()
	case "retention":
		return s.opRetention()
	case "snapshots":
		return s.opSnapshots()
	case "set-location":
		return s.opSetLocation()
	case "grant":
		return s.opGrant()
	case "catalog-setting":
		return s.opCatalogSetting()
	case "rename":
		return s.opRename()
	case "register":
		return s.opRegister()
	case "view-create":
		return s.opViewCreate()
	case "view-drop":
		return s.opViewDrop()
	case "view-undrop":
		return s.opViewUndrop()
	case "view-purge-now":
		return s.opViewPurgeNow()
	case "view-rename":
		return s.opViewRename()
	case "view-replace":
		return s.opViewReplace()
	case "view-register":
		return s.opViewRegister()
	case "transaction":
		return s.opTransaction()
	case "register-overwrite":
		return s.opRegisterOverwrite()
	case "unregister":
		return s.opUnregister()
	case "engine-load":
		return s.opEngineLoad()
	case "engine-append":
		return s.opEngineAppend()
	case "engine-write":
		return s.opEngineWrite()
	case "engine-escape":
		return s.opEngineEscape()
	case "engine-upload":
		return s.opEngineUpload()
	case "bulk":
		return s.opBulk()
	case "read-etag":
		return s.opReadETag()
	case "orphan-sweep":
		return s.opOrphanSweep()
	case "read-catalog", "read-grant", "read-soft-deleted", "read-purge-jobs", "read-unregistered", "read-verify", "read-retention":
		return s.opRead(kind)
	}
	return nil
}

func pick[T any](s *Sim, xs []T) T { return xs[s.rng.IntN(len(xs))] }

func (s *Sim) chance(p float64) bool { return s.rng.Float64() < p }

// principal picks who sends a request; "unprivileged" off keeps the legal
// hold's changes to those who may make them.
func (s *Sim) principal() string {
	if s.touring {
		return admin // the tour is for a kind's accepted case
	}
	if !s.allow("unprivileged") {
		if s.m.legalPriv && s.chance(0.3) {
			return holder
		}
		return admin
	}
	switch n := s.rng.IntN(20); {
	case n < 10:
		return admin
	case n < 15:
		return writer
	case n < 19:
		return holder
	}
	return reader
}

// tableKeys: an op on a table contends with ops on the same identifier
// and with namespace drops and creates.
func tableKeys(ns, name string) []string { return []string{"id:" + ns + "." + name, "ns:" + ns} }

// defaultLocation: where a table created without a location lives, its
// names escaped into key-safe segments.
func defaultLocation(ns, name, id string) string {
	return warehouse + "/" + objects.EscapeSegment(ns) + "/" + objects.EscapeSegment(name) + "-" + id
}

func tablePath(ns, name string) string {
	return "/v1/" + catalogName + "/namespaces/" + url.PathEscape(ns) + "/tables/" + url.PathEscape(name)
}

func lifecyclePath(ns, name string) string {
	return "/lifecycle/v1/catalogs/" + catalogName + "/namespaces/" + url.PathEscape(ns) + "/tables/" + url.PathEscape(name)
}

// may: principal holds the privilege (admins all; the others what the
// model's grants say).
func (s *Sim) may(principal, priv string) bool {
	return principal == admin || slices.Contains(s.m.grants[principal], priv)
}

// privileged: what principal p needs for op; without it the answer is a
// 403 (authorization comes before anything else). A grant changed in the
// same round may land either side.
func (s *Sim) privileged(op *Op, p string, privs ...string) {
	if p == admin {
		return
	}
	op.keys = append(op.keys, "grants")
	for _, priv := range privs {
		if !s.may(p, priv) {
			// 403, or a refusal the model foresaw from a step before the
			// one that needs priv (an append loads, then commits).
			refusals := []int{403}
			for _, w := range op.want {
				if w >= 400 {
					refusals = append(refusals, w)
				}
			}
			op.want, op.invalid, op.why = refusals, false, p+" lacks "+priv
			return
		}
	}
}

// --- namespaces ---

func (s *Sim) opNSCreate(int) *Op {
	// Mostly one of the pool's namespaces that does not exist: once all
	// do, every create is a 409 and a seed may never create one again.
	var missing []string
	for _, ns := range s.sw.nss {
		if _, ok := s.m.namespaces[ns]; !ok {
			missing = append(missing, ns)
		}
	}
	switch {
	case len(missing) > 0 && s.chance(0.7):
		return s.opNSCreateAt(pick(s, missing))
	case len(missing) == 0 && s.chance(0.5):
		// Every one exists (tables keep them): a namespace of its own,
		// which no other operation picks.
		return s.opNSCreateAt(fmt.Sprintf("n%d", len(s.m.namespaces)))
	}
	return s.opNSCreateAt(s.pickNS())
}

func (s *Sim) opNSCreateAt(ns string) *Op {
	_, exists := s.m.namespaces[ns]
	op := &Op{desc: "create namespace " + ns, keys: []string{"ns:" + ns}, want: []int{200}}
	if exists {
		op.want = []int{409}
	}
	// First the same create with a malformed lifecycle property (picked
	// by step: the seed's draws stay as they were), which must be a 400
	// that creates nothing (held-out 13: a create that checks none of
	// them stored "yes" as a legal hold that holds nothing).
	var bad map[string]string
	var badOut Outcome
	if !exists {
		bad = badNSProps[s.step%len(badNSProps)]
	}
	op.run = func() Outcome {
		if bad != nil {
			badOut = s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces", map[string]any{"namespace": []string{ns}, "properties": bad})
		}
		return s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces", map[string]any{"namespace": []string{ns}})
	}
	op.after = func(o Outcome, _ bool) error {
		if bad != nil && badOut.Status != 400 {
			return s.violatef("create namespace %s with properties %v: %s, want 400 (malformed or out of range) and nothing created", ns, bad, badOut)
		}
		if o.Status == 200 {
			s.m.namespaces[ns] = map[string]string{}
		}
		return nil
	}
	return op
}

// badNSProps: lifecycle properties a namespace create must refuse.
var badNSProps = []map[string]string{
	{"soft-delete.hold-period": "1 week"},
	{"icehold.legal-hold": "yes"},
	{"soft-delete.hold-period": "P99999D"},
	{"icehold.legal-hold": "on", "soft-delete.hold-period": "P1D"},
	{"soft-delete.hold-period": "-P1D"},
}

func (s *Sim) opNSDrop() *Op {
	// Mostly one that holds nothing live: one of ns-create's own, or one
	// of the pool's whose tables were all dropped (an engine drops the
	// tables, then the namespace; SPEC §4: soft-deleted tables do not keep
	// it). The pool's namespaces nearly always hold a table, and a drop
	// that is always a 409 reaches nothing of the drop path.
	var empty []string
	for ns := range s.m.namespaces {
		if !s.liveIn(ns) && (!slices.Contains(s.sw.nss, ns) || s.softIn(ns)) {
			empty = append(empty, ns)
		}
	}
	slices.Sort(empty) // map order is random; a seed's choices are not
	if s.touring {
		// The tour: any namespace that holds nothing live.
		empty = empty[:0]
		for ns := range s.m.namespaces {
			if !s.liveIn(ns) {
				empty = append(empty, ns)
			}
		}
		slices.Sort(empty)
	}
	if len(empty) > 0 && (s.chance(0.6) || s.touring) {
		return s.opNSDropAt(pick(s, empty))
	}
	return s.opNSDropAt(s.pickNS())
}

func (s *Sim) opNSDropAt(ns string) *Op {
	_, exists := s.m.namespaces[ns]
	op := &Op{desc: "drop namespace " + ns, keys: []string{"ns:" + ns}}
	switch {
	case !exists:
		op.want = []int{404}
	case s.liveIn(ns):
		op.want, op.conflict = []int{409}, "NamespaceNotEmptyException"
	default:
		op.want = []int{204}
	}
	op.run = func() Outcome { return s.w.call(s.ctx, admin, "DELETE", "/v1/"+catalogName+"/namespaces/"+ns, nil) }
	op.after = func(o Outcome, _ bool) error {
		if o.Status == 204 {
			delete(s.m.namespaces, ns)
		}
		return nil
	}
	return op
}

// softIn: ns holds a soft-deleted table.
func (s *Sim) softIn(ns string) bool {
	return slices.ContainsFunc(s.m.inState(soft), func(g *Gen) bool { return g.ns == ns })
}

func (s *Sim) liveIn(ns string) bool {
	for _, v := range s.m.viewsIn(live) {
		if v.ns == ns {
			return true
		}
	}
	for _, g := range s.m.inState(live) {
		if g.ns == ns {
			return true
		}
	}
	return false
}

// --- tables ---

const schemaJSON = `{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","type":"long","required":false},{"id":2,"name":"d","type":"date","required":false}]}`
const specJSON = `{"spec-id":0,"fields":[{"source-id":2,"field-id":1000,"name":"d","transform":"identity"}]}`

// durations the generator sends: clearly valid, and clearly invalid
// (malformed, negative, overflowing time.Duration, beyond 100 years).
var (
	validDurations   = []string{"PT1H", "P1D", "7d", "36h", "90m", "P2W", "P1DT12H", "PT30M", "P3D", "2d", "P10D", "PT2H", "P30D", "P365D", "P3650D", "1d"}
	invalidDurations = []string{"213504d", "P30501W", "307445735m", "5124096h", "P99999999999D", "106752d", "40000d", "1000000h",
		"7 days", "P", "-1d", "PT", "1.5d", "d", "P1DT", "P-1D",
		// Each part within 100 years, their sum past 292 (time.Duration's
		// range): the sum must be checked as it grows, not wrap.
		"P5214W36500DT876000H", "P36500DT876000H52560000M"}
)

func (s *Sim) duration() (string, bool) {
	if s.chance(0.35) && s.allow("bad-duration") && !s.touring {
		return pick(s, invalidDurations), false
	}
	return pick(s, validDurations), true
}

type createResult struct {
	MetadataLocation string `json:"metadata-location"`
	Metadata         struct {
		UUID     string            `json:"table-uuid"`
		Location string            `json:"location"`
		Props    map[string]string `json:"properties"`
	} `json:"metadata"`
}

func (s *Sim) opCreate() *Op {
	ns, name := s.pickNS(), s.pickName()
	p := s.principal()
	props := map[string]string{"format-version": "2", "write.delete.mode": "merge-on-read"}
	if s.chance(0.35) {
		// Copy-on-write (Iceberg's default): a delete rewrites the files
		// that hold its rows, and the older snapshots keep the old ones.
		props["write.delete.mode"] = "copy-on-write"
	}
	if s.chance(0.15) {
		props["icehold.legal-hold"] = "true"
	}
	if s.chance(0.2) {
		v, _ := s.duration()
		props["soft-delete.hold-period"] = v
	}
	loc, plain, outside := s.location()
	if !s.allow("location") {
		loc, plain, outside = "", true, false
	}
	return s.createOpAt(ns, name, p, loc, plain, outside, props)
}

// createOp is a create at a plain location inside the warehouse ("": the
// default one).
func (s *Sim) createOp(ns, name, p, loc string, props map[string]string) *Op {
	return s.createOpAt(ns, name, p, loc, true, false, props)
}

func (s *Sim) createOpAt(ns, name, p, loc string, plain, outside bool, props map[string]string) *Op {
	op := &Op{keys: tableKeys(ns, name)}
	var reasons []string
	if held(props["icehold.legal-hold"]) && !s.m.canLegalHold(p) {
		op.invalid = true
		reasons = append(reasons, p+" sets a legal hold without TABLE_LEGAL_HOLD")
	}
	if v, ok := props["soft-delete.hold-period"]; ok {
		if _, good := parseHold(v); !good {
			op.invalid = true
			reasons = append(reasons, "hold period "+v+" is out of range or malformed")
		}
	}
	body := map[string]any{"name": name, "schema": json.RawMessage(schemaJSON), "partition-spec": json.RawMessage(specJSON), "properties": props}
	if loc != "" {
		body["location"] = loc
		op.keys = append(op.keys, "loc")
	}
	if outside {
		op.invalid = true
		reasons = append(reasons, "location "+loc+" is not a table location inside the warehouse")
	}
	op.desc = fmt.Sprintf("%s creates %s.%s location=%q props=%v", p, ns, name, loc, props)
	op.why = strings.Join(reasons, "; ")
	_, nsOK := s.m.namespaces[ns]
	owner := s.owner(loc)
	switch {
	case op.invalid:
	case !nsOK:
		op.want = []int{404}
	case s.m.liveAt(ns, name) != nil:
		op.want = []int{409}
	case loc != "" && owner != nil && owner.state != purging:
		op.want, op.why = []int{409}, "the location overlaps "+owner.String()+"'s"
	case loc != "" && !plain:
		op.want = []int{200, 400, 409} // characters FileIOs write apart may be refused
	case loc != "" && s.formerOwner(loc, nil) != nil:
		op.want = []int{200, 409} // owned while a retained snapshot reaches it
		if fo := s.reachingFormerOwner(loc, nil); fo != nil {
			op.want, op.why = []int{409}, "a retained snapshot of "+fo.String()+" still reaches its former location"
			op.keys = append(op.keys, "uuid:"+fo.uuid)
		}
	default:
		op.want = []int{200, 409} // 409: a purge job's tombstone or claim holds it
	}
	s.privileged(op, p, "TABLE_CREATE")
	if props["icehold.legal-hold"] != "" && !s.m.canLegalHold(p) {
		op.keys = append(op.keys, "grants")
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, p, "POST", "/v1/"+catalogName+"/namespaces/"+ns+"/tables", body)
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		var res createResult
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("create answer: %v", err)
		}
		// A table created without a location gets <warehouse>/<ns>/<name>-<uuid>
		// (SPEC §2: a new table never shares a dropped one's prefix).
		if want := defaultLocation(ns, name, res.Metadata.UUID); loc == "" && res.Metadata.Location != want {
			return s.violatef("%s.%s created without a location is at %s, want %s", ns, name, res.Metadata.Location, want)
		}
		g := s.m.add(&Gen{uuid: res.Metadata.UUID, ns: ns, name: name, location: res.Metadata.Location, state: live,
			meta: res.MetadataLocation, metas: []string{res.MetadataLocation},
			legalHold: held(props["icehold.legal-hold"]), holdProp: props["soft-delete.hold-period"]})
		s.logf("   %s created at %s", g, g.location)
		return s.record(g, g.meta, true)
	}
	if s.allow("staged-create") && s.chance(0.3) {
		s.staged(op, p, ns, name, body)
	}
	return op
}

// target picks a live generation (or, now and then, an identifier that
// holds none).
func (s *Sim) target() (ns, name string, g *Gen) {
	lives := s.m.inState(live)
	if len(lives) > 0 && (s.touring || s.chance(0.85)) {
		g = pick(s, lives)
		return g.ns, g.name, g
	}
	ns, name = s.pickNS(), s.pickName()
	return ns, name, s.m.liveAt(ns, name)
}

// days the rows fall on: the last three weeks of the simulated clock.
func (s *Sim) day() string {
	return s.w.clock.Now().AddDate(0, 0, -s.rng.IntN(21)).Format("2006-01-02")
}

func (s *Sim) opAppend() *Op {
	ns, name, g := s.target()
	return s.appendOp(ns, name, g, pick(s, []string{admin, admin, writer}))
}

// opAppendTo appends to g (an intruder).
func (s *Sim) opAppendTo(g *Gen, p string) *Op {
	return s.appendOp(g.ns, g.name, g, p)
}

func (s *Sim) appendOp(ns, name string, g *Gen, p string) *Op {
	n := 1 + s.rng.IntN(5)
	rows := map[int64]string{}
	for range n {
		s.m.nextRow++
		rows[s.m.nextRow] = s.day()
	}
	return s.appendRowsOp(ns, name, g, p, rows)
}

// appendRowsOp appends rows (id → day) to ns.name (g: the table there).
func (s *Sim) appendRowsOp(ns, name string, g *Gen, p string, rows map[int64]string) *Op {
	op := &Op{desc: fmt.Sprintf("%s appends %d rows to %s.%s", p, len(rows), ns, name), keys: tableKeys(ns, name), tolerateErr: true}
	if g != nil {
		op.keys = append(op.keys, "uuid:"+g.uuid)
		op.want = []int{200}
	} else {
		op.want = []int{404}
	}
	s.privileged(op, p, "TABLE_READ", "TABLE_WRITE")
	var res appendResult
	op.run = func() Outcome {
		res = s.appendRowsVended(p, ns, name, rows, op.vended)
		return res.out
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		return s.committed(res.uuid, ns, name, res.meta, rows, nil, contended)
	}
	return op
}

// someRows picks a live table with rows (nil: none).
func (s *Sim) someRows() *Gen {
	var cands []*Gen
	for _, g := range s.m.inState(live) {
		if len(g.rows) > 0 {
			cands = append(cands, g)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	return pick(s, cands)
}

// rowsOf picks one or two of g's rows.
func (s *Sim) rowsOf(g *Gen) map[int64]string {
	ids := sortedIDs(g.rows)
	out := map[int64]string{}
	for range 1 + s.rng.IntN(2) {
		id := pick(s, ids)
		out[id] = g.rows[id]
	}
	return out
}

func (s *Sim) opDeleteRows() *Op { return s.deleteRowsOf(s.someRows()) }

// deleteRowsOf deletes one or two of g's rows.
func (s *Sim) deleteRowsOf(g *Gen) *Op {
	if g == nil || len(g.rows) == 0 {
		return nil
	}
	del, ns, name := s.rowsOf(g), g.ns, g.name
	return s.rowsCommitOp(g, fmt.Sprintf("admin deletes rows %v of %s", sortedIDs(del), g), del, nil,
		func() appendResult { return s.deleteRows(admin, ns, name, del) })
}

// opOverwriteRows: an engine rewrites rows (copy-on-write, an
// "overwrite" snapshot): the files holding them are replaced by files
// without them, and the rows come back under new ids, on the same day or
// today. The replaced files stay reachable from the older snapshots.
func (s *Sim) opOverwriteRows() *Op { return s.overwriteRowsOf(s.someRows()) }

// overwriteRowsOf rewrites one or two of g's rows.
func (s *Sim) overwriteRowsOf(g *Gen) *Op {
	if g == nil || len(g.rows) == 0 {
		return nil
	}
	old, ns, name := s.rowsOf(g), g.ns, g.name
	repl := map[int64]string{}
	for _, id := range sortedIDs(old) { // in order: each draws (exact replay, soak seed 1042)
		d := old[id]
		if s.chance(0.5) {
			d = s.day()
		}
		s.m.nextRow++
		repl[s.m.nextRow] = d
	}
	return s.rowsCommitOp(g, fmt.Sprintf("admin overwrites rows %v of %s with %v", sortedIDs(old), g, repl), old, repl,
		func() appendResult { return s.overwriteRows(admin, ns, name, old, repl) })
}

// rowsCommitOp: admin's commit to g that removes and adds rows (run makes
// it).
func (s *Sim) rowsCommitOp(g *Gen, desc string, removed, added map[int64]string, run func() appendResult) *Op {
	op := &Op{desc: desc, keys: append(tableKeys(g.ns, g.name), "uuid:"+g.uuid), tolerateErr: true, want: []int{200}}
	ns, name := g.ns, g.name
	var res appendResult
	op.run = func() Outcome {
		res = run()
		return res.out
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		return s.committed(res.uuid, ns, name, res.meta, added, removed, contended)
	}
	return op
}

// overwriteRows replaces the rows old by repl in one overwrite commit.
func (s *Sim) overwriteRows(principal, ns, name string, old, repl map[int64]string) appendResult {
	return s.withTable(principal, ns, name, func(tbl *table.Table) (*table.Table, error) {
		data, err := arrowRows(repl)
		if err != nil {
			return nil, err
		}
		defer data.Release()
		tx := tbl.NewTransaction()
		if hasDeleteFiles(tbl) {
			// iceberg-go's copy-on-write rewrite reads a data file without
			// its position deletes, so rows a merge-on-read delete removed
			// from the file come back (a client's defect, not icehold's;
			// soak seed 1021 at 2c198f9): delete, then append, in one commit.
			if err := tx.Delete(s.ctx, idsIn(old), nil); err != nil {
				return nil, err
			}
			if err := tx.AppendTable(s.ctx, data, 1000, nil); err != nil {
				return nil, err
			}
			return tx.Commit(s.ctx)
		}
		if err := tx.OverwriteTable(s.ctx, data, 1000, nil, table.WithOverwriteFilter(idsIn(old))); err != nil {
			return nil, err
		}
		return tx.Commit(s.ctx)
	})
}

// hasDeleteFiles: tbl's current snapshot counts delete files.
func hasDeleteFiles(tbl *table.Table) bool {
	sn := tbl.CurrentSnapshot()
	if sn == nil || sn.Summary == nil {
		return false
	}
	n := sn.Summary.Properties["total-delete-files"]
	return n != "" && n != "0"
}

// idsIn: the rows whose id is one of rows'.
func idsIn(rows map[int64]string) iceberg.BooleanExpression {
	var filter iceberg.BooleanExpression = iceberg.AlwaysFalse{}
	for _, id := range sortedIDs(rows) {
		filter = iceberg.NewOr(filter, iceberg.EqualTo(iceberg.Reference("id"), id))
	}
	return filter
}

func sortedIDs(m map[int64]string) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// committed records an accepted commit of the model's own: its metadata
// file and the rows it added or removed.
func (s *Sim) committed(uuid, ns, name, meta string, added, removed map[int64]string, contended bool) error {
	g := s.genByUUID(uuid, ns, name, live)
	if g == nil {
		// The table was dropped and undropped or renamed in the same
		// round: the observation finds it.
		g = s.genByUUID(uuid, "", "", live, soft)
	}
	if g == nil {
		return s.violatef("a commit to %s.%s (uuid %s) was accepted, but the model knows no such live table", ns, name, uuid)
	}
	s.advanceMeta(g, meta)
	for id, d := range removed {
		delete(g.rows, id)
		if contended {
			g.maybe[id] = d
		}
	}
	for id, d := range added {
		g.ever[id] = d
		if contended {
			g.maybe[id] = d
		} else {
			g.rows[id] = d
		}
	}
	if g.meta == meta {
		return s.record(g, meta, false)
	}
	return nil
}

// advanceMeta moves a generation's pointer to meta if it is newer.
func (s *Sim) advanceMeta(g *Gen, meta string) {
	if meta == "" || meta == g.meta {
		return
	}
	if metaVersion(meta) >= metaVersion(g.meta) {
		g.meta = meta
	}
	if !slices.Contains(g.metas, meta) {
		g.metas = append(g.metas, meta)
	}
}

func (s *Sim) genByUUID(uuid, ns, name string, states ...state) *Gen {
	var found *Gen
	for _, g := range s.m.gens {
		if g.uuid != uuid || !slices.Contains(states, g.state) {
			continue
		}
		if ns == "" || (g.ns == ns && g.name == name) {
			return g
		}
		if found == nil {
			found = g
		}
	}
	if ns != "" {
		return nil
	}
	return found
}

type appendResult struct {
	out        Outcome
	uuid, meta string
}

var rowSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
}, nil)

// appendRows appends rows with iceberg-go (its own data files, manifest
// and manifest list) as principal.
func (s *Sim) appendRows(principal, ns, name string, rows map[int64]string) appendResult {
	return s.appendRowsVended(principal, ns, name, rows, false)
}

// appendRowsVended: vended asks for vended credentials (an engine).
func (s *Sim) appendRowsVended(principal, ns, name string, rows map[int64]string, vended bool) appendResult {
	return s.withTableVended(principal, ns, name, vended, func(tbl *table.Table) (*table.Table, error) {
		data, err := arrowRows(rows)
		if err != nil {
			return nil, err
		}
		defer data.Release()
		tx := tbl.NewTransaction()
		if err := tx.AppendTable(s.ctx, data, 1000, nil); err != nil {
			return nil, err
		}
		return tx.Commit(s.ctx)
	})
}

// arrowRows: rows (id → day) as an Arrow table of rowSchema.
func arrowRows(rows map[int64]string) (arrow.Table, error) {
	var b strings.Builder
	b.WriteString("[")
	for i, id := range sortedIDs(rows) {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id": %d, "d": "%s"}`, id, rows[id])
	}
	b.WriteString("]")
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, rowSchema, strings.NewReader(b.String()))
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return array.NewTableFromRecords(rowSchema, []arrow.Record{rec}), nil
}

// deleteRows deletes rows: position deletes on a merge-on-read table, a
// rewrite of the files that hold them on a copy-on-write one.
func (s *Sim) deleteRows(principal, ns, name string, rows map[int64]string) appendResult {
	return s.withTable(principal, ns, name, func(tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.Delete(s.ctx, idsIn(rows), nil); err != nil {
			return nil, err
		}
		return tx.Commit(s.ctx)
	})
}

func (s *Sim) withTable(principal, ns, name string, fn func(*table.Table) (*table.Table, error)) appendResult {
	return s.withTableVended(principal, ns, name, false, fn)
}

func (s *Sim) withTableVended(principal, ns, name string, vended bool, fn func(*table.Table) (*table.Table, error)) appendResult {
	cat, rec, err := s.w.client(s.ctx, principal, vended)
	if err != nil {
		return appendResult{out: Outcome{Err: err}}
	}
	tbl, err := cat.LoadTable(s.ctx, table.Identifier{ns, name})
	if err != nil {
		return appendResult{out: iceOutcome(err, rec)}
	}
	uuid := tbl.Metadata().TableUUID().String()
	out, err := fn(tbl)
	if err != nil {
		return appendResult{out: iceOutcome(err, rec), uuid: uuid}
	}
	return appendResult{out: Outcome{Status: 200, Body: []byte(out.MetadataLocation())}, uuid: uuid, meta: out.MetadataLocation()}
}

// iceOutcome turns an iceberg-go error into the answer that caused it.
func iceOutcome(err error, rec *statusRecorder) Outcome {
	st := rec.status()
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable):
		st = 404
	case st == 0:
		return Outcome{Err: err}
	}
	return Outcome{Status: st, Body: []byte(err.Error())}
}

// --- drops ---

func (s *Sim) opDrop(purge bool) *Op {
	ns, name, g := s.target()
	return s.dropOp(ns, name, g, pick(s, []string{admin, writer}), purge)
}

// opDropOf drops g (an intruder).
func (s *Sim) opDropOf(g *Gen, p string, purge bool) *Op {
	return s.dropOp(g.ns, g.name, g, p, purge)
}

func (s *Sim) dropOp(ns, name string, g *Gen, p string, purge bool) *Op {
	path := tablePath(ns, name)
	// "loc": a hard drop or a purge frees the table's location for a
	// create of the same round.
	op := &Op{keys: append(tableKeys(ns, name), "props", "nsprops:"+ns, "loc")}
	what := "soft-drops"
	if purge {
		what = "drops with purge"
		path += "?purgeRequested=true"
	}
	op.desc = fmt.Sprintf("%s %s %s.%s", p, what, ns, name)
	switch {
	case g == nil:
		op.want = []int{404}
	case purge && g.holdUnsure:
		op.want = []int{204, 409}
	case purge && g.legalHold:
		op.invalid, op.contingent, op.why, op.conflict = true, true, "the table is under legal hold", "LegalHoldException"
	default:
		op.keys = append(op.keys, "uuid:"+g.uuid)
		op.want = []int{204}
	}
	if purge {
		s.privileged(op, p, "TABLE_DROP_WITH_PURGE")
	} else {
		s.privileged(op, p, "TABLE_DROP")
	}
	// The round's catalog and namespace properties: a drop racing a change
	// of them may take either hold period.
	props, nsProps := cloneMap(s.m.catProps), cloneMap(s.m.namespaces[ns])
	op.run = func() Outcome { return s.w.call(s.ctx, p, "DELETE", path, nil) }
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 204 {
			return nil
		}
		if purge {
			return s.purgeAccepted(o.Header.Get("Icehold-Purge-Job"), ns, name, contended)
		}
		g := s.m.liveAt(ns, name)
		if g == nil {
			// Undropped and dropped again in one round, or the model's
			// order differs: the observation settles it.
			s.logf("   (the model holds no live %s.%s; the observation will say which was dropped)", ns, name)
			return nil
		}
		on, was := s.softOn(s.m.catProps), s.softOn(props)
		if !on && !was && contended {
			// Which generation held the name when the drop landed: the
			// observation says (the one that vanished).
			s.hardDrops[ns+"."+name]++
			return nil
		}
		if !on && !was {
			// A hard drop: the entry and its claim go, the files stay.
			g.state = released
			s.logf("   %s dropped without purge (soft delete off): its files stay, owned by nobody", g)
			return nil
		}
		racedSetting := s.touched["props"] > 1
		if racedSetting {
			// A catalog setting of the same round may have landed before
			// or after the drop, whichever order the model applied them
			// in: the observation says which purge-on-expiry it took, and
			// whether soft delete was still on.
			props = nil
		}
		s.softDropped(g, props, nsProps)
		g.mayRelease = on != was || racedSetting // raced a change of soft-delete.enabled
		return nil
	}
	return op
}

func cloneMap(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// softDropped moves g into the soft-deleted state at the clock's time.
func (s *Sim) softDropped(g *Gen, props, nsProps map[string]string) {
	now := s.w.clock.Now()
	g.state, g.droppedAt, g.softBefore, g.everSoft = soft, now, g.everSoft, true
	poe := func(m map[string]string) bool {
		v, set := m["soft-delete.purge-on-expiry"]
		on, _ := strconv.ParseBool(v)
		return on || !set // on unless set off
	}
	g.purgeOnExpiry, g.poeUnsure = poe(s.m.catProps), props == nil || poe(props) != poe(s.m.catProps)
	g.purgeAt = now.Add(s.m.holdFor(g))
	s.logf("   %s soft-deleted, purge at %s (hold %v)", g, g.purgeAt.Format(time.RFC3339), s.m.holdFor(g))
}

type jobView struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	TableUUID string   `json:"table-uuid"`
	State     string   `json:"state"`
	Namespace []string `json:"namespace"`
	Table     string   `json:"table"`
	Raw       map[string]any
}

func (s *Sim) job(id string) (jobView, error) {
	o := s.w.call(s.ctx, admin, "GET", "/lifecycle/v1/catalogs/"+catalogName+"/purge-jobs/"+id, nil)
	if o.Status != 200 {
		return jobView{}, fmt.Errorf("job %s: %s", id, o)
	}
	var j jobView
	if err := json.Unmarshal(o.Body, &j); err != nil {
		return j, err
	}
	_ = json.Unmarshal(o.Body, &j.Raw)
	return j, nil
}

// purgeAccepted: a permanent delete with purge was accepted; the job names
// the generation it deletes.
func (s *Sim) purgeAccepted(jobID, ns, name string, contended bool) error {
	if jobID == "" {
		return s.violatef("a purge of %s.%s was accepted without naming its job", ns, name)
	}
	j, err := s.job(jobID)
	if err != nil {
		return err
	}
	g := s.genByUUID(j.TableUUID, ns, name, live, soft)
	if g == nil {
		g = s.genByUUID(j.TableUUID, "", "", live, soft)
	}
	if g == nil {
		return s.violatef("purge job %s deletes table uuid %s (%s.%s), which the model holds neither live nor soft-deleted", jobID, j.TableUUID, ns, name)
	}
	if g.legalHold && !g.holdUnsure {
		return s.violatef("purge job %s deletes %s, which is under legal hold", jobID, g)
	}
	s.startPurging(g, jobID, contended)
	return nil
}

// startPurging: g's files may go from now on; what its prefix held before
// the round is what the job must account for.
func (s *Sim) startPurging(g *Gen, jobID string, contended bool) {
	g.state, g.job, g.contendedPurge, g.purgeMeta = purging, jobID, contended, g.meta
	g.expiring = s.expireJobRunning(g.uuid, jobID)
	g.before = map[string]bool{}
	if prefix, ok := keyOf(strings.TrimRight(g.location, "/")); ok {
		for k := range s.pre {
			if strings.HasPrefix(k, prefix+"/") {
				g.before[k] = true
			}
		}
	}
	s.logf("   %s purging (job %s, %d objects under its location)", g, jobID, len(g.before))
}

// expireJobRunning: a job other than except, of the table uuid, has not
// ended (an expire job deletes under the prefix beside the purge).
func (s *Sim) expireJobRunning(uuid, except string) bool {
	active, err := s.w.activeJobs(s.ctx)
	if err != nil {
		return true // unknown: the count is not checked
	}
	for _, a := range active {
		if a.ID == except {
			continue
		}
		if j, err := s.job(a.ID); err != nil || j.Raw["table-uuid"] == uuid {
			return true
		}
	}
	return false
}

func (s *Sim) softTarget() (ns, name string, gens []*Gen) {
	softs := s.m.inState(soft)
	// Mostly an unheld one: held records last (a seed's soft-deleted
	// tables end up mostly held), and a held one only refuses.
	unheld := slices.DeleteFunc(slices.Clone(softs), func(g *Gen) bool { return g.legalHold })
	if len(unheld) > 0 && s.chance(0.6) {
		softs = unheld
	}
	if len(softs) > 0 && s.chance(0.85) {
		g := pick(s, softs)
		return g.ns, g.name, s.m.softAt(g.ns, g.name)
	}
	ns, name = s.pickNS(), s.pickName()
	return ns, name, s.m.softAt(ns, name)
}

// lifecycleBody renders a lifecycle route's body: mostly the valid one,
// otherwise a malformed variant (SPEC §2: unknown fields, duplicated keys,
// nulls and wrong types are a 400 that changes nothing); touring, the
// valid one (the tour is there for a kind's accepted case).
func (s *Sim) lifecycleBody(fields map[string]any, required string) (body string, bad string) {
	valid, _ := json.Marshal(fields)
	if s.touring || !s.chance(0.3) || !s.allow("bad-body") {
		return string(valid), ""
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	typo := func(k string) string { return strings.ReplaceAll(k, "-", "_") }
	switch s.rng.IntN(7) {
	case 0: // a typo'd key
		if len(keys) == 0 {
			return `{"table_uuid": "x"}`, "unknown field table_uuid"
		}
		k := pick(s, keys)
		m := map[string]any{}
		for kk, v := range fields {
			m[kk] = v
		}
		delete(m, k)
		m[typo(k)+"s"] = fields[k]
		b, _ := json.Marshal(m)
		return string(b), "unknown field " + typo(k) + "s"
	case 1: // an extra field
		m := map[string]any{"x": []int{1}}
		for k, v := range fields {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return string(b), "unknown field x"
	case 2: // null
		if required != "" {
			return `{"` + required + `": null}`, "null " + required
		}
		if len(keys) > 0 {
			return `{"` + pick(s, keys) + `": null}`, "null value"
		}
		return `null`, "body null"
	case 3: // a duplicated key
		if len(keys) > 0 {
			k := pick(s, keys)
			v, _ := json.Marshal(fields[k])
			return strings.TrimSuffix(string(valid), "}") + `,"` + k + `":` + string(v) + `}`, "duplicated key " + k
		}
		return `{"table-uuid": "a", "table-uuid": "b"}`, "duplicated key table-uuid"
	case 4: // a wrong type
		k := required
		if k == "" {
			k = "table-uuid"
		}
		return `{"` + k + `": 5}`, "wrong type of " + k
	case 5: // trailing data
		return string(valid) + ` {}`, "trailing data"
	default: // absurdly large
		k := required
		if k == "" {
			k = "table-uuid"
		}
		return `{"` + k + `": "` + strings.Repeat("9", 200000) + `"}`, "huge " + k
	}
}

func (s *Sim) opUndrop() *Op {
	ns, name, gens := s.softTarget()
	p := pick(s, []string{admin, writer})
	fields := map[string]any{}
	var g *Gen
	if len(gens) > 0 && (len(gens) > 1 || s.chance(0.5)) && s.chance(0.8) {
		g = pick(s, gens)
		fields["table-uuid"] = g.uuid
	} else if len(gens) == 1 {
		g = gens[0]
	}
	if !s.allow("undrop-held") && g != nil && g.legalHold {
		return nil
	}
	toNS, toName := ns, name
	if s.chance(0.3) {
		toNS, toName = s.pickNS(), s.pickName()
		for i := 0; i < 4 && s.chance(0.8) && (s.m.liveAt(toNS, toName) != nil || toNS+"."+toName == ns+"."+name); i++ {
			// Mostly a free name of another identifier: an undrop that
			// lands somewhere new (its answer, record and event all name
			// the new identifier).
			toNS, toName = s.pickNS(), s.pickName()
		}
		fields["rename-to"] = map[string]any{"namespace": []string{toNS}, "name": toName}
	}
	body, bad := s.lifecycleBody(fields, "")
	if s.chance(0.1) && bad == "" {
		// No body at all: both fields are optional.
		body, fields, toNS, toName = "", map[string]any{}, ns, name
		g = nil
		if len(gens) == 1 {
			g = gens[0]
		}
	}
	op := &Op{desc: fmt.Sprintf("%s undrops %s.%s %s", p, ns, name, trunc(body, 120)), keys: append(tableKeys(ns, name), tableKeys(toNS, toName)...)}
	if g != nil {
		op.keys = append(op.keys, "uuid:"+g.uuid)
	}
	_, nsOK := s.m.namespaces[toNS]
	switch {
	case bad != "":
		op.invalid, op.why = true, bad
	case g == nil && len(gens) == 0:
		op.want = []int{404}
	case g == nil:
		op.want = []int{409}
	case fields["table-uuid"] == nil && len(gens) > 1:
		op.want = []int{409}
	default:
		// Every refusal that applies may be the one answered.
		if !nsOK {
			op.want = append(op.want, 404)
		}
		if s.m.liveAt(toNS, toName) != nil {
			op.want = append(op.want, 409)
		}
		if g.legalHold {
			op.want = append(op.want, 409) // a hold the undrop would lift is refused
		}
		if len(op.want) == 0 || (g.legalHold && len(op.want) == 1) {
			op.want = append(op.want, 200, 409) // 409: a purge job's tombstone holds the name
		}
	}
	s.privileged(op, p, "TABLE_UNDROP")
	op.run = func() Outcome {
		var b any
		if body != "" {
			b = body
		}
		return s.w.call(s.ctx, p, "POST", lifecyclePath(ns, name)+"/undrop", b)
	}
	op.after = s.undropTo(ns, name, toNS, toName)
	return op
}

// undropTo: opUndropAfter, once the answer names where the undrop was
// asked to land, toNS.toName (held-out 9: a rename-to's namespace
// dropped, the table back in its old one under the new name, the
// answer saying so and the model following it).
func (s *Sim) undropTo(ns, name, toNS, toName string) func(Outcome, bool) error {
	after := s.opUndropAfter(ns, name)
	return func(o Outcome, contended bool) error {
		if o.Status == 200 {
			var res struct {
				Namespace []string `json:"namespace"`
				Name      string   `json:"name"`
			}
			if err := json.Unmarshal(o.Body, &res); err == nil && (strings.Join(res.Namespace, ".") != toNS || res.Name != toName) {
				return s.violatef("an undrop of %s.%s asked to land at %s.%s answered %s.%s", ns, name, toNS, toName, strings.Join(res.Namespace, "."), res.Name)
			}
		}
		return after(o, contended)
	}
}

// opUndropAfter applies an accepted undrop of ns.name: the generation its
// answer names is live again, and reads back every row it had.
func (s *Sim) opUndropAfter(ns, name string) func(Outcome, bool) error {
	return func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		var res struct {
			Namespace []string `json:"namespace"`
			Name      string   `json:"name"`
			UUID      string   `json:"table-uuid"`
			Meta      string   `json:"metadata-location"`
		}
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("undrop answer: %v", err)
		}
		ug := s.genByUUID(res.UUID, ns, name, soft)
		if ug == nil {
			ug = s.genByUUID(res.UUID, "", "", soft)
		}
		if ug == nil {
			return s.violatef("undrop restored uuid %s, which the model holds as no soft-deleted table", res.UUID)
		}
		ug.state, ug.ns, ug.name = live, strings.Join(res.Namespace, "."), res.Name
		if s.m.undropped[ug.uuid] == nil {
			s.m.undropped[ug.uuid] = map[string]bool{}
		}
		s.m.undropped[ug.uuid][ug.ns+"."+ug.name] = true
		s.advanceMeta(ug, res.Meta)
		if err := s.record(ug, ug.meta, false); err != nil {
			return err
		}
		if r, err := s.reach.of(s.ctx, s.w.srv.Purge.IOProps, ug.meta); err == nil && held(r.props["icehold.legal-hold"]) && !ug.legalHold {
			ug.holdUnsure = true
		}
		s.logf("   %s undropped", ug)
		if contended || ug.forged || ug.bulk {
			return nil // another op of the round may have written to it; a forgery's rows are borrowed
		}
		return s.checkRows(ug, "undrop")
	}
}

func (s *Sim) opPurgeNow() *Op {
	ns, name, gens := s.softTarget()
	// Most soft-deleted tables are held one way or another, and the holder
	// may not purge: aim at an unheld one half the time, or purge-now
	// rarely gets past its refusals.
	var free []*Gen
	for _, g := range s.m.inState(soft) {
		if !g.legalHold && !g.holdUnsure {
			free = append(free, g)
		}
	}
	if len(free) > 0 && (s.touring || s.chance(0.5)) {
		g := pick(s, free)
		ns, name, gens = g.ns, g.name, s.m.softAt(g.ns, g.name)
	}
	p := pick(s, []string{admin, admin, writer, writer, holder})
	if s.touring {
		p = admin // the tour is for the accepted case
	}
	fields := map[string]any{}
	var g *Gen
	if len(gens) > 0 && (s.touring || s.chance(0.7)) {
		g = pick(s, gens)
		fields["table-uuid"] = g.uuid
	} else if len(gens) == 1 {
		g = gens[0]
	}
	body, bad := s.lifecycleBody(fields, "")
	op := &Op{desc: fmt.Sprintf("%s purges now %s.%s %s", p, ns, name, trunc(body, 120)), keys: tableKeys(ns, name)}
	if g != nil {
		op.keys = append(op.keys, "uuid:"+g.uuid)
	}
	switch {
	case bad != "":
		op.invalid, op.why = true, bad
	case g == nil && len(gens) == 0:
		op.want = []int{404}
	case g == nil || (fields["table-uuid"] == nil && len(gens) > 1):
		op.want = []int{409}
	case g.legalHold:
		op.invalid, op.contingent, op.why, op.conflict = true, true, "the soft-deleted table is under legal hold", "LegalHoldException"
	default:
		op.want = []int{202}
	}
	s.privileged(op, p, "TABLE_DROP_WITH_PURGE")
	op.run = func() Outcome { return s.w.call(s.ctx, p, "POST", lifecyclePath(ns, name)+"/purge-now", body) }
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 202 {
			return nil
		}
		var j jobView
		if err := json.Unmarshal(o.Body, &j); err != nil {
			return s.violatef("purge-now answer: %v", err)
		}
		return s.purgeAccepted(j.ID, ns, name, contended)
	}
	return op
}

// --- legal hold ---

func (s *Sim) opLegalHoldRecord() *Op {
	softs := s.m.inState(soft)
	var g *Gen
	uuid := "00000000-0000-4000-8000-000000000000"
	if len(softs) > 0 && s.chance(0.9) {
		g = pick(s, softs)
		uuid = g.uuid
	}
	return s.legalHoldRecordOf(g, uuid, s.principal(), s.chance(0.5))
}

// legalHoldRecordOf: p sets (or lifts) the legal hold of soft-deleted g
// (nil: a uuid no record has) by its uuid.
func (s *Sim) legalHoldRecordOf(g *Gen, uuid, p string, on bool) *Op {
	body, bad := s.lifecycleBody(map[string]any{"enabled": on}, "enabled")
	op := &Op{desc: fmt.Sprintf("%s sets the legal hold of soft-deleted %s: %s", p, short(uuid), trunc(body, 80)), keys: []string{"uuid:" + uuid}}
	switch {
	case !s.m.canLegalHold(p):
		op.invalid, op.why = true, p+" lacks TABLE_LEGAL_HOLD"
	case bad != "":
		op.invalid, op.why = true, bad
	case g == nil:
		op.want = []int{404}
	case s.softWithUUID(uuid) > 1:
		op.want = []int{409} // several generations of the uuid: which one?
	default:
		op.want = []int{200}
	}
	if p != admin {
		// Whether p may rests on its grant either way: one taken away in
		// the same round refuses an op the model allowed (soak seed 1049
		// step 114).
		op.keys = append(op.keys, "grants")
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, p, "POST", "/lifecycle/v1/catalogs/"+catalogName+"/soft-deleted-tables/"+uuid+"/legal-hold", body)
	}
	op.after = func(o Outcome, contended bool) error {
		s.m.heldChange(g, on, o.Status, contended)
		if o.Status == 200 && g != nil && g.state == soft {
			g.legalHold, g.holdUnsure = on, false
		}
		return nil
	}
	return op
}

func (s *Sim) softWithUUID(uuid string) int {
	n := 0
	for _, g := range s.m.inState(soft) {
		if g.uuid == uuid {
			n++
		}
	}
	return n
}

// commit sends a standard Iceberg commit of table properties.
func (s *Sim) commitProps(p, ns, name string, set map[string]string, remove []string) Outcome {
	var updates []map[string]any
	if len(set) > 0 {
		updates = append(updates, map[string]any{"action": "set-properties", "updates": set})
	}
	if len(remove) > 0 {
		updates = append(updates, map[string]any{"action": "remove-properties", "removals": remove})
	}
	return s.w.call(s.ctx, p, "POST", tablePath(ns, name), map[string]any{"requirements": []any{}, "updates": updates})
}

func (s *Sim) opLegalHoldProp() *Op {
	ns, name, g := s.target()
	p := s.principal()
	set, remove := map[string]string{}, []string(nil)
	var on bool
	switch s.rng.IntN(3) {
	case 0:
		set["icehold.legal-hold"], on = s.spelled(true), true
	case 1:
		set["icehold.legal-hold"] = s.spelled(false)
	default:
		remove = []string{"icehold.legal-hold"}
	}
	return s.legalHoldPropOp(ns, name, g, p, set, remove, on)
}

// opSetLegalHoldProp sets or clears g's legal hold by a commit (an intruder).
func (s *Sim) opSetLegalHoldProp(g *Gen, p string, on bool) *Op {
	return s.legalHoldPropOp(g.ns, g.name, g, p, map[string]string{"icehold.legal-hold": s.spelled(on)}, nil, on)
}

func (s *Sim) legalHoldPropOp(ns, name string, g *Gen, p string, set map[string]string, remove []string, on bool) *Op {
	op := &Op{desc: fmt.Sprintf("%s commits %s.%s set=%v remove=%v", p, ns, name, set, remove), keys: tableKeys(ns, name)}
	change := g != nil && g.legalHold != on
	switch {
	case !s.m.canLegalHold(p) && (change || g == nil):
		// Setting or clearing it needs TABLE_LEGAL_HOLD; a no-op write
		// of the same value may be refused too.
		op.invalid, op.why = true, p+" changes icehold.legal-hold without TABLE_LEGAL_HOLD"
		if g == nil {
			op.invalid, op.want = false, []int{403, 404}
		}
	case g == nil:
		op.want = []int{404}
	default:
		op.want = []int{200}
	}
	if !s.m.canLegalHold(p) && g != nil && (!change || g.holdUnsure) {
		op.invalid, op.want = false, []int{200, 403}
	}
	if g != nil {
		op.keys = append(op.keys, "uuid:"+g.uuid)
	}
	s.privileged(op, p, "TABLE_WRITE")
	if !s.m.canLegalHold(p) {
		op.keys = append(op.keys, "grants")
	}
	op.run = func() Outcome { return s.commitProps(p, ns, name, set, remove) }
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		return s.propsCommitted(o, ns, name, func(g *Gen) { g.legalHold, g.holdUnsure = on, false })
	}
	return op
}

// propsCommitted applies an accepted property commit to its generation.
func (s *Sim) propsCommitted(o Outcome, ns, name string, apply func(*Gen)) error {
	return s.propsCommittedRefs(o, ns, name, false, apply)
}

// propsCommittedRefs: refs says the commit set the table's refs.
func (s *Sim) propsCommittedRefs(o Outcome, ns, name string, refs bool, apply func(*Gen)) error {
	var res createResult
	if err := json.Unmarshal(o.Body, &res); err != nil {
		return s.violatef("commit answer: %v", err)
	}
	g := s.genByUUID(res.Metadata.UUID, ns, name, live)
	if g == nil {
		// A drop of the same round landed after the commit (a commit after
		// it would be a 404): the dropped table is the committed one.
		if g = s.genByUUID(res.Metadata.UUID, ns, name, soft, purging); g == nil || !s.touchedGen(g) || s.touched["id:"+g.ident()] < 2 {
			return s.violatef("a commit to %s.%s (uuid %s) was accepted, but the model knows no such live table", ns, name, res.Metadata.UUID)
		}
	}
	s.advanceMeta(g, res.MetadataLocation)
	apply(g)
	if g.meta == res.MetadataLocation {
		return s.record(g, g.meta, refs)
	}
	return nil
}

func (s *Sim) opHoldProp() *Op {
	ns, name, g := s.target()
	v, ok := s.duration()
	if !ok && s.chance(0.6) {
		if op := s.badChangeOp(); op != nil {
			return op
		}
	}
	return s.holdPropOf(ns, name, g, v, ok)
}

// badChangeOp commits a malformed value of a lifecycle property a live
// table already sets (a change, not an add: a check of the properties a
// commit adds alone lets it through), by admin; a 4xx that changes
// nothing is the only answer.
func (s *Sim) badChangeOp() *Op {
	type bad struct {
		g      *Gen
		key, v string
	}
	var cands []bad
	for _, g := range s.m.inState(live) {
		if g.holdProp != "" {
			cands = append(cands, bad{g, "soft-delete.hold-period", pick(s, invalidDurations)})
		}
		if g.legalHold && !g.holdUnsure {
			cands = append(cands, bad{g, "icehold.legal-hold", pick(s, []string{"maybe", "yes", "on", ""})})
		}
		if g.minKeep > 0 {
			cands = append(cands, bad{g, "history.expire.min-snapshots-to-keep", pick(s, []string{"-1", "0x10", "2147483648", "3 snapshots"})})
		}
	}
	if len(cands) == 0 {
		return nil
	}
	c := pick(s, cands)
	op := &Op{desc: fmt.Sprintf("admin changes %s of %s to %q", c.key, c.g, c.v), keys: append(tableKeys(c.g.ns, c.g.name), "uuid:"+c.g.uuid),
		invalid: true, why: c.key + " " + c.v + " is malformed or out of range"}
	op.run = func() Outcome {
		return s.commitProps(admin, c.g.ns, c.g.name, map[string]string{c.key: c.v}, nil)
	}
	return op
}

// holdPropOf: admin sets ns.name's own hold period to v (ok: v is valid).
func (s *Sim) holdPropOf(ns, name string, g *Gen, v string, ok bool) *Op {
	op := &Op{desc: fmt.Sprintf("admin sets soft-delete.hold-period=%s on %s.%s", v, ns, name), keys: tableKeys(ns, name)}
	switch {
	case !ok:
		op.invalid, op.why = true, "hold period "+v+" is out of range or malformed"
	case g == nil:
		op.want = []int{404}
	default:
		op.want = []int{200}
		op.keys = append(op.keys, "uuid:"+g.uuid)
	}
	op.run = func() Outcome {
		return s.commitProps(admin, ns, name, map[string]string{"soft-delete.hold-period": v}, nil)
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		return s.propsCommitted(o, ns, name, func(g *Gen) { g.holdProp = v })
	}
	return op
}

// minKeepOf: admin sets g's history.expire.min-snapshots-to-keep to n.
func (s *Sim) minKeepOf(g *Gen, n int) *Op {
	ns, name := g.ns, g.name
	op := &Op{desc: fmt.Sprintf("admin sets history.expire.min-snapshots-to-keep=%d on %s", n, g), keys: append(tableKeys(ns, name), "uuid:"+g.uuid), want: []int{200}}
	op.run = func() Outcome {
		return s.commitProps(admin, ns, name, map[string]string{"history.expire.min-snapshots-to-keep": fmt.Sprint(n)}, nil)
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		return s.propsCommitted(o, ns, name, func(g *Gen) { g.minKeep = n })
	}
	return op
}

func (s *Sim) opCatalogHold() *Op {
	v, ok := s.duration()
	fields := map[string]any{"updates": map[string]string{"soft-delete.hold-period": v}}
	remove := s.chance(0.2)
	if remove {
		fields = map[string]any{"removals": []string{"soft-delete.hold-period"}}
		ok = true
	}
	body, bad := s.lifecycleBody(fields, "")
	op := &Op{desc: "admin sets the catalog's properties " + trunc(body, 100), keys: []string{"props"}}
	switch {
	case bad != "":
		op.invalid, op.why = true, bad
	case !ok:
		op.invalid, op.why = true, "hold period "+v+" is out of range or malformed"
	default:
		op.want = []int{200}
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", "/lifecycle/v1/catalogs/"+catalogName+"/properties", body)
	}
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 200 {
			return nil
		}
		if remove {
			delete(s.m.catProps, "soft-delete.hold-period")
		} else {
			s.m.catProps["soft-delete.hold-period"] = v
		}
		if contended {
			return nil
		}
		return s.catalogAnswered(o, "soft-delete.hold-period", v, remove)
	}
	return op
}

func (s *Sim) opNamespaceHold() *Op {
	v, ok := s.duration()
	return s.nsHoldOf(s.pickNS(), v, ok)
}

// nsHoldOf: admin sets namespace ns's hold period to v (ok: v is valid).
func (s *Sim) nsHoldOf(ns, v string, ok bool) *Op {
	_, exists := s.m.namespaces[ns]
	op := &Op{desc: fmt.Sprintf("admin sets soft-delete.hold-period=%s on namespace %s", v, ns), keys: []string{"nsprops:" + ns, "ns:" + ns}}
	switch {
	case !ok:
		op.invalid, op.why = true, "hold period "+v+" is out of range or malformed"
	case !exists:
		op.want = []int{404}
	default:
		op.want = []int{200}
	}
	body := map[string]any{"updates": map[string]string{"soft-delete.hold-period": v}}
	remove := ok && s.chance(0.25)
	if remove {
		// Back to the catalog's period, and a key it never had.
		op.desc = fmt.Sprintf("admin removes soft-delete.hold-period and sim.never-set from namespace %s", ns)
		body = map[string]any{"removals": []string{"soft-delete.hold-period", "sim.never-set"}}
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces/"+ns+"/properties", body)
	}
	op.after = func(o Outcome, contended bool) error {
		props := s.m.namespaces[ns]
		if o.Status != 200 || props == nil {
			return nil
		}
		_, had := props["soft-delete.hold-period"]
		if !remove {
			props["soft-delete.hold-period"] = v
			return nil
		}
		delete(props, "soft-delete.hold-period")
		if contended {
			return nil
		}
		return s.nsRemovalAnswered(o, had)
	}
	return op
}

// nsRemovalAnswered: the answer to removing soft-delete.hold-period (had:
// the namespace had it) and sim.never-set names each key removed or
// missing as the namespace had it (the REST spec's
// UpdateNamespacePropertiesResponse; held-out 10: every key "removed").
func (s *Sim) nsRemovalAnswered(o Outcome, had bool) error {
	var res struct {
		Removed []string `json:"removed"`
		Missing []string `json:"missing"`
	}
	if err := json.Unmarshal(o.Body, &res); err != nil {
		return s.violatef("namespace properties answer: %v: %s", err, o)
	}
	wantRemoved, wantMissing := []string{}, []string{"sim.never-set"}
	if had {
		wantRemoved = append(wantRemoved, "soft-delete.hold-period")
	} else {
		wantMissing = append(wantMissing, "soft-delete.hold-period")
	}
	slices.Sort(res.Removed)
	slices.Sort(res.Missing)
	slices.Sort(wantMissing)
	if !slices.Equal(res.Removed, wantRemoved) || !slices.Equal(res.Missing, wantMissing) {
		return s.violatef("removing soft-delete.hold-period (the namespace had it: %v) and sim.never-set answered removed %v, missing %v; want removed %v, missing %v", had, res.Removed, res.Missing, wantRemoved, wantMissing)
	}
	return nil
}

// opBadBody sends a malformed body to a lifecycle route that would
// otherwise act (a soft-deleted table to undrop or purge, a record to
// hold): the model says it must be refused and change nothing.
func (s *Sim) opBadBody() *Op {
	var op *Op
	for range 10 {
		switch s.rng.IntN(3) {
		case 0:
			op = s.opUndrop()
		case 1:
			op = s.opPurgeNow()
		default:
			op = s.opLegalHoldRecord()
		}
		if op.invalid {
			return op
		}
	}
	return op
}
