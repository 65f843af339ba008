package sim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Views share the tables' name space (an identifier is a table's or a
// view's, never both) and their lifecycle (soft drop, undrop, purge-now,
// hold expiry). The model knows the views its accepted operations made and
// what the catalog's setting makes of a drop; the observation after every
// round holds it against the catalog: no identifier both a table and a
// view, nothing of a live or soft-deleted view gone, a soft-deleted view
// gone only once its purge-at passed or a purge-now was accepted.

// View is one view the simulation created.
type View struct {
	seq            int // the model's own order (uuids are new each run)
	uuid, ns, name string
	location       string
	meta           string   // its metadata file
	metas          []string // every metadata file it had
	state          state    // live, soft, purging (purge-now accepted) or gone
	legalHold      bool
	purgeAt        time.Time
	job            string // the purge job its purge-now started
	// softDrops, undrops: the drops to soft-deleted and the undrops the
	// model saw accepted alone (each announced: ViewSoftDeleted,
	// ViewUndropped).
	softDrops, undrops int
}

func (v *View) ident() string { return v.ns + "." + v.name }

func (v *View) String() string {
	return fmt.Sprintf("view(%s %s %s)", v.ident(), short(v.uuid), v.state)
}

func viewPath(ns, name string) string {
	return "/v1/" + catalogName + "/namespaces/" + url.PathEscape(ns) + "/views/" + url.PathEscape(name)
}

func viewLifecyclePath(ns, name string) string {
	return "/lifecycle/v1/catalogs/" + catalogName + "/namespaces/" + url.PathEscape(ns) + "/views/" + url.PathEscape(name)
}

// viewAt is the model's live view at an identifier.
func (m *Model) viewAt(ns, name string) *View {
	for _, v := range m.views {
		if v.state == live && v.ns == ns && v.name == name {
			return v
		}
	}
	return nil
}

func (m *Model) viewsIn(st state) []*View {
	var out []*View
	for _, v := range m.views {
		if v.state == st {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *View) int { return a.seq - b.seq })
	return out
}

// viewHeld: one of the op's identifiers is a live view's (a table op there
// is refused: 409 for what would take the name, 404 for what reads it).
func (s *Sim) viewHeld(op *Op) bool {
	for _, k := range op.keys {
		if id, ok := strings.CutPrefix(k, "id:"); ok {
			if ns, name, ok := strings.Cut(id, "."); ok && s.m.viewAt(ns, name) != nil {
				return true
			}
		}
	}
	return false
}

func (s *Sim) opViewCreate() *Op { return s.viewCreateAt(s.pickNS(), s.pickName()) }

