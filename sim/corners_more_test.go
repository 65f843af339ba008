package sim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// More corners (docs/design/simulation-corners.md): from the seventh
// held-out set's survivors, each a combination the random rounds make too
// rarely to count on within make sim's budget.

// --- a legal-held table soft-dropped ---

// heldDrop: a table under its own legal hold is soft-dropped. Its record
// carries the hold (the listing and the TableSoftDeleted event say so);
// purge-now is refused and the hold-expiry sweep past its purge-at keeps
// it. The holder then clears the record's hold (one LegalHoldChanged,
// clearing it) and a purge-now deletes it.
func (s *Sim) heldDrop() *barrier {
	return &barrier{kind: "held-drop", desc: "a legal-held table soft-dropped, refused a purge and an expiry, then cleared and purged", run: func() error {
		s.acted = false
		if !s.m.legalPriv {
			return nil
		}
		// Soft delete on, whatever the rounds left it (a drop with it off
		// ends the table at once: nothing here to hold).
		if s.m.catProps["soft-delete.enabled"] != "" && !held(s.m.catProps["soft-delete.enabled"]) {
			if o, err := s.runFor(s.catalogSetOp("soft-delete.enabled", "true")); err != nil || o.Status != 200 {
				return err
			}
		}
		g, err := s.freshTable("hd", "", nil)
		if err != nil || g == nil {
			return err
		}
		by := holder
		if !s.m.canLegalHold(holder) {
			by = admin // a grant change of the rounds took it from the holder
		}
		if o, err := s.runFor(s.opSetLegalHoldProp(g, by, true)); err != nil || o.Status != 200 {
			return err
		}
		if o, err := s.runFor(s.dropOp(g.ns, g.name, g, admin, false)); err != nil || o.Status != 204 || g.state != soft {
			return err
		}
		rec, err := s.softRecordOf(g)
		if err != nil {
			return err
		}
		if !rec.LegalHold {
			return s.violatef("%s was soft-dropped under its legal hold, and its record is listed without one", g)
		}
		evs, err := s.events()
		if err != nil {
			return err
		}
		for _, e := range evs {
			if e.Type == "TableSoftDeleted" && e.Detail.UUID == g.uuid && e.Detail.Detail["legal-hold"] != true {
				return s.violatef("%s was soft-dropped under its legal hold, and its TableSoftDeleted event says legal-hold %v", g, e.Detail.Detail["legal-hold"])
			}
		}
		if _, err := s.runFor(s.purgeNowBy(g, admin)); err != nil {
			return err
		}
		if wait := g.purgeAt.Sub(s.w.clock.Now()); wait < 30*24*time.Hour {
			s.w.clock.Advance(wait + time.Hour)
			if err := s.sweepHoldExpiry(); err != nil {
				return err
			}
			if g.state != soft {
				return s.violatef("%s: the model let a held record expire", g)
			}
		}
		// The op sends a malformed body now and then (a 400 that changes
		// nothing): sent again until one is well formed.
		cleared := false
		for range 6 {
			o, err := s.runFor(s.legalHoldRecordOf(g, g.uuid, by, false))
			if err != nil || o.Status != 200 && o.Status != 400 {
				return err
			}
			if cleared = o.Status == 200; cleared {
				break
			}
		}
		if !cleared {
			return nil
		}
		if o, err := s.runFor(s.purgeNowBy(g, admin)); err != nil || o.Status != 202 {
			return err
		}
		if _, err := s.drainTo(g, "SUCCEEDED", "its hold cleared, purged now"); err != nil {
			return err
		}
		s.acted = true
		s.logf("   %s: held through its drop, a purge-now and an expiry; cleared and purged", g)
		return nil
	}}
}

// softRecordOf: g's soft-deleted record as the listing shows it.
func (s *Sim) softRecordOf(g *Gen) (softObs, error) {
	_, softs, err := s.observe()
	if err != nil {
		return softObs{}, err
	}
	for _, o := range softs {
		if o.UUID == g.uuid {
			return o, nil
		}
	}
	return softObs{}, s.violatef("%s is soft-deleted, and the soft-deleted listing does not list it", g)
}

// --- namespaces whose names start one another, emptied by a rename ---

