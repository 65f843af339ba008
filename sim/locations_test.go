package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

// Locations, registration, renames and the ownership backfill: the
// operations whose harm is to another table's files.

// explicit locations: a small space of prefixes under the warehouse, with
// the spellings that name the same or a nested prefix (scheme, trailing
// slash) and the characters FileIOs write differently.
var (
	locNames  = []string{"x", "x/y", "x2", "X", "v%C3%BC", "vü", "a b", "a+b", "a#b"}
	plainLocs = map[string]bool{"x": true, "x/y": true, "x2": true, "X": true}
)

// normLoc is the model's own normal form of a location: s3 scheme, no
// trailing slash.
func normLoc(l string) string {
	for _, sch := range []string{"s3a://", "s3n://"} {
		if rest, ok := strings.CutPrefix(l, sch); ok {
			l = "s3://" + rest
		}
	}
	return strings.TrimRight(l, "/")
}

// readopt: a register that landed res takes over the claims (and files) of
// an unregistered table of its uuid: the record of its uuid gives them to
// the new generation, whichever metadata file was registered and under
// whichever name it was unregistered (soak seed 1080 step 160: a.t
// unregistered, a.u's older file registered; 1003 step 169: an unregister
// and a register with overwrite of the same name in one round).
func (s *Sim) readopt(res createResult) {
	for _, u := range s.m.inState(unregistered) {
		if u.uuid == res.Metadata.UUID && overlaps(u.location, res.Metadata.Location) {
			u.state = released
		}
	}
}

// deletionStarted: g's purge job has left PENDING (the pipeline is held
// between settles, so a job read so now cannot go back): a register of
// its metadata is no recovery any more (docs/design/purge.md, Tombstones;
// held-out 11: recovery loosened to RUNNING and DEAD_LETTERED jobs).
func (s *Sim) deletionStarted(g *Gen) bool {
	if g.job == "" {
		return false
	}
	j, err := s.w.srv.Catalog.Store().GetJob(s.ctx, catalogName, g.job)
	return err == nil && j.State != store.JobPending
}

// overlaps: a and b are the same prefix or one holds the other.
func overlaps(a, b string) bool {
	a, b = normLoc(a), normLoc(b)
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// owner is the generation whose location overlaps loc and that still owns
// it (live, soft-deleted, or being purged).
func (s *Sim) owner(loc string) *Gen {
	for _, g := range s.m.inState(live, soft, purging, unregistered) {
		if !g.forged && overlaps(g.location, loc) {
			return g
		}
	}
	return nil
}

// location picks an explicit location for a create: "" (the default)
// mostly; an existing generation's; a fresh one from the small space; one
// outside the warehouse. plain says whether the model can judge it.
func (s *Sim) location() (loc string, plain bool, outside bool) {
	if s.sinceBackfill > 0 && s.chance(0.5) {
		// Right after a backfill: the locations it should have claimed.
		if gs := s.m.inState(soft, live); len(gs) > 0 {
			return s.spell(pick(s, gs).location), true, false
		}
	}
	switch n := s.rng.IntN(20); {
	case n < 11:
		return "", true, false
	case n < 14:
		if gs := s.m.inState(live, soft, purging, released, gone); len(gs) > 0 {
			g := pick(s, gs)
			if len(g.oldLocs) > 0 && s.chance(0.5) {
				// Where it was before a set-location: owned while a
				// retained snapshot reaches it, free after.
				return s.spell(pick(s, g.oldLocs)), true, false
			}
			return s.spell(g.location), true, false
		}
	case n < 19:
		name := s.pickLoc()
		return s.spell(warehouse + "/L/" + name), plainLocs[name], false
	}
	return pick(s, []string{"s3://" + bucket + "/elsewhere/x", "s3://other-bucket/x", warehouse, warehouse + "/", "s3://" + bucket + "/" + catalogName + "/L/../x"}), true, true
}

// spell writes a location one of the ways that name the same prefix (loc
// may be spelt so already: a table created at an s3a:// location keeps it).
func (s *Sim) spell(loc string) string {
	switch s.rng.IntN(5) {
	case 0:
		return "s3a://" + strings.TrimPrefix(normLoc(loc), "s3://")
	case 1:
		return normLoc(loc) + "/"
	}
	return loc
}

// --- rename ---

func (s *Sim) opRename() *Op {
	ns, name, g := s.target()
	toNS, toName := s.pickNS(), s.pickName()
	for i := 0; i < 3 && s.m.liveAt(toNS, toName) != nil && s.chance(0.7); i++ {
		toNS, toName = s.pickNS(), s.pickName() // mostly a free name: a rename that lands
	}
	return s.renameOp(ns, name, g, toNS, toName)
}

// renameOp: admin renames ns.name (g the live table there, nil none) to
// toNS.toName.
func (s *Sim) renameOp(ns, name string, g *Gen, toNS, toName string) *Op {
	op := &Op{desc: fmt.Sprintf("admin renames %s.%s to %s.%s", ns, name, toNS, toName), keys: append(tableKeys(ns, name), tableKeys(toNS, toName)...)}
	_, nsOK := s.m.namespaces[toNS]
	switch {
	case g == nil:
		op.want = []int{404}
	case ns == toNS && name == toName:
		op.want, op.why = []int{409}, "the name is taken (by the table itself)"
	case !nsOK:
		op.want = []int{404}
	case s.m.liveAt(toNS, toName) != nil:
		op.want = []int{409}
	default:
		op.want = []int{204, 409} // 409: a purge job's tombstone holds the name
	}
	if g != nil {
		op.keys = append(op.keys, "uuid:"+g.uuid)
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/tables/rename", map[string]any{
			"source":      map[string]any{"namespace": []string{ns}, "name": name},
			"destination": map[string]any{"namespace": []string{toNS}, "name": toName},
		})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 204 && o.Status != 200 {
			return nil
		}
		if g := s.m.liveAt(ns, name); g != nil {
			g.ns, g.name = toNS, toName
		}
		return nil
	}
	return op
}

