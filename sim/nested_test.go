package sim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// nestedNamespaces: a top-level namespace of the barrier's own with two
// levels below it (the model's namespaces are top-level: this barrier
// checks what it makes, and leaves nothing). A parent with a child
// namespace cannot be dropped; a table two levels down is held by its
// grandparent's legal hold (its vended session is read-only, its drop
// with purge refused); once the table and the child are gone the parent
// drops, and then the root.
func (s *Sim) nestedNamespaces() *barrier {
	s.m.nextID++
	root := []string{fmt.Sprintf("nest%d", s.m.nextID)}
	parent := []string{root[0], "p"}
	child := []string{root[0], "p", "c"}
	path := func(ns []string) string {
		return "/v1/" + catalogName + "/namespaces/" + url.PathEscape(strings.Join(ns, "\x1f"))
	}
	return &barrier{kind: "nested-namespaces", desc: fmt.Sprintf("nested namespaces %v and %v, a table in the child, the parent held", parent, child), run: func() error {
		call := func(want int, method, p string, body any) (Outcome, error) {
			o := s.w.call(s.ctx, admin, method, p, body)
			if o.Status != want {
				return o, s.violatef("nested namespaces: %s %s: %s, want %d", method, p, o, want)
			}
			return o, nil
		}
		steps := []struct {
			want         int
			method, path string
			body         any
		}{
			{200, "POST", "/v1/" + catalogName + "/namespaces", map[string]any{"namespace": root}},
			{200, "POST", "/v1/" + catalogName + "/namespaces", map[string]any{"namespace": parent}},
			{200, "POST", "/v1/" + catalogName + "/namespaces", map[string]any{"namespace": child}},
			{409, "DELETE", path(parent), nil}, // a child namespace
		}
		for _, st := range steps {
			if _, err := call(st.want, st.method, st.path, st.body); err != nil {
				return err
			}
		}
		o, err := call(200, "POST", path(child)+"/tables", map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON)})
		if err != nil {
			return err
		}
		var res createResult
		if err := json.Unmarshal(o.Body, &res); err != nil {
			return s.violatef("nested namespaces: create answer: %v", err)
		}
		g := &Gen{ns: strings.Join(child, "\x1f"), name: "t", uuid: res.Metadata.UUID, location: res.Metadata.Location}
		if _, err := call(200, "POST", path(parent)+"/properties", map[string]any{"updates": map[string]string{"icehold.legal-hold": "true"}}); err != nil {
			return err
		}
		if err := s.heldSessionReadOnly(g, "namespace "+strings.Join(parent, ".")); err != nil {
			return err
		}
		if _, err := call(409, "DELETE", path(child)+"/tables/t?purgeRequested=true", nil); err != nil {
			return err
		}
		o, err = call(200, "POST", path(parent)+"/properties", map[string]any{"removals": []string{"icehold.legal-hold", "sim.never-set"}})
		if err != nil {
			return err
		}
		// The answer sorts the keys asked for into removed and missing (the
		// REST spec's UpdateNamespacePropertiesResponse).
		var upd struct {
			Removed []string `json:"removed"`
			Missing []string `json:"missing"`
		}
		if err := json.Unmarshal(o.Body, &upd); err != nil || !slices.Equal(upd.Removed, []string{"icehold.legal-hold"}) || !slices.Equal(upd.Missing, []string{"sim.never-set"}) {
			return s.violatef("nested namespaces: removing icehold.legal-hold (set) and sim.never-set (never set) answered removed %v, missing %v: %s", upd.Removed, upd.Missing, o)
		}
		if _, err := call(204, "DELETE", path(child)+"/tables/t?purgeRequested=true", nil); err != nil {
			return err
		}
		s.m.purgedApart[g.uuid] = true
		if err := s.drain(); err != nil {
			return err
		}
		// A table soft-dropped does not keep its namespace (SPEC §4: an
		// engine drops the tables, then the namespace); its record stays
		// and is purged now after the namespace went.
		var soft string
		if s.softOn(s.m.catProps) {
			o, err := call(200, "POST", path(child)+"/tables", map[string]any{"name": "u", "schema": json.RawMessage(schemaJSON)})
			if err != nil {
				return err
			}
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return s.violatef("nested namespaces: create answer: %v", err)
			}
			soft = res.Metadata.UUID
			s.m.purgedApart[soft] = true
			if _, err := call(204, "DELETE", path(child)+"/tables/u", nil); err != nil {
				return err
			}
		}
		// Each level's drop lets go of its parent: the root drops last.
		for _, ns := range [][]string{child, parent, root} {
			if _, err := call(204, "DELETE", path(ns), nil); err != nil {
				return err
			}
		}
		if soft != "" {
			lp := "/lifecycle/v1/catalogs/" + catalogName + "/namespaces/" + url.PathEscape(strings.Join(child, "\x1f")) + "/tables/u/purge-now"
			if _, err := call(202, "POST", lp, map[string]any{"table-uuid": soft}); err != nil {
				return err
			}
			if err := s.drain(); err != nil {
				return err
			}
		}
		s.logf("   %v, %v and %v created, held, emptied and dropped", root, parent, child)
		return nil
	}}
}
