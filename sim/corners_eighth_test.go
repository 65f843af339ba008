package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"
)

// Corners from the eighth held-out set's survivors
// (docs/design/simulation-corners.md): commits that race from one base, a
// catalog that requires vended credentials, a noncurrent version between
// the orphan and the version window, two soft-deleted generations of one
// name.

// --- appends that race from one base ---

// racers: how many appends race.
const racers = 3

// racingCommits: three writers load a table at one snapshot and commit at
// once, each one way a client commits: an engine's append (iceberg-go), a
// single-table commit, a transactions/commit, both asserting the snapshot
// they read. The bucket holds each commit at its metadata write until all
// three are there, so every one is checked against the same base before
// any pointer moves: exactly one may win (an optimistic commit is a
// compare-and-swap), the others must get a 409 CommitFailedException, and
// the table must scan its rows and an appending winner's, none of a
// loser's.
func (s *Sim) racingCommits() *barrier {
	ways := make([]string, racers)
	for i := range ways {
		ways[i] = pick(s, []string{"append", "append", "commit", "transaction"})
	}
	return &barrier{kind: "racing-commits", desc: fmt.Sprintf("%d commits to one table from one snapshot at once: %v", racers, ways), run: func() error {
		s.acted = false
		g, err := s.freshTable("rc", "", nil)
		if err != nil || g == nil {
			return err
		}
		cat, _, err := s.w.client(s.ctx, admin)
		if err != nil {
			return err
		}
		var tbls []*table.Table
		rows := make([]map[int64]string, racers)
		for i := range racers {
			t, err := cat.LoadTable(s.ctx, table.Identifier{g.ns, g.name})
			if err != nil {
				return s.violatef("%s: load: %v", g, err)
			}
			tbls = append(tbls, t)
			if ways[i] != "append" {
				continue
			}
			rows[i] = map[int64]string{}
			for range 2 {
				s.m.nextRow++
				rows[i][s.m.nextRow] = s.day()
			}
		}
		snap := tbls[0].CurrentSnapshot()
		if snap == nil {
			return nil
		}
		meta, ok := keyOf(strings.TrimRight(g.location, "/") + "/metadata/")
		if !ok {
			return nil
		}
		change := func(i int) map[string]any {
			return map[string]any{
				"requirements": []any{map[string]any{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": snap.SnapshotID}},
				"updates":      []any{map[string]any{"action": "set-properties", "updates": map[string]string{"sim.race": fmt.Sprint(i)}}},
			}
		}
		s.w.srv.S3Emulator.SetObserver(gate(racers, func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, ".metadata.json") && strings.Contains(r.URL.Path, "/"+meta)
		}))
		results := make([]*table.Table, racers)
		outs := make([]string, racers) // how each ended: "" won, else why not
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				switch ways[i] {
				case "append":
					data, err := arrowRows(rows[i])
					if err != nil {
						outs[i] = err.Error()
						return
					}
					defer data.Release()
					tx := tbls[i].NewTransaction()
					if err = tx.AppendTable(s.ctx, data, 1000, nil); err == nil {
						results[i], err = tx.Commit(s.ctx)
					}
					switch {
					case errors.Is(err, table.ErrCommitFailed):
						outs[i] = "409"
					case err != nil:
						outs[i] = err.Error()
					}
				case "commit":
					o := s.w.call(s.ctx, admin, "POST", tablePath(g.ns, g.name), change(i))
					outs[i] = raceOutcome(o, 200)
				case "transaction":
					c := change(i)
					c["identifier"] = map[string]any{"namespace": []string{g.ns}, "name": g.name}
					o := s.w.call(s.ctx, admin, "POST", "/v1/"+catalogName+"/transactions/commit", map[string]any{"table-changes": []any{c}})
					outs[i] = raceOutcome(o, 204)
				}
			})
		}
		wg.Wait()
		s.w.srv.S3Emulator.SetObserver(nil)
		s.fresh = nil
		s.acted = true
		var won []int
		for i, out := range outs {
			switch out {
			case "":
				won = append(won, i)
			case "409":
			default:
				return s.violatef("%s: a %s racing %d other commits from one snapshot: %s, want a win or 409 CommitFailedException", g, ways[i], racers-1, out)
			}
		}
		if len(won) != 1 {
			return s.violatef("%s: %d of %d commits from one snapshot (%v) won (one commit wins a race, the others get 409: two wins lose an update)", g, len(won), racers, ways)
		}
		w := won[0]
		t, err := cat.LoadTable(s.ctx, table.Identifier{g.ns, g.name})
		if err != nil {
			return s.violatef("%s: load after the race: %v", g, err)
		}
		if results[w] != nil && results[w].MetadataLocation() != t.MetadataLocation() {
			return s.violatef("%s: the winning append committed %s, and the table's metadata is %s", g, results[w].MetadataLocation(), t.MetadataLocation())
		}
		if err := s.committed(g.uuid, g.ns, g.name, t.MetadataLocation(), rows[w], nil, false); err != nil {
			return err
		}
		s.logf("   the %s (%d of %d) won, the others 409", ways[w], w+1, racers)
		return s.checkRows(g, "after commits that raced from one snapshot")
	}}
}

