package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/outbox"
)

// The lifecycle events (docs/spec.md §5: EventBridge; locally events.log):
// what operators and pipelines downstream act on. At rest, with the outbox
// relayed, the model holds them to what it saw happen:
//   - every job that SUCCEEDED announced it once, with the counters the
//     job reports (PurgeCompleted), and every job started once
//     (PurgeStarted);
//   - a table the model says was soft-deleted was announced
//     (TableSoftDeleted), and one announced was soft-deleted;
//   - a table the model says is permanently deleted was announced
//     (TablePermanentlyDeleted), and none the model holds live, soft-deleted
//     or unregistered (and no other generation shares its uuid with) was.

type eventLine struct {
	Type   string `json:"detail-type"`
	Detail struct {
		ID        string         `json:"event-id"`
		Actor     string         `json:"actor"`
		Namespace []string       `json:"namespace"`
		Table     string         `json:"table"`
		UUID      string         `json:"table-uuid"`
		JobID     string         `json:"job-id"`
		Detail    map[string]any `json:"detail"`
	} `json:"detail"`
}

// events relays what is pending and reads the local bus's log.
func (s *Sim) events() ([]eventLine, error) {
	// The bus may refuse a call or two (refusingBus): the outbox keeps
	// what it carried, and the next relay publishes it.
	var err error
	for range 4 {
		if _, err = outbox.Drain(s.ctx, s.w.srv.Catalog.Store(), s.w.srv.Events); err == nil {
			break
		}
	}
	if err != nil {
		return nil, s.violatef("outbox relay: %v", err)
	}
	f, err := os.Open(filepath.Join(s.w.dir, "events.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []eventLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e eventLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, s.violatef("events.log: a line is not an event: %v: %s", err, trunc(sc.Text(), 200))
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// checkEvents: the events at rest against the model and the jobs.
func (s *Sim) checkEvents() error {
	evs, err := s.events()
	if err != nil {
		return err
	}
	jobs, err := s.allJobs()
	if err != nil {
		return err
	}
	started, completed := map[string]int{}, map[string]eventLine{}
	byType := map[string]map[string]bool{} // type → table uuids
	for _, e := range evs {
		if byType[e.Type] == nil {
			byType[e.Type] = map[string]bool{}
		}
		byType[e.Type][e.Detail.UUID] = true
		switch e.Type {
		case "TablePermanentlyDeleted", "ViewPermanentlyDeleted":
			// Its purge flag says whether the files go: a job takes them
			// exactly when it does (held-out 10: the flag read from the
			// record's purge-on-expiry on a purge-now).
			flag, ok := e.Detail.Detail["purge"].(bool)
			job := e.Detail.JobID != "" || e.Detail.Detail["job-id"] != nil
			if !ok || flag != job {
				return s.violatef("%s of %s.%s (%s) says purge %v beside job %q %v: the flag must say whether a job takes the files", e.Type, strings.Join(e.Detail.Namespace, "."), e.Detail.Table, e.Detail.UUID, e.Detail.Detail["purge"], e.Detail.JobID, e.Detail.Detail["job-id"])
			}
		case "PurgeStarted":
			started[e.Detail.JobID]++
		case "PurgeCompleted":
			if _, twice := completed[e.Detail.JobID]; twice {
				return s.violatef("job %s announced PurgeCompleted twice (distinct event ids)", e.Detail.JobID)
			}
			completed[e.Detail.JobID] = e
		}
	}
	for _, j := range jobs {
		if j.Kind != "" && j.Kind != "purge" && j.Kind != "view" {
			continue // expire, orphan and sweep jobs: not a table's purge
		}
		// Once, and once more for each operator's retry of it FAILED.
		retries, _ := num(j.Raw, "retries")
		if started[j.ID] != 1+int(retries) {
			return s.violatef("job %s (%s %s.%s) announced PurgeStarted %d times, want %d (1 + %d retries)", j.ID, j.State, strings.Join(j.Namespace, "."), j.Table, started[j.ID], 1+retries, retries)
		}
		e, ok := completed[j.ID]
		switch {
		case j.State == "SUCCEEDED" && !ok:
			return s.violatef("job %s SUCCEEDED without a PurgeCompleted event", j.ID)
		case j.State != "SUCCEEDED" && ok:
			return s.violatef("job %s is %s, yet PurgeCompleted was announced", j.ID, j.State)
		case ok:
			for _, c := range []string{"files-deleted", "files-unreferenced", "bytes"} {
				if fmt.Sprint(e.Detail.Detail[c]) != fmt.Sprint(j.Raw[c]) {
					return s.violatef("job %s: PurgeCompleted says %s %v, the job %v", j.ID, c, e.Detail.Detail[c], j.Raw[c])
				}
			}
		}
	}
	for _, g := range s.m.gens {
		switch {
		case g.everSoft && !byType["TableSoftDeleted"][g.uuid]:
			return s.violatef("%s was soft-deleted, and no TableSoftDeleted event says so", g)
		case g.state == gone && !byType["TablePermanentlyDeleted"][g.uuid]:
			return s.violatef("%s was permanently deleted, and no TablePermanentlyDeleted event says so", g)
		}
	}
	// An undrop's event names the identifier the table came back under
	// (SPEC §4: an event carries the identifier of the change it
	// reports), and each undrop the model accepted was announced.
	announced := map[string]bool{}
	for _, e := range evs {
		if e.Type != "TableUndropped" {
			continue
		}
		id := strings.Join(e.Detail.Namespace, ".") + "." + e.Detail.Table
		announced[e.Detail.UUID+" "+id] = true
		// (An undrop the model never saw answered, e.g. one a fault cut
		// off after it landed, is not the model's to name.)
		if ids := s.m.undropped[e.Detail.UUID]; ids != nil && !ids[id] {
			return s.violatef("a TableUndropped event names table %s as %s, under which the model never saw it undropped (%v)", e.Detail.UUID, id, s.m.undropped[e.Detail.UUID])
		}
	}
	for uuid, ids := range s.m.undropped {
		for id := range ids {
			if !announced[uuid+" "+id] {
				return s.violatef("table %s was undropped as %s, and no TableUndropped event says so", uuid, id)
			}
		}
	}
	// A record's legal hold change says the value it set (only a
	// change is announced: docs/design/softdelete.md, Events).
	holds := map[string]map[bool]int{}
	for _, e := range evs {
		if e.Type != "LegalHoldChanged" {
			continue
		}
		on, ok := e.Detail.Detail["legal-hold"].(bool)
		if !ok {
			return s.violatef("a LegalHoldChanged event of table %s has no boolean legal-hold: %v", e.Detail.UUID, e.Detail.Detail)
		}
		if holds[e.Detail.UUID] == nil {
			holds[e.Detail.UUID] = map[bool]int{}
		}
		holds[e.Detail.UUID][on]++
	}
	for uuid, got := range holds {
		if want := s.m.holdChanges[uuid]; !s.m.holdInexact[uuid] && (got[true] != want[true] || got[false] != want[false]) {
			return s.violatef("table %s: LegalHoldChanged events set the hold %d times and cleared it %d times; the accepted changes set it %d times and cleared it %d", uuid, got[true], got[false], want[true], want[false])
		}
	}
	for uuid, want := range s.m.holdChanges {
		if got := holds[uuid]; !s.m.holdInexact[uuid] && (got[true] != want[true] || got[false] != want[false]) {
			return s.violatef("table %s: the accepted changes of its record's legal hold set it %d times and cleared it %d; its LegalHoldChanged events %d and %d", uuid, want[true], want[false], got[true], got[false])
		}
	}
	// A change a request made names who sent it (the sweeps' own changes
	// are TablePermanentlyDeleted and the Purge* events).
	for _, e := range evs {
		switch e.Type {
		case "TableSoftDeleted", "TableUndropped", "LegalHoldChanged", "ViewSoftDeleted", "ViewUndropped":
			if !slices.Contains(principals, e.Detail.Actor) {
				return s.violatef("a %s event of %s.%s names actor %q, no principal that sends requests here", e.Type, strings.Join(e.Detail.Namespace, "."), e.Detail.Table, e.Detail.Actor)
			}
		}
	}
	if err := s.checkViewEvents(evs); err != nil {
		return err
	}
	if err := s.checkEventOrder(evs); err != nil {
		return err
	}
	if err := s.checkSoftDeletedDetails(evs); err != nil {
		return err
	}
	for _, typ := range []string{"TableSoftDeleted", "TablePermanentlyDeleted"} {
		for uuid := range byType[typ] {
			if !s.explains(typ, uuid) {
				return s.violatef("a %s event names table %s, which the model never %s", typ, uuid,
					map[string]string{"TableSoftDeleted": "soft-deleted", "TablePermanentlyDeleted": "deleted for good"}[typ])
			}
		}
	}
	s.logf("   %d events agree with the model and %d jobs", len(evs), len(jobs))
	return nil
}

// explains: a generation of uuid went through what an event of typ says.
func (s *Sim) explains(typ, uuid string) bool {
	if s.m.purgedApart[uuid] {
		return true
	}
	for _, g := range s.m.gens {
		if g.uuid != uuid {
			continue
		}
		switch {
		case typ == "TableSoftDeleted" && (g.everSoft || g.mayRelease):
			return true
		case typ == "TablePermanentlyDeleted" && (g.recovered || g.state != live && g.state != soft && g.state != unregistered):
			return true
		}
	}
	return false
}

// checkMetrics: at rest, the pipeline's metrics (CloudWatch embedded metric
// format; locally metrics.log) add up to what the jobs of every catalog
// say: one JobsCompleted per SUCCEEDED job with its files-deleted and
// files-unreferenced, one JobsFailed per time a job ended FAILED (each
// operator's retry followed one).
func (s *Sim) checkMetrics() error {
	raw, err := os.ReadFile(filepath.Join(s.w.dir, "metrics.log"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	got := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if line == "" {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(line), &doc); err != nil {
			return s.violatef("metrics.log: a line is not a metric document: %v: %s", err, trunc(line, 200))
		}
		for _, k := range []string{"JobsCompleted", "FilesDeleted", "FilesUnreferenced", "JobsFailed"} {
			if v, ok := doc[k].(float64); ok {
				got[k] += v
			}
		}
	}
	want, slack := map[string]float64{}, map[string]float64{}
	for _, cat := range []string{catalogName, "simx", "simy", scopeCatalog, vendingCatalog} {
		jobs, err := s.jobsOf(cat)
		if err != nil {
			return err
		}
		for _, j := range jobs {
			retries, _ := num(j.Raw, "retries")
			own := map[string]float64{"JobsFailed": float64(retries)}
			switch j.State {
			case "SUCCEEDED":
				d, _ := num(j.Raw, "files-deleted")
				u, _ := num(j.Raw, "files-unreferenced")
				own["JobsCompleted"], own["FilesDeleted"], own["FilesUnreferenced"] = 1, float64(d), float64(u)
			case "FAILED":
				own["JobsFailed"]++
			}
			for k, v := range own {
				want[k] += v
				if s.w.crossed[j.ID] {
					slack[k] += v // soak seed 1062: killed between its end and its line
				}
			}
		}
	}
	for _, k := range []string{"JobsCompleted", "FilesDeleted", "FilesUnreferenced", "JobsFailed"} {
		if got[k] > want[k] || got[k] < want[k]-slack[k] {
			return s.violatef("metrics: %s adds up to %v, the jobs of every catalog say %v (%v of it by jobs a kill crossed)", k, got[k], want[k], slack[k])
		}
	}
	return nil
}

// checkViewEvents: a view's lifecycle is announced as a view's (View*
// events, and kind "view" on those and on its LegalHoldChanged and Purge*
// events; no Table* event for it): each drop to soft-deleted and each
// undrop the model saw accepted alone, once at least, and each purge-now
// accepted with a ViewPermanentlyDeleted.
func (s *Sim) checkViewEvents(evs []eventLine) error {
	views := map[string]*View{}
	for _, v := range s.m.views {
		views[v.uuid] = v
	}
	count := map[string]int{} // type + " " + uuid
	for _, e := range evs {
		v := views[e.Detail.UUID]
		kind, _ := e.Detail.Detail["kind"].(string)
		isView := strings.HasPrefix(e.Type, "View")
		switch {
		case isView && kind != "view":
			return s.violatef("a %s event of %s.%s says kind %q, want view", e.Type, strings.Join(e.Detail.Namespace, "."), e.Detail.Table, kind)
		case strings.HasPrefix(e.Type, "Table") && (kind == "view" || v != nil):
			return s.violatef("a %s event names %s (kind %q): a view's lifecycle is announced as a view's", e.Type, e.Detail.UUID, kind)
		case v != nil && !isView && kind != "view":
			return s.violatef("a %s event of view %s has kind %q, want view", e.Type, v, kind)
		}
		count[e.Type+" "+e.Detail.UUID]++
	}
	for _, v := range s.m.views {
		for typ, n := range map[string]int{"ViewSoftDeleted": v.softDrops, "ViewUndropped": v.undrops} {
			if count[typ+" "+v.uuid] < n {
				return s.violatef("%s: %d %s events, and the model saw %d accepted", v, count[typ+" "+v.uuid], typ, n)
			}
		}
		if v.job != "" && count["ViewPermanentlyDeleted "+v.uuid] == 0 {
			return s.violatef("%s: its purge-now was accepted (job %s), and no ViewPermanentlyDeleted event says so", v, v.job)
		}
	}
	return nil
}

// checkSoftDeletedDetails: a soft drop's event says the purge-at its record
// got (it never moves after the drop): for a table soft-deleted once under
// its uuid and listed, its TableSoftDeleted event's purge-at is the
// record's.
func (s *Sim) checkSoftDeletedDetails(evs []eventLine) error {
	_, softs, err := s.observe()
	if err != nil {
		return err
	}
	records := map[string][]softObs{}
	for _, o := range softs {
		records[o.UUID] = append(records[o.UUID], o)
	}
	drops := map[string][]eventLine{}
	for _, e := range evs {
		if e.Type == "TableSoftDeleted" {
			drops[e.Detail.UUID] = append(drops[e.Detail.UUID], e)
		}
		// Every soft drop announces the hold it applied, its record gone
		// since or not (held-out 9: an inherited hold announced empty).
		if e.Type == "TableSoftDeleted" || e.Type == "ViewSoftDeleted" {
			hold, _ := e.Detail.Detail["hold-period"].(string)
			if _, ok := parseHold(hold); !ok {
				return s.violatef("a %s event of %s.%s says hold-period %q, no hold a drop applies", e.Type, strings.Join(e.Detail.Namespace, "."), e.Detail.Table, hold)
			}
		}
	}
	for uuid, rs := range records {
		es := drops[uuid]
		if len(rs) != 1 || len(es) != 1 {
			continue // several generations: which event is whose is not the point here
		}
		got, _ := es[0].Detail.Detail["purge-at"].(string)
		at, err1 := time.Parse(time.RFC3339, got)
		want, err2 := time.Parse(time.RFC3339, rs[0].PurgeAt)
		if err1 != nil || err2 != nil || !at.Equal(want) {
			return s.violatef("soft-deleted %s.%s (%s): its TableSoftDeleted event says purge-at %q, the record %q", strings.Join(rs[0].Namespace, "."), rs[0].Name, short(uuid), got, rs[0].PurgeAt)
		}
		// The hold the drop applied (its table's, its namespace's, its
		// catalog's or the default), as the record says (held-out 9: the
		// table's own property announced, empty when inherited).
		hold, _ := es[0].Detail.Detail["hold-period"].(string)
		d1, ok1 := parseHold(hold)
		d2, ok2 := parseHold(rs[0].Hold)
		if !ok1 || !ok2 || d1 != d2 {
			return s.violatef("soft-deleted %s.%s (%s): its TableSoftDeleted event says hold-period %q, the record %q", strings.Join(rs[0].Namespace, "."), rs[0].Name, short(uuid), hold, rs[0].Hold)
		}
	}
	return nil
}

// checkEventOrder: the bus gets a table's events in the order of the
// changes they report (the outbox relays oldest first; docs/design/purge.md, The event
// outbox).
// Only pairs one change orders are held to it, by each event's first
// delivery (a redelivery may come later): a job's TablePermanentlyDeleted
// (one transaction with its PurgeStarted, recorded first) before any other
// event of the job; a job's PurgeCompleted, PurgeFailed or
// PurgeDeadLettered after a PurgeStarted of it; a uuid's undrops never
// more than its soft deletes so far (held-out 11: outbox records keyed by
// the second came out in the order of their random ids).
func (s *Sim) checkEventOrder(evs []eventLine) error {
	first := map[string]bool{}
	byJob := map[string][]string{} // job → the types delivered so far
	dropped := map[string]int{}    // uuid → soft deletes less undrops so far
	for i, e := range evs {
		if first[e.Detail.ID] {
			continue
		}
		first[e.Detail.ID] = true
		job := e.Detail.JobID
		if job == "" {
			job, _ = e.Detail.Detail["job-id"].(string)
		}
		if job != "" {
			before := byJob[job]
			switch e.Type {
			case "TablePermanentlyDeleted", "ViewPermanentlyDeleted":
				if len(before) > 0 {
					return s.violatef("event %d: job %s's %s (recorded with its PurgeStarted, before it) reached the bus after its %v", i, job, e.Type, before)
				}
			case "PurgeCompleted", "PurgeFailed", "PurgeDeadLettered":
				if !slices.Contains(before, "PurgeStarted") {
					return s.violatef("event %d: job %s's %s reached the bus before any PurgeStarted of it (so far %v)", i, job, e.Type, before)
				}
			}
			byJob[job] = append(before, e.Type)
		}
		switch e.Type {
		case "TableSoftDeleted", "ViewSoftDeleted":
			dropped[e.Detail.UUID]++
		case "TableUndropped", "ViewUndropped":
			if dropped[e.Detail.UUID]--; dropped[e.Detail.UUID] < 0 {
				return s.violatef("event %d: %s of %s.%s (%s) reached the bus before the soft delete it undoes", i, e.Type, strings.Join(e.Detail.Namespace, "."), e.Detail.Table, e.Detail.UUID)
			}
		}
	}
	return nil
}