// --- register ---

// registerSource picks a metadata file to register: a live or soft-deleted
// table's (current or older), a purged one's, one of a table ended without
// purge, or a forgery.
func (s *Sim) registerSource() (meta string, from *Gen, forged bool) {
	gens := s.m.inState(live, soft, purging, released, gone, unregistered)
	if len(gens) == 0 || s.chance(0.2) {
		return "", nil, true
	}
	g := pick(s, gens)
	if len(g.metas) > 0 && s.chance(0.3) {
		return pick(s, g.metas), g, false
	}
	return g.meta, g, false
}

func (s *Sim) opRegister() *Op {
	ns, name := s.pickNS(), s.pickName()
	meta, from, forge := s.registerSource()
	if forge && (!s.allow("forge") || len(s.m.inState(live, soft)) == 0) {
		return nil
	}
	return s.registerOp(ns, name, meta, from, forge)
}

// registerOf registers from's metadata file meta at ns.name.
func (s *Sim) registerOf(ns, name string, from *Gen, meta string) *Op {
	return s.registerOp(ns, name, meta, from, false)
}

func (s *Sim) registerOp(ns, name, meta string, from *Gen, forge bool) *Op {
	op := &Op{kind: "register", keys: tableKeys(ns, name)}
	var forgedLoc string
	if forge {
		forgedLoc = warehouse + "/F/" + uuid.NewString()[:8]
		op.desc = fmt.Sprintf("admin registers %s.%s from a forged metadata file at %s", ns, name, forgedLoc)
		op.want = []int{200, 400, 409}
		if _, nsOK := s.m.namespaces[ns]; !nsOK {
			op.want = []int{404}
		}
	} else {
		op.desc = fmt.Sprintf("admin registers %s.%s from %s's %s", ns, name, from, meta)
		op.keys = append(op.keys, "uuid:"+from.uuid)
		// Every refusal that applies may be the one answered.
		_, nsOK := s.m.namespaces[ns]
		if !nsOK {
			op.want = append(op.want, 404)
		}
		if s.m.liveAt(ns, name) != nil {
			op.want = append(op.want, 409)
		}
		refused := len(op.want) > 0
		switch from.state {
		case live, soft:
			op.want = append(op.want, 409) // its location is owned
			if i := strings.LastIndex(meta, "/metadata/"); i > 0 && !overlaps(meta[:i], from.location) {
				// A metadata file from before a set-location: its former
				// location stays owned only while a retained snapshot
				// reaches it; released, a register may take it (the files
				// there are history another owner's purge may delete).
				op.want = append(op.want, 400)
				if !refused {
					op.want = append(op.want, 200)
				}
			}
		case gone:
			op.want = append(op.want, 400, 404, 409) // its files are gone
			if i := strings.LastIndex(meta, "/metadata/"); i > 0 && !overlaps(meta[:i], from.location) && !refused {
				// A metadata file from before a set-location that no
				// retained snapshot reached: the move released it, so its
				// purge left it (soak seed 1027 step 49).
				op.want = append(op.want, 200)
			}
		case purging: // its files may be going; recovery while PENDING
			op.want = append(op.want, 400, 409)
			if !refused && !s.deletionStarted(from) {
				op.want = append(op.want, 200)
			}
		case unregistered: // its claims come back to a register of its uuid at its location
			op.want = append(op.want, 409)
			if !refused {
				op.want = append(op.want, 200)
			}
		case released: // its files stay until a later owner of the prefix purges
			op.want = append(op.want, 400)
			if !refused {
				op.want = append(op.want, 200, 409)
			}
		}
	}
	op.run = func() Outcome {
		if forge {
			var err error
			if meta, err = s.forge(forgedLoc); err != nil {
				return Outcome{Err: err}
			}
		}
		return s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces/"+ns+"/register", map[string]any{"name": name, "metadata-location": meta})
	}
	op.after = func(o Outcome, _ bool) error {
		if forge && meta != "" {
			s.m.forged = append(s.m.forged, meta) // left in the bucket by design
		}
		if o.Status != 200 {
			return nil
		}
		var res createResult
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("register answer: %v", err)
		}
		s.readopt(res)
		if from != nil && from.state == purging && res.MetadataLocation == from.meta {
			// Register as recovery of a PENDING purge: the table is back.
			from.state, from.ns, from.name, from.job = live, ns, name, ""
			from.recovered = true
			s.logf("   %s recovered from its pending purge", from)
			return nil
		}
		g := s.m.add(&Gen{uuid: res.Metadata.UUID, ns: ns, name: name, location: res.Metadata.Location, state: live,
			meta: res.MetadataLocation, metas: []string{res.MetadataLocation}, forged: forge || (from != nil && from.forged),
			legalHold: held(res.Metadata.Props["icehold.legal-hold"]), holdProp: res.Metadata.Props["soft-delete.hold-period"]})
		if from != nil {
			// An older version holds some of them, rows deleted since
			// among them; rows the source's own checks never settled (a
			// contended append before it was dropped) may be there too.
			for _, rows := range []map[int64]string{from.rows, from.maybe, from.ever} {
				for id, d := range rows {
					g.maybe[id] = d
					g.ever[id] = d
				}
			}
		}
		s.logf("   %s registered at %s", g, g.location)
		return s.record(g, g.meta, true)
	}
	return op
}