// raceOutcome: "" for a win (status ok), "409" for a CommitFailedException,
// else the answer.
func raceOutcome(o Outcome, ok int) string {
	switch {
	case o.Status == ok:
		return ""
	case o.Status == 409 && strings.Contains(string(o.Body), "CommitFailedException"):
		return "409"
	}
	return o.String()
}

// gate returns an S3 observer that holds each request match selects until
// n have arrived (or a few seconds have passed: a racer that failed before
// its write does not hang the rest).
func gate(n int, match func(*http.Request) bool) func(*http.Request) {
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	return func(r *http.Request) {
		if !match(r) {
			return
		}
		mu.Lock()
		if arrived++; arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
	}
}

// --- a catalog that requires vended credentials ---

// vendingCatalog: the catalog whose vended-credentials is required, kept
// apart from the model's.
const vendingCatalog = "simv"

// requiredVending: in a catalog whose vended-credentials is required, the
// config and every table answer carry no static S3 keys (engines get the
// table's session only, docs/engines.md), each table answer with a
// metadata location carries storage credentials, and an engine appends
// with them. A load revalidated at once is a 304; two minutes before its
// session expires, a 200 with a fresh session.
func (s *Sim) requiredVending() *barrier {
	s.m.nextID++
	ns := fmt.Sprintf("rv%d", s.m.nextID)
	return &barrier{kind: "required-vending", desc: "catalog " + vendingCatalog + " requires vended credentials: its config and table answers hand no static keys", run: func() error {
		s.acted = false
		call := func(want int, method, path string, body any, headers ...string) (Outcome, error) {
			o := s.w.call(s.ctx, admin, method, path, body, headers...)
			if o.Status != want {
				return o, s.violatef("required vending: %s %s %v: %s, want %d", method, path, headers, o, want)
			}
			return o, nil
		}
		if o := s.w.call(s.ctx, admin, "GET", "/lifecycle/v1/catalogs/"+vendingCatalog, nil); o.Status != 200 {
			props := map[string]string{"soft-delete.enabled": "false", "vended-credentials": "required"}
			if _, err := call(201, "POST", "/lifecycle/v1/catalogs", map[string]any{"name": vendingCatalog, "warehouse": "s3://" + bucket + "/" + vendingCatalog, "properties": props}); err != nil {
				return err
			}
		}
		// noStatic: what an answer's config hands that is not the table's
		// session: a static key.
		noStatic := func(what string, cfg map[string]string) error {
			var static []string
			for _, k := range staticKeys {
				if cfg[k] != "" {
					static = append(static, k)
				}
			}
			if len(static) > 0 {
				return s.violatef("required vending: %s of catalog %s (vended-credentials required) hands static keys %v", what, vendingCatalog, static)
			}
			return nil
		}
		o, err := call(200, "GET", "/v1/config?warehouse="+vendingCatalog, nil)
		if err != nil {
			return err
		}
		var conf struct {
			Defaults  map[string]string `json:"defaults"`
			Overrides map[string]string `json:"overrides"`
		}
		if err := json.Unmarshal(o.Body, &conf); err != nil {
			return s.violatef("required vending: config answer: %v", err)
		}
		if err := noStatic("/v1/config's defaults", conf.Defaults); err != nil {
			return err
		}
		if err := noStatic("/v1/config's overrides", conf.Overrides); err != nil {
			return err
		}
		nsPath := "/v1/" + vendingCatalog + "/namespaces/" + ns
		if _, err := call(200, "POST", "/v1/"+vendingCatalog+"/namespaces", map[string]any{"namespace": []string{ns}}); err != nil {
			return err
		}
		// tableAnswer: a table answer carries no static key, and the
		// table's session; it returns when that session expires.
		var expires time.Time
		tableAnswer := func(what string, o Outcome) error {
			var res struct {
				Config map[string]string `json:"config"`
				Creds  []struct {
					Prefix string            `json:"prefix"`
					Config map[string]string `json:"config"`
				} `json:"storage-credentials"`
			}
			if err := json.Unmarshal(o.Body, &res); err != nil {
				return s.violatef("required vending: %s: %v", what, err)
			}
			if err := noStatic(what+"'s config", res.Config); err != nil {
				return err
			}
			if len(res.Creds) == 0 {
				return s.violatef("required vending: %s carries no storage-credentials (vended-credentials required: every table answer does): %s", what, trunc(string(o.Body), 300))
			}
			ms, err := strconv.ParseInt(res.Creds[0].Config["s3.session-token-expires-at-ms"], 10, 64)
			if err != nil {
				return s.violatef("required vending: %s: a session with no expiry: %v", what, res.Creds[0].Config)
			}
			expires = time.UnixMilli(ms)
			return nil
		}
		o, err = call(200, "POST", nsPath+"/tables", map[string]any{"name": "t", "schema": json.RawMessage(schemaJSON)})
		if err != nil {
			return err
		}
		var created createResult
		if err := json.Unmarshal(o.Body, &created); err != nil {
			return s.violatef("required vending: create answer: %v", err)
		}
		s.m.purgedApart[created.Metadata.UUID] = true
		if err := tableAnswer("the create answer", o); err != nil {
			return err
		}
		// An engine appends with what the catalog hands it.
		cat, _, err := s.w.clientOf(s.ctx, vendingCatalog, admin)
		if err != nil {
			return err
		}
		if err := s.appendWith(cat, ns, "t", map[int64]string{1: s.day()}, "required vending (the vended session)"); err != nil {
			return err
		}
		s.acted = true
		if o, err = call(200, "GET", nsPath+"/tables/t", nil); err != nil {
			return err
		}
		if err := tableAnswer("a load answer", o); err != nil {
			return err
		}
		// Revalidated (If-None-Match) at once, the load keeps its
		// session (304); two minutes before the session expires, within
		// the five an engine refreshes in, it gets a fresh one (a 304
		// then would leave it expired keys: docs/spec.md §2, the tag
		// covers the credentials' expiry).
		tag := o.Header.Get("ETag")
		if o, err = call(304, "GET", nsPath+"/tables/t", nil, "If-None-Match", tag); err != nil {
			return err
		}
		s.w.clock.Advance(expires.Sub(s.w.clock.Now()) - 2*time.Minute)
		if o, err = call(200, "GET", nsPath+"/tables/t", nil, "If-None-Match", tag); err != nil {
			return err
		}
		if err := tableAnswer("a revalidation two minutes before the session expires", o); err != nil {
			return err
		}
		if left := expires.Sub(s.w.clock.Now()); left < 10*time.Minute {
			return s.violatef("required vending: a revalidation two minutes before the session expires hands a session with %v to live", left)
		}
		if _, err := call(204, "DELETE", nsPath+"/tables/t?purgeRequested=true", nil); err != nil {
			return err
		}
		if err := s.drain(); err != nil {
			return err
		}
		if _, err := call(204, "DELETE", nsPath, nil); err != nil {
			return err
		}
		s.logf("   %s.%s.t: config, create and load answers handed its session only; appended and purged", vendingCatalog, ns)
		return nil
	}}
}