func (s *Sim) viewCreateAt(ns, name string) *Op {
	body := map[string]any{
		"name": name, "schema": json.RawMessage(schemaJSON), "properties": map[string]string{},
		"view-version": map[string]any{
			"version-id": 1, "schema-id": 0, "timestamp-ms": s.w.clock.Now().UnixMilli(), "summary": map[string]string{"engine-name": "sim"},
			"representations":   []any{map[string]string{"type": "sql", "sql": "SELECT id, d FROM " + ns + ".t", "dialect": "spark"}},
			"default-namespace": []string{ns},
		},
	}
	op := &Op{kind: "view-create", desc: fmt.Sprintf("admin creates view %s.%s", ns, name), keys: tableKeys(ns, name)}
	_, nsOK := s.m.namespaces[ns]
	switch {
	case !nsOK:
		op.want = []int{404}
	case s.m.liveAt(ns, name) != nil || s.m.viewAt(ns, name) != nil:
		op.want, op.why = []int{409}, "a table or a view holds the name"
	default:
		op.want = []int{200, 409} // 409: a purging table's tombstone holds it
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/namespaces/"+url.PathEscape(ns)+"/views", body)
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 200 {
			return nil
		}
		var res struct {
			MetadataLocation string `json:"metadata-location"`
			Metadata         struct {
				UUID     string `json:"view-uuid"`
				Location string `json:"location"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(o.Body, &res); err != nil || res.Metadata.UUID == "" {
			return s.violatef("create view answer %s: %v", o, err)
		}
		s.m.nextID++
		v := &View{seq: s.m.nextID, uuid: res.Metadata.UUID, ns: ns, name: name, location: res.Metadata.Location, meta: res.MetadataLocation, state: live}
		s.m.views[v.uuid] = v
		s.logf("   %s created at %s", v, v.location)
		return nil
	}
	return op
}

func (s *Sim) opViewDrop() *Op {
	lives := s.m.viewsIn(live)
	if len(lives) == 0 {
		return nil
	}
	return s.viewDropOf(pick(s, lives))
}

func (s *Sim) viewDropOf(v *View) *Op {
	op := &Op{kind: "view-drop", desc: fmt.Sprintf("admin drops %s", v), keys: append(tableKeys(v.ns, v.name), "uuid:"+v.uuid), want: []int{204}}
	op.run = func() Outcome { return s.w.call(s.ctx, admin, "DELETE", viewPath(v.ns, v.name), nil) }
	op.after = func(o Outcome, contended bool) error {
		if o.Status != 204 {
			return nil
		}
		if !s.softOn(s.m.catProps) {
			v.state = gone // dropped for good; its files stay (as a table's without purge)
		} else {
			v.state = soft
			if !contended && s.touched["props"] == 0 {
				v.softDrops++
			}
		}
		s.logf("   %s dropped", v)
		return nil
	}
	return op
}

func (s *Sim) opViewUndrop() *Op {
	softs := s.m.viewsIn(soft)
	if len(softs) == 0 {
		return nil
	}
	return s.viewUndropOf(pick(s, softs))
}

func (s *Sim) viewUndropOf(v *View) *Op {
	body := map[string]any{"view-uuid": v.uuid}
	op := &Op{kind: "view-undrop", desc: fmt.Sprintf("admin undrops %s", v), keys: append(tableKeys(v.ns, v.name), "uuid:"+v.uuid)}
	_, nsOK := s.m.namespaces[v.ns]
	switch {
	case !nsOK:
		op.want = []int{404}
	case s.m.liveAt(v.ns, v.name) != nil || s.m.viewAt(v.ns, v.name) != nil:
		op.want, op.why = []int{409}, "a table or a view holds the name"
	default:
		op.want = []int{200, 404, 409} // 404: its hold ended meanwhile; 409: a purging table's tombstone
	}
	op.run = func() Outcome { return s.w.call(s.ctx, admin, "POST", viewLifecyclePath(v.ns, v.name)+"/undrop", body) }
	op.after = func(o Outcome, contended bool) error {
		if o.Status == 200 {
			v.state = live
			if !contended {
				v.undrops++
			}
			s.logf("   %s undropped", v)
		}
		return nil
	}
	return op
}

func (s *Sim) opViewPurgeNow() *Op {
	softs := s.m.viewsIn(soft)
	if len(softs) == 0 {
		return nil
	}
	return s.viewPurgeNowOf(pick(s, softs))
}

func (s *Sim) viewPurgeNowOf(v *View) *Op {
	op := &Op{kind: "view-purge-now", desc: fmt.Sprintf("admin purges %s now", v), keys: append(tableKeys(v.ns, v.name), "uuid:"+v.uuid), want: []int{202, 404}}
	if v.legalHold {
		op.invalid, op.contingent, op.want, op.why, op.conflict = true, true, []int{409}, "the view is under legal hold", "LegalHoldException"
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", viewLifecyclePath(v.ns, v.name)+"/purge-now", map[string]any{"view-uuid": v.uuid})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status != 202 {
			return nil
		}
		v.state = purging
		var j jobView
		if err := json.Unmarshal(o.Body, &j); err != nil || j.ID == "" {
			return s.violatef("%s: purge-now answered 202 without a job: %s", v, o)
		}
		// A view's files are its metadata files: the pipeline lists its
		// location for them (a job of kind view), it has no table
		// metadata to plan from.
		if j.Kind != "view" {
			return s.violatef("%s: its purge-now started job %s of kind %q, want view", v, j.ID, j.Kind)
		}
		v.job = j.ID
		s.logf("   %s: its permanent delete was accepted (job %s)", v, j.ID)
		return nil
	}
	return op
}

func (s *Sim) opViewRename() *Op {
	lives := s.m.viewsIn(live)
	if len(lives) == 0 {
		return nil
	}
	v := pick(s, lives)
	toNS, toName := s.pickNS(), s.pickName()
	if s.chance(0.2) {
		toNS, toName = v.ns, v.name
	}
	return s.viewRenameOf(v, toNS, toName)
}

// viewRenameOf renames v to toNS.toName.
func (s *Sim) viewRenameOf(v *View, toNS, toName string) *Op {
	op := &Op{desc: fmt.Sprintf("admin renames %s to %s.%s", v, toNS, toName), keys: append(append(tableKeys(v.ns, v.name), tableKeys(toNS, toName)...), "uuid:"+v.uuid)}
	_, nsOK := s.m.namespaces[toNS]
	switch {
	case v.ns == toNS && v.name == toName:
		op.want, op.why = []int{409}, "the name is taken (by the view itself)"
	case !nsOK:
		op.want = []int{404}
	case s.m.liveAt(toNS, toName) != nil || s.m.viewAt(toNS, toName) != nil:
		op.want, op.why = []int{409}, "a table or a view holds the name"
	default:
		op.want = []int{204, 409} // 409: a purge job's tombstone holds the name
	}
	op.run = func() Outcome {
		return s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/views/rename", map[string]any{
			"source":      map[string]any{"namespace": []string{v.ns}, "name": v.name},
			"destination": map[string]any{"namespace": []string{toNS}, "name": toName},
		})
	}
	op.after = func(o Outcome, _ bool) error {
		if o.Status == 204 {
			v.ns, v.name = toNS, toName
			s.logf("   %s renamed", v)
		}
		return nil
	}
	return op
}

type viewObs struct {
	ns, name, uuid, meta string
}

// observeViews lists every namespace's views and the soft-deleted ones.
func (s *Sim) observeViews() (map[string]viewObs, map[string]softObs, error) {
	lives := map[string]viewObs{}
	for ns := range s.m.namespaces {
		token := ""
		for {
			path := s.paged("/v1/"+catalogName+"/namespaces/"+url.PathEscape(ns)+"/views", token)
			o := s.w.call(s.ctx, admin, "GET", path, nil)
			if o.Status == 404 { // the namespace was dropped in the round
				break
			}
			if o.Status != 200 {
				return nil, nil, s.violatef("list views of %s: %s", ns, o)
			}
			var res struct {
				Identifiers []struct {
					Name string `json:"name"`
				} `json:"identifiers"`
				Next *string `json:"next-page-token"`
			}
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return nil, nil, err
			}
			for _, id := range res.Identifiers {
				lo := s.w.call(s.ctx, admin, "GET", viewPath(ns, id.Name), nil)
				if lo.Status != 200 {
					return nil, nil, s.violatef("view %s.%s is listed but loads %s", ns, id.Name, lo)
				}
				var v struct {
					MetadataLocation string `json:"metadata-location"`
					Metadata         struct {
						UUID string `json:"view-uuid"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(lo.Body, &v); err != nil {
					return nil, nil, err
				}
				lives[v.Metadata.UUID] = viewObs{ns: ns, name: id.Name, uuid: v.Metadata.UUID, meta: v.MetadataLocation}
			}
			if res.Next == nil || *res.Next == "" {
				break
			}
			token = *res.Next
		}
	}
	rows, err := s.softListing("view")
	if err != nil {
		return nil, nil, err
	}
	softs := map[string]softObs{}
	for _, r := range rows {
		softs[r.UUID] = r
	}
	return lives, softs, nil
}