// prefixNames: namespaces P and Pb (P's name starts Pb's), a table in each.
// Pb's table is soft-dropped: the soft-deleted listing filtered by P must
// not list it, filtered by Pb must. P's table is renamed into Pb, which
// empties P: P's drop is a 204 (its count of children went with the
// table).
func (s *Sim) prefixNames() *barrier {
	s.m.nextID++
	p := fmt.Sprintf("pn%d", s.m.nextID)
	pb := p + "b"
	return &barrier{kind: "prefix-names", desc: fmt.Sprintf("namespaces %s and %s, a table renamed out of %s, then its drop", p, pb, p), run: func() error {
		s.acted = false
		for _, ns := range []string{p, pb} {
			if o, err := s.runFor(s.opNSCreateAt(ns)); err != nil || o.Status != 200 {
				return err
			}
		}
		var made []*Gen
		for _, ns := range []string{p, pb} {
			if o, err := s.runFor(s.createOp(ns, "t", admin, "", map[string]string{"format-version": "2"})); err != nil || o.Status != 200 {
				return err
			}
			g := s.m.liveAt(ns, "t")
			if g == nil {
				return s.violatef("%s.t created, and the model holds no live table there", ns)
			}
			if _, err := s.runFor(s.opAppendTo(g, admin)); err != nil {
				return err
			}
			made = append(made, g)
		}
		inP, inPb := made[0], made[1]
		// Locations in the warehouse's bucket outside its prefix, one
		// whose key starts as the warehouse's does: refused (held-out 9:
		// a check of the bucket alone placed tables anywhere in it).
		for _, loc := range []string{"s3://" + bucket + "/" + catalogName + "-" + p + "/t", "s3://" + bucket + "/elsewhere/" + p} {
			if _, err := s.runFor(s.createOpAt(p, "out", admin, loc, true, true, map[string]string{"format-version": "2"})); err != nil {
				return err
			}
		}
		if o, err := s.runFor(s.dropOp(pb, "t", inPb, admin, false)); err != nil || o.Status != 204 {
			return err
		}
		for ns, want := range map[string]bool{p: false, pb: inPb.state == soft} {
			got, err := s.softUUIDs("namespace=" + url.QueryEscape(ns))
			if err != nil {
				return err
			}
			if slices.Contains(got, inPb.uuid) != want {
				return s.violatef("GET soft-deleted-tables?namespace=%s lists %v; %s (soft-deleted in %s) listed: %v, want %v", ns, got, inPb, pb, !want, want)
			}
		}
		if o, err := s.runFor(s.renameOp(p, "t", inP, pb, "moved")); err != nil || o.Status != 204 {
			return err
		}
		if _, err := s.runFor(s.opNSDropAt(p)); err != nil {
			return err
		}
		// A view route at a table's identifier finds no view (a table and
		// a view keep apart by identifier): the table stays.
		for _, method := range []string{"HEAD", "GET", "DELETE"} {
			if o := s.w.call(s.ctx, admin, method, viewPath(pb, "moved"), nil); o.Status != 404 {
				return s.violatef("%s %s, the identifier of table %s: %s, want 404", method, viewPath(pb, "moved"), inP, o)
			}
		}
		if o := s.w.call(s.ctx, admin, "HEAD", tablePath(pb, "moved"), nil); inP.state == live && o.Status != 204 {
			return s.violatef("table %s after view routes at its identifier: HEAD %s", inP, o)
		}
		s.acted = true
		s.logf("   %s emptied by a rename and dropped; %s's soft-deleted table listed under its own name only", p, pb)
		return nil
	}}
}

// softUUIDs: the table uuids the soft-deleted listing answers to a query.
func (s *Sim) softUUIDs(query string) ([]string, error) {
	var out []string
	token := ""
	for {
		o := s.w.call(s.ctx, admin, "GET", s.paged("/lifecycle/v1/catalogs/"+catalogName+"/soft-deleted-tables?"+query, token), nil)
		if o.Status != 200 {
			return nil, s.violatef("list soft-deleted tables ?%s: %s", query, o)
		}
		var res struct {
			Tables []softObs `json:"tables"`
			Next   *string   `json:"next-page-token"`
		}
		if err := jsonUnmarshal(o.Body, &res); err != nil {
			return nil, err
		}
		for _, t := range res.Tables {
			out = append(out, t.UUID)
		}
		if res.Next == nil || *res.Next == "" {
			return out, nil
		}
		token = *res.Next
	}
}