// staticKeys are the client config keys of static S3 credentials.
var staticKeys = []string{"s3.access-key-id", "s3.secret-access-key", "s3.session-token"}

// --- a noncurrent version between the orphan and the version window ---

// versionWindow: an engine overwrites a committed file; the clock moves to
// halfway between the orphan window and the version window, and a storage
// sweep runs: the version the overwrite replaced is past the one and within
// the other, so the sweep must keep it, and repair restores it. When the
// catalog's windows leave no such gap, admin sets the version window to
// ten days first.
func (s *Sim) versionWindow() *barrier {
	return &barrier{kind: "version-window", desc: "an overwritten file's old version, older than the orphan window and younger than the version window, through a storage sweep and a repair", run: func() error {
		s.acted = false
		orphan := s.window("storage-sweep.orphan-window", defaultOrphanWindow)
		version := s.window("storage.version-window", defaultVersionWindow)
		// Two settings at most: a long orphan window shortened may still
		// outlast a short version window (soak seed 1048: P3D over PT6H).
		for i := 0; i < 2 && version-orphan < 4*time.Hour; i++ {
			key, v := "storage.version-window", "P10D"
			if orphan >= sweepWindows[v]-4*time.Hour {
				key, v = "storage-sweep.orphan-window", "P3D"
			}
			op := s.catalogPropsOp("admin sets "+key+" "+v, map[string]any{"updates": map[string]string{key: v}}, key, v)
			if o, err := s.runFor(op); err != nil || o.Status != 200 {
				return err
			}
			orphan = s.window("storage-sweep.orphan-window", defaultOrphanWindow)
			version = s.window("storage.version-window", defaultVersionWindow)
		}
		g, err := s.freshTable("vw", "", nil)
		if err != nil || g == nil {
			return err
		}
		age := (orphan + (version-orphan)/2).Truncate(time.Hour)
		return s.overwriteRepairOf(g, age).run()
	}}
}