// checkViews holds the views against the model and the tables observed.
func (s *Sim) checkViews(tables []liveObs, objs map[string]int64) error {
	lives, softs, err := s.observeViews()
	if err != nil {
		return err
	}
	for _, t := range tables {
		for _, v := range lives {
			if v.ns == t.ns && v.name == t.name {
				return s.violatef("%s.%s is both table %s and view %s", t.ns, t.name, short(t.uuid), short(v.uuid))
			}
		}
	}
	for _, v := range s.m.views {
		lo, isLive := lives[v.uuid]
		so, isSoft := softs[v.uuid]
		contended := s.touched["uuid:"+v.uuid] > 1 || s.touched["id:"+v.ident()] > 1
		switch {
		case isLive:
			v.state, v.ns, v.name = live, lo.ns, lo.name
		case isSoft:
			if v.state == live && !contended {
				return s.violatef("%s is soft-deleted, but no drop of it was accepted", v)
			}
			v.state = soft
			if at, err := time.Parse(time.RFC3339, so.PurgeAt); err == nil {
				v.purgeAt = at
			}
			v.legalHold = so.LegalHold
		case v.state == live && !contended:
			return s.violatef("%s is gone, but no drop of it was accepted", v)
		case v.state == soft && v.legalHold && !contended:
			return s.violatef("%s is gone while under legal hold, no purge-now accepted", v)
		case v.state == soft && s.w.clock.Now().Before(v.purgeAt):
			return s.violatef("%s is gone before its purge-at %s (now %s), no purge-now accepted", v, v.purgeAt.Format(time.RFC3339), s.w.clock.Now().Format(time.RFC3339))
		case v.state == live || v.state == soft:
			v.state = purging // its hold ended: the sweep ends it
		}
		if v.state == live || v.state == soft {
			if k, ok := keyOf(v.meta); ok {
				if _, there := objs[k]; !there {
					return s.violatef("%s: its metadata file %s is gone", v, v.meta)
				}
			}
		}
	}
	return nil
}