// --- snapshot expiry meets gc.enabled=false ---

// gcOffExpiry: a table with gc.enabled=false, rows overwritten (files only
// older snapshots reach), a retention policy and the clock past the default
// max snapshot age: the retention sweep's snapshot expiry must leave it
// alone (docs/spec.md §3: no file of a gc-disabled table is deleted).
func (s *Sim) gcOffExpiry() *barrier {
	return &barrier{kind: "gc-off-expiry", desc: "a gc.enabled=false table past its snapshots' age, then the retention sweep", run: func() error {
		s.acted = false
		g, err := s.freshTable("ge", "", map[string]string{"format-version": "2", "gc.enabled": s.spelled(false)})
		if err != nil || g == nil {
			return err
		}
		if op := s.overwriteRowsOf(g); op != nil {
			if _, err := s.runFor(op); err != nil {
				return err
			}
		}
		ns, name := g.ns, g.name
		op := &Op{desc: fmt.Sprintf("admin sets the retention policy of %s: P3650D", g), keys: append(tableKeys(ns, name), "policy:"+ns+"."+name), want: []int{200}}
		op.run = func() Outcome {
			return s.w.call(s.ctx, admin, "PUT", lifecyclePath(ns, name)+"/partition-retention", map[string]any{"field": "d", "keep": "P3650D"})
		}
		op.after = func(o Outcome, _ bool) error {
			if o.Status == 200 {
				s.m.policies[ns+"."+name] = policy{uuid: g.uuid, keep: "P3650D"}
			}
			return nil
		}
		if o, err := s.runFor(op); err != nil || o.Status != 200 {
			return err
		}
		before, err := s.keysUnder(g.location)
		if err != nil {
			return err
		}
		s.w.clock.Advance(6 * 24 * time.Hour)
		if err := s.sweepRetention(); err != nil {
			return err
		}
		if err := s.drain(); err != nil { // an expire job deletes through the pipeline
			return err
		}
		lost, err := s.lostUnder(g.location, before)
		if err != nil {
			return err
		}
		if len(lost) > 0 {
			return s.violatef("%s (gc.enabled=false): the retention sweep deleted %d of its files, e.g. %v", g, len(lost), lost[:min(3, len(lost))])
		}
		s.acted = true
		s.logf("   %s: the sweep past its snapshots' age kept its %d files", g, len(before))
		// Back to the rounds as any table (whose purges the model holds to
		// deleting everything: soak seeds 1038 and 1070).
		on := &Op{desc: fmt.Sprintf("admin sets gc.enabled=true on %s", g), keys: append(tableKeys(ns, name), "uuid:"+g.uuid), want: []int{200}}
		on.run = func() Outcome { return s.commitProps(admin, ns, name, map[string]string{"gc.enabled": "true"}, nil) }
		on.after = func(o Outcome, _ bool) error {
			if o.Status != 200 {
				return nil
			}
			return s.propsCommitted(o, ns, name, func(*Gen) {})
		}
		_, err = s.runFor(on)
		return err
	}}
}

// --- a purge taken back while it is pending ---