// --- two soft-deleted generations of one name ---

// twoGenerations: a table is soft-dropped, made again under its name and
// soft-dropped again (admin turns the catalog's soft delete on first if a
// setting turned it off). An undrop and a purge-now naming neither generation
// are refused (409, both uuids named) and change nothing; an undrop naming
// the older, renamed into another namespace, brings that one back there
// with its rows; a purge-now naming the newer purges it.
func (s *Sim) twoGenerations() *barrier {
	return &barrier{kind: "two-generations", desc: "two soft-deleted generations of one name: requests naming neither are refused, naming one take that one", run: func() error {
		s.acted = false
		if !s.softOn(s.m.catProps) {
			op := s.catalogPropsOp("admin turns soft delete on", map[string]any{"updates": map[string]string{"soft-delete.enabled": "true"}}, "soft-delete.enabled", "true")
			if o, err := s.runFor(op); err != nil || o.Status != 200 {
				return err
			}
		}
		g1, err := s.freshTable("tg", "", nil)
		if err != nil || g1 == nil {
			return err
		}
		ns, name := g1.ns, g1.name
		if o, err := s.runFor(s.dropOp(ns, name, g1, admin, false)); err != nil || o.Status != 204 || g1.state != soft || g1.legalHold || g1.holdUnsure {
			return err // soft delete off, or a hold: not this corner's case
		}
		if o, err := s.runFor(s.createOp(ns, name, admin, "", map[string]string{"format-version": "2"})); err != nil || o.Status != 200 {
			return err
		}
		g2 := s.m.liveAt(ns, name)
		if g2 == nil {
			return s.violatef("%s.%s made again, and the model holds no live table there", ns, name)
		}
		if _, err := s.runFor(s.opAppendTo(g2, admin)); err != nil {
			return err
		}
		if o, err := s.runFor(s.dropOp(ns, name, g2, admin, false)); err != nil || o.Status != 204 || g2.state != soft || g2.legalHold || g2.holdUnsure {
			return err
		}
		s.acted = true
		path := lifecyclePath(ns, name)
		for _, r := range []struct{ verb, body string }{{"undrop", ""}, {"undrop", `{}`}, {"purge-now", `{}`}} {
			var body any
			if r.body != "" {
				body = r.body
			}
			o := s.w.call(s.ctx, admin, "POST", path+"/"+r.verb, body)
			if o.Status != 409 || !strings.Contains(string(o.Body), g1.uuid) || !strings.Contains(string(o.Body), g2.uuid) {
				return s.violatef("%s.%s has two soft-deleted generations (%s, %s); a %s naming neither (body %q): %s, want 409 naming both", ns, name, short(g1.uuid), short(g2.uuid), r.verb, r.body, o)
			}
		}
		for _, g := range []*Gen{g1, g2} {
			if _, err := s.softRecordOf(g); err != nil {
				return err
			}
		}
		// The older one comes back by its uuid, renamed into another
		// namespace (when the model holds one).
		toNS, toName := ns, name+"r"
		if others := slices.DeleteFunc(slices.Sorted(maps.Keys(s.m.namespaces)), func(n string) bool { return n == ns }); len(others) > 0 {
			toNS = pick(s, others)
		}
		o := s.w.call(s.ctx, admin, "POST", path+"/undrop", map[string]any{"table-uuid": g1.uuid, "rename-to": map[string]any{"namespace": []string{toNS}, "name": toName}})
		if o.Status != 200 {
			return s.violatef("%s.%s: undrop of the older generation %s by its uuid to %s.%s: %s, want 200", ns, name, short(g1.uuid), toNS, toName, o)
		}
		if err := s.undropTo(ns, name, toNS, toName)(o, false); err != nil {
			return err
		}
		if g1.state != live || g2.state != soft {
			return s.violatef("%s.%s: the undrop naming %s brought back %s", ns, name, short(g1.uuid), trunc(string(o.Body), 200))
		}
		if o, err := s.runFor(s.purgeNowBy(g2, admin)); err != nil || o.Status != 202 {
			return err
		}
		if _, err := s.drainTo(g2, "SUCCEEDED", "the newer generation, purged now by its uuid"); err != nil {
			return err
		}
		s.logf("   %s.%s: the older generation undropped by its uuid, the newer purged", ns, name)
		return s.checkRows(g1, "undropped beside a newer generation")
	}}
}
