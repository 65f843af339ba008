package sim

import (
	"encoding/json"
	"net/url"
)

// The lifecycle API's reads, so that every operation of it is in the
// coverage table: the catalog, a grant, the unregistered tables (each one
// listed must be one the model unregistered), a table's verify report and
// partition retention, the soft-deleted listing and the purge jobs. Each
// must answer (never a 5xx); what they report is checked where the model
// knows it without trusting the answer.

func (s *Sim) opRead(kind string) *Op {
	base := "/lifecycle/v1/catalogs/" + catalogName
	op := &Op{want: []int{200}}
	var path string
	switch kind {
	case "read-catalog":
		path = base
	case "read-grant":
		p := pick(s, []string{writer, holder, reader})
		path, op.keys = base+"/grants/"+url.PathEscape(p), []string{"grants"}
	case "read-soft-deleted":
		path = base + "/soft-deleted-tables"
	case "read-purge-jobs":
		path = base + "/purge-jobs"
	case "read-unregistered":
		path = base + "/unregistered-tables"
	case "read-verify", "read-retention":
		lives := s.m.inState(live)
		if len(lives) == 0 {
			return nil
		}
		g := pick(s, lives)
		if kind == "read-retention" {
			// Mostly a table with a policy: a 404 reads nothing (and
			// a read never answered 200 is a kind never covered).
			var held []*Gen
			for _, l := range lives {
				if p, ok := s.m.policies[l.ident()]; ok && p.uuid == l.uuid {
					held = append(held, l)
				}
			}
			if len(held) > 0 && s.chance(0.8) {
				g = pick(s, held)
			}
		}
		path = lifecyclePath(g.ns, g.name) + "/verify"
		if kind == "read-retention" {
			path = lifecyclePath(g.ns, g.name) + "/partition-retention"
			op.want = []int{200, 404} // 404: no policy set
		}
		op.keys = append(tableKeys(g.ns, g.name), "uuid:"+g.uuid, "policy:"+g.ns+"."+g.name)
	default:
		return nil
	}
	op.desc = "admin reads " + path
	op.run = func() Outcome { return s.w.call(s.ctx, admin, "GET", path, nil) }
	if kind == "read-unregistered" {
		op.after = func(o Outcome, contended bool) error {
			if o.Status != 200 || contended {
				return nil
			}
			var res struct {
				Tables []struct {
					UUID string `json:"table-uuid"`
				} `json:"tables"`
			}
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return s.violatef("unregistered tables: %v", err)
			}
			for _, t := range res.Tables {
				known := false
				for _, g := range s.m.inState(unregistered, released) {
					known = known || g.uuid == t.UUID
				}
				if !known {
					return s.violatef("unregistered tables list %s, which the model never unregistered", t.UUID)
				}
			}
			s.logf("   %d unregistered", len(res.Tables))
			return nil
		}
	}
	return op
}