// forge writes a metadata file at loc/metadata/ that claims loc as its
// location but whose snapshots are another table's (the forged
// metadata listing keys no claim of its own covers), under a new uuid.
func (s *Sim) forge(loc string) (string, error) {
	var raw []byte
	victims := s.m.inState(live, soft)
	if len(victims) > 0 {
		v := victims[0]
		k, _ := keyOf(v.meta)
		out, err := s.w.s3.GetObject(s.ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		if err != nil {
			return "", err
		}
		defer out.Body.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(out.Body); err != nil {
			return "", err
		}
		raw = buf.Bytes()
	}
	var md map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &md) != nil {
		return "", fmt.Errorf("no metadata to forge from")
	}
	md["location"] = loc
	md["table-uuid"] = uuid.NewString()
	b, _ := json.Marshal(md)
	path := loc + "/metadata/00000-" + uuid.NewString() + ".metadata.json"
	k, _ := keyOf(path)
	_, err := s.w.s3.PutObject(s.ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(b)})
	return path, err
}

func isTrue(it map[string]ddbtypes.AttributeValue, name string) bool {
	b, ok := it[name].(*ddbtypes.AttributeValueMemberBOOL)
	return ok && b.Value
}

func entryOf(it map[string]ddbtypes.AttributeValue) map[string]ddbtypes.AttributeValue {
	if e, ok := it["entry"].(*ddbtypes.AttributeValueMemberM); ok {
		return e.Value
	}
	return nil
}