// recoveredPurge: a table dropped with purge is registered back from its
// own metadata while its job is PENDING (the pipeline is held between
// settles, so the job cannot have started). The register cancels the job
// (docs/design/purge.md, Tombstones): the job is CANCELLED, stays so once
// the pipeline runs, and deletes nothing of the table it gave back.
func (s *Sim) recoveredPurge() *barrier {
	return &barrier{kind: "recovered-purge", desc: "a table dropped with purge, registered back from its own metadata while its job is pending", run: func() error {
		s.acted = false
		g, err := s.freshTable("rp", "", nil)
		if err != nil || g == nil {
			return err
		}
		if o, err := s.runFor(s.dropOp(g.ns, g.name, g, admin, true)); err != nil || o.Status != 204 || g.state != purging {
			return err
		}
		job := g.job
		before, err := s.keysUnder(g.location)
		if err != nil {
			return err
		}
		if o, err := s.runFor(s.registerOf(g.ns, g.name, g, g.meta)); err != nil || o.Status != 200 || g.state != live {
			return err
		}
		for _, when := range []string{"once registered back", "after the pipeline ran"} {
			j, err := s.job(job)
			if err != nil {
				return err
			}
			if j.State != "CANCELLED" {
				return s.violatef("%s registered back from its pending purge: job %s is %s %s, want CANCELLED", g, job, j.State, when)
			}
			if err := s.drain(); err != nil {
				return err
			}
		}
		lost, err := s.lostUnder(g.location, before)
		if err != nil {
			return err
		}
		if len(lost) > 0 {
			return s.violatef("%s registered back from its pending purge: job %s deleted %d of its files, e.g. %v", g, job, len(lost), lost[:min(3, len(lost))])
		}
		s.acted = true
		s.logf("   %s taken back from job %s, CANCELLED, nothing deleted", g, job)
		return nil
	}}
}

// --- purge.delete-scope=warehouse ---

// scopeCatalog: the catalog whose purges may delete inside its whole
// warehouse (purge.delete-scope=warehouse), kept apart from the model's.
const scopeCatalog = "simw"

// warehouseScope: in scopeCatalog, table T's snapshot adds two files from
// outside its location: one of table U's data files and a copy of it under
// a prefix no table owns. T's purge may delete the unowned one and must
// keep U's (U owns the prefix; docs/design/store.md, What a purge
// deletes): U still reads every row.
func (s *Sim) warehouseScope() *barrier {
	s.m.nextID++
	ns := fmt.Sprintf("ws%d", s.m.nextID)
	return &barrier{kind: "warehouse-scope", desc: "a purge with purge.delete-scope=warehouse, its table's snapshot naming another table's file", run: func() error {
		s.acted = false
		if err := s.drain(); err != nil { // nothing else runs under the widened scope
			return err
		}
		call := func(want int, method, path string, body any) (Outcome, error) {
			o := s.w.call(s.ctx, admin, method, path, body)
			if o.Status != want {
				return o, s.violatef("warehouse scope: %s %s: %s, want %d", method, path, o, want)
			}
			return o, nil
		}
		if o := s.w.call(s.ctx, admin, "GET", "/lifecycle/v1/catalogs/"+scopeCatalog, nil); o.Status != 200 {
			props := map[string]string{"soft-delete.enabled": "false", "purge.delete-scope": "warehouse"}
			if _, err := call(201, "POST", "/lifecycle/v1/catalogs", map[string]any{"name": scopeCatalog, "warehouse": "s3://" + bucket + "/" + scopeCatalog, "properties": props}); err != nil {
				return err
			}
		}
		nsPath := "/v1/" + scopeCatalog + "/namespaces/" + ns
		if _, err := call(200, "POST", "/v1/"+scopeCatalog+"/namespaces", map[string]any{"namespace": []string{ns}}); err != nil {
			return err
		}
		locs := map[string]string{}
		for _, name := range []string{"u", "t"} {
			o, err := call(200, "POST", nsPath+"/tables", map[string]any{"name": name, "schema": json.RawMessage(schemaJSON)})
			if err != nil {
				return err
			}
			var res createResult
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return s.violatef("warehouse scope: create answer: %v", err)
			}
			locs[name] = res.Metadata.Location
			s.m.purgedApart[res.Metadata.UUID] = true
		}
		cat, _, err := s.w.clientOf(s.ctx, scopeCatalog, admin)
		if err != nil {
			return err
		}
		rows := map[int64]string{1: s.day(), 2: s.day()}
		if err := s.appendWith(cat, ns, "u", rows, "warehouse scope"); err != nil {
			return err
		}
		uKeys, err := s.keysUnder(locs["u"])
		if err != nil {
			return err
		}
		var uData string
		for k := range uKeys {
			if strings.Contains(k, "/data/") {
				uData = k
			}
		}
		if uData == "" {
			return s.violatef("warehouse scope: %s.u has no data file after an append", ns)
		}
		free := scopeCatalog + "/free-" + ns + "/f.parquet"
		if _, err := s.w.s3.CopyObject(s.ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String(free), CopySource: aws.String(bucket + "/" + uData)}); err != nil {
			return err
		}
		t, err := cat.LoadTable(s.ctx, table.Identifier{ns, "t"})
		if err != nil {
			return s.violatef("warehouse scope: load %s.t: %v", ns, err)
		}
		tx := t.NewTransaction()
		if err := tx.AddFiles(s.ctx, []string{"s3://" + bucket + "/" + uData, "s3://" + bucket + "/" + free}, nil, false); err != nil {
			return s.violatef("warehouse scope: add files to %s.t: %v", ns, err)
		}
		if _, err := tx.Commit(s.ctx); err != nil {
			return s.violatef("warehouse scope: commit to %s.t: %v", ns, err)
		}
		if _, err := call(204, "DELETE", nsPath+"/tables/t?purgeRequested=true", nil); err != nil {
			return err
		}
		if err := s.drain(); err != nil {
			return err
		}
		s.acted = true
		objs, err := s.w.objects(s.ctx)
		if err != nil {
			return err
		}
		if _, ok := objs[uData]; !ok {
			return s.violatef("warehouse scope: the purge of %s.%s.t deleted %s, a data file of table u, which owns its prefix", scopeCatalog, ns, uData)
		}
		if _, ok := objs[free]; ok {
			return s.violatef("warehouse scope: the purge of %s.%s.t kept %s, which its snapshot added and no table owns (purge.delete-scope=warehouse)", scopeCatalog, ns, free)
		}
		if left, err := s.keysUnder(locs["t"]); err != nil || len(left) > 0 {
			if err == nil {
				err = s.violatef("warehouse scope: the purge of %s.%s.t left %d keys under its location", scopeCatalog, ns, len(left))
			}
			return err
		}
		// u reads its rows, and then goes too: the catalog is left empty.
		u, err := cat.LoadTable(s.ctx, table.Identifier{ns, "u"})
		if err != nil {
			return s.violatef("warehouse scope: load %s.u after t's purge: %v", ns, err)
		}
		got, err := u.Scan().ToArrowTable(s.ctx)
		if err != nil {
			return s.violatef("warehouse scope: %s.u after t's purge: scan: %v", ns, err)
		}
		n := got.NumRows()
		got.Release()
		if n != int64(len(rows)) {
			return s.violatef("warehouse scope: %s.u after t's purge scans %d rows, want %d", ns, n, len(rows))
		}
		if _, err := call(204, "DELETE", nsPath+"/tables/u?purgeRequested=true", nil); err != nil {
			return err
		}
		if err := s.drain(); err != nil {
			return err
		}
		if _, err := call(204, "DELETE", nsPath, nil); err != nil {
			return err
		}
		s.logf("   %s.%s.t purged: the unowned file it added went, u's stayed and u read its rows", scopeCatalog, ns)
		return nil
	}}
}