// checkViewPurges: at rest, each view purge the model saw accepted ended
// SUCCEEDED (or CANCELLED: a register of the view's metadata took it back
// while the job was pending).
func (s *Sim) checkViewPurges() error {
	for _, v := range s.m.views {
		if v.job == "" {
			continue
		}
		j, err := s.job(v.job)
		if err != nil {
			return s.violatef("%s: its purge job: %v", v, err)
		}
		if j.State != "SUCCEEDED" && j.State != "CANCELLED" {
			return s.violatef("%s: its purge job %s (kind %s) is %s at rest, want SUCCEEDED: %v", v, j.ID, j.Kind, j.State, j.Raw)
		}
	}
	return nil
}

// underView: a key under the location of a view the simulation made (its
// metadata files are no table's).
func (s *Sim) underView(key string) bool {
	for _, v := range s.m.views {
		if p, ok := keyOf(strings.TrimRight(v.location, "/")); ok && strings.HasPrefix(key, p+"/") {
			return true
		}
	}
	return false
}

// softListing pages through the soft-deleted listing of one kind ("table"
// or "view"). Each row must name its uuid once, as its kind's: a client
// tells a table from a view by it (held-out 10: a view's row kept a
// table-uuid as well). A view's row comes back with its view-uuid as UUID.
func (s *Sim) softListing(kind string) ([]softObs, error) {
	var out []softObs
	token := ""
	for {
		path := s.paged("/lifecycle/v1/catalogs/"+catalogName+"/soft-deleted-tables?kind="+kind, token)
		o := s.w.call(s.ctx, admin, "GET", path, nil)
		if o.Status != 200 {
			return nil, s.violatef("list soft-deleted %ss: %s", kind, o)
		}
		var res struct {
			Tables []struct {
				softObs
				ViewUUID string `json:"view-uuid"`
				Kind     string `json:"kind"`
			} `json:"tables"`
			Next *string `json:"next-page-token"`
		}
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return nil, err
		}
		for _, r := range res.Tables {
			own, other := r.UUID, r.ViewUUID
			if kind == "view" {
				own, other = r.ViewUUID, r.UUID
			}
			if r.Kind != kind || own == "" || other != "" {
				return nil, s.violatef("the soft-deleted %ss' listing holds a row of kind %q with table-uuid %q and view-uuid %q: %s", kind, r.Kind, r.UUID, r.ViewUUID, r.ident())
			}
			r.softObs.UUID = own
			out = append(out, r.softObs)
		}
		if res.Next == nil || *res.Next == "" {
			return out, nil
		}
		token = *res.Next
	}
}