// --- the ownership backfill on a state from before the index ---

// backfill takes the store back to before the ownership index (no claim
// items, no claim on any record, no migration marker), then restarts: the
// start runs the backfill (`migrate ownership` in AWS).
func (s *Sim) backfill() error {
	if err := s.drain(); err != nil {
		return err
	}
	type item = map[string]ddbtypes.AttributeValue
	// Views and unregistered tables came after the index (they never
	// existed without their claims): a state that holds one is no state
	// from before it. Stripping the others' claims would also drop the
	// ancestor counts the kept claims stand on (a create over an
	// unregistered table's moved location then passed: seed 6, step 114).
	after := false
	if err := s.w.scan(s.ctx, func(it item) error {
		pk := str(it, "pk")
		if str(it, "kind") == "view" || str(entryOf(it), "kind") == "view" || strings.HasPrefix(pk, "UNREG#") || isTrue(it, "unregistered") {
			after = true
		}
		return nil
	}); err != nil {
		return err
	}
	if after {
		s.logf("   skipped: views or unregistered tables exist, which no state from before the index holds")
		s.acted = false
		return nil
	}
	var del, put []item
	claimed := map[string]bool{} // records that held a claim (claimedRecords)
	err := s.w.scan(s.ctx, func(it item) error {
		pk, sk := str(it, "pk"), str(it, "sk")
		if claimedRecord(it) {
			claimed[pk+"|"+sk] = true
		}
		switch {
		case strings.HasPrefix(pk, "LOC#"), pk == "MIGRATION" && sk == catalog.OwnershipMigration:
			del = append(del, it)
		default:
			changed := false
			for _, m := range []map[string]ddbtypes.AttributeValue{it, entryOf(it)} {
				for _, a := range []string{"hold", "extra_holds"} {
					if _, ok := m[a]; ok {
						delete(m, a)
						changed = true
					}
				}
			}
			if changed {
				put = append(put, it)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, it := range del {
		if _, err := s.w.ddb.DeleteItem(s.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(server.TableName),
			Key: map[string]ddbtypes.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
			return err
		}
	}
	for _, it := range put {
		if _, err := s.w.ddb.PutItem(s.ctx, &dynamodb.PutItemInput{TableName: aws.String(server.TableName), Item: it}); err != nil {
			return err
		}
	}
	s.logf("   %d claim items and the marker deleted, %d records stripped of their claim; restarting", len(del), len(put))
	s.acted = len(put) > 0
	s.sinceBackfill = 10
	if err := s.w.restart(s.ctx); err != nil {
		return err
	}
	// Every table and soft-deleted record that held its location's claim
	// before holds one again (the state was one the index had made: no
	// two of them overlap, so none is a conflict to leave unclaimed).
	return s.w.scan(s.ctx, func(it item) error {
		k := str(it, "pk") + "|" + str(it, "sk")
		if claimed[k] && !claimedRecord(it) {
			delete(claimed, k)
			return s.violatef("the ownership backfill left %s (%s) without the claim on its location it held before", k, str(entryOf(it), "metadata_location")+str(it, "metadata_location"))
		}
		return nil
	})
}

// claimedRecord: a table entry (TBL#) or a soft-deleted record (its U#
// item) that holds a claim on its location.
func claimedRecord(it map[string]ddbtypes.AttributeValue) bool {
	pk, sk := str(it, "pk"), str(it, "sk")
	switch {
	case strings.HasPrefix(pk, "TBL#") && strings.HasPrefix(sk, "T#"):
		_, ok := it["hold"]
		return ok
	case strings.HasPrefix(pk, "SOFT#") && strings.HasPrefix(sk, "U#"):
		_, ok := entryOf(it)["hold"]
		return ok
	}
	return false
}