// appendWith: a client of a catalog apart from the model's appends rows
// to ns.name (what: the corner, for a violation).
func (s *Sim) appendWith(cat *rest.Catalog, ns, name string, rows map[int64]string, what string) error {
	t, err := cat.LoadTable(s.ctx, table.Identifier{ns, name})
	if err != nil {
		return s.violatef("%s: load %s.%s: %v", what, ns, name, err)
	}
	data, err := arrowRows(rows)
	if err != nil {
		return err
	}
	defer data.Release()
	tx := t.NewTransaction()
	if err := tx.AppendTable(s.ctx, data, 1000, nil); err != nil {
		return s.violatef("%s: append to %s.%s: %v", what, ns, name, err)
	}
	if _, err := tx.Commit(s.ctx); err != nil {
		return s.violatef("%s: commit to %s.%s: %v", what, ns, name, err)
	}
	return nil
}

// lostUnder: the keys of before no longer under loc, sorted.
func (s *Sim) lostUnder(loc string, before map[string]int64) ([]string, error) {
	after, err := s.keysUnder(loc)
	if err != nil {
		return nil, err
	}
	var lost []string
	for k := range before {
		if _, ok := after[k]; !ok {
			lost = append(lost, k)
		}
	}
	slices.Sort(lost)
	return lost, nil
}
