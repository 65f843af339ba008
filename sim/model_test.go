package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/objects"
)

// The model: what the simulation knows from its own operations, not from
// the implementation. Tables are generations (one per table uuid and
// registration); each knows its last metadata file (its commits' answers),
// the rows it was given, and the lifecycle state its operations asked for.

type state int

const (
	live         state = iota // an active table
	soft                      // soft-deleted, until purgeAt unless legal-held
	purging                   // its permanent delete (with purge) was accepted
	released                  // ended without purge: its files stay, owned by nobody
	gone                      // its purge SUCCEEDED
	unregistered              // forgotten: its files stay, its claims with a record of it
)

func (s state) String() string {
	return [...]string{"live", "soft", "purging", "released", "gone", "unregistered"}[s]
}

// Gen is one table generation.
// take: a location a generation took, and when (the model's count).
type take struct {
	loc string
	at  int
}

// moveTo: g takes loc (a set-location, a register with overwrite).
func (m *Model) moveTo(g *Gen, loc string) {
	if !slices.Contains(g.oldLocs, g.location) {
		g.oldLocs = append(g.oldLocs, g.location)
	}
	g.location = loc
	m.nextID++
	g.takes = append(g.takes, take{loc, m.nextID})
}

type Gen struct {
	id       int // the model's own number (trace: g3)
	uuid     string
	ns       string // one level
	name     string
	location string // the table location its metadata names
	// oldLocs: locations it had before a set-location.
	oldLocs []string
	// takes: each location it took, with the model's count when it took it
	// (its creation, each move).
	takes []take
	state state
	meta  string // latest metadata file known
	metas []string
	// rows the table holds (id → day), and rows it may or may not hold
	// after a round whose order the model cannot know.
	rows  map[int64]string
	maybe map[int64]string
	// ever: every row a version of it may have held (a register of one of
	// its older metadata files brings back rows it deleted since).
	ever map[int64]string
	// legalHold as the model's accepted operations left it; holdUnsure:
	// the record's hold was cleared but the metadata it was undropped with
	// still sets the property (either may be what the table has now).
	legalHold, holdUnsure bool
	// holdProp: the table's soft-delete.hold-period property.
	holdProp string
	// Soft: when the drop happened and when the model says it may go, and
	// whether its expiry purges (the catalog's setting at the drop; unsure
	// when the drop raced a change of it).
	droppedAt, purgeAt       time.Time
	purgeOnExpiry, poeUnsure bool
	// purging: the job that deletes it and the keys under its location
	// when its permanent delete was accepted.
	job       string
	before    map[string]bool
	purgeMeta string // its metadata when the purge was accepted
	// contendedPurge: another op of the round touched it (its counters
	// may include what that op wrote).
	contendedPurge bool
	// expiring: an expire job of the table (a retention sweep's, a
	// snapshot removal's) was still running when the purge was accepted:
	// what it deletes under the prefix the purge does not count.
	expiring bool
	// retention policy set on it ("" none): the field's keep.
	keep string
	// forged: registered from metadata the simulation wrote itself.
	forged bool
	// bulk: it holds a bulk commit's 1,010 files (its rows go unscanned).
	bulk bool
	// mayRelease: its drop raced a change of soft-delete.enabled (either
	// a soft drop or a hard one).
	mayRelease bool
	// everSoft: it was soft-deleted at least once (its events say so);
	// softBefore: whether it was before its last soft drop (a drop that
	// turns out hard takes it back).
	everSoft, softBefore bool
	// recovered: a register took it back from its PENDING purge (its drop
	// with purge was announced, TablePermanentlyDeleted, at the drop).
	recovered bool
	// minKeep: its history.expire.min-snapshots-to-keep (0: the default).
	minKeep int
	// h: what its snapshots reached, by the model's own record
	// (history_test.go).
	h *history
	// heldKeep: the files its retained snapshots reached while it was
	// legal-held (storage_checks_test.go).
	heldKeep map[string]bool
}

func (g *Gen) ident() string { return g.ns + "." + g.name }

func (g *Gen) String() string {
	return fmt.Sprintf("g%d(%s %s %s)", g.id, g.ident(), short(g.uuid), g.state)
}

func short(uuid string) string {
	if len(uuid) > 8 {
		return uuid[:8]
	}
	return uuid
}

// Model is the simulation's view of the catalog.
type Model struct {
	gens       []*Gen
	namespaces map[string]map[string]string // namespace → its properties
	catProps   map[string]string            // the catalog's lifecycle properties
	legalPriv  bool                         // the build knows TABLE_LEGAL_HOLD
	nextID     int
	nextRow    int64
	forged     []string            // metadata files the simulation forged
	policies   map[string]policy   // retention policies by identifier
	grants     map[string][]string // principal → privileges (admins hold all)
	views      map[string]*View    // by view uuid (views_test.go)
	// abandoned: metadata files a register with overwrite left behind.
	abandoned map[string]bool
	// strays: objects engines wrote under a table no longer live.
	strays map[string]bool
	// purgedApart: uuids of tables a barrier made and purged itself (no
	// generation of the model's).
	purgedApart map[string]bool
	// undropped: per table uuid, the identifiers accepted undrops restored
	// it under (what its TableUndropped events must name).
	undropped map[string]map[string]bool
	// holdChanges: per table uuid, the legal hold values of the record's
	// changes accepted (what its LegalHoldChanged events must say);
	// holdInexact: uuids a change of which the model cannot place (a
	// fault cut its answer off, a round or barrier raced it).
	holdChanges map[string]map[bool]int
	holdInexact map[string]bool
	nextSession int
	nextTmpl    int
	tmplRuns    int // templates started (their instances' numbers)
	nestedRuns  int // nested-sibling-purge runs
}

func newModel(legalPriv bool) *Model {
	grants := map[string][]string{writer: writerPrivileges, holder: holderPrivileges, reader: readerPrivileges}
	if !legalPriv {
		grants[holder] = holderPrivileges[1:]
	}
	return &Model{grants: grants, namespaces: map[string]map[string]string{}, policies: map[string]policy{}, catProps: map[string]string{"soft-delete.enabled": "true"}, legalPriv: legalPriv, views: map[string]*View{}, abandoned: map[string]bool{}, strays: map[string]bool{}, purgedApart: map[string]bool{}, undropped: map[string]map[string]bool{}, holdChanges: map[string]map[bool]int{}, holdInexact: map[string]bool{}}
}

// heldChange records the answer to a change of g's record's legal hold to
// on: an accepted change of the value the model knew is one event; one
// the model cannot place makes the uuid's events unjudged.
func (m *Model) heldChange(g *Gen, on bool, status int, contended bool) {
	switch {
	case g == nil:
	case status >= 500 || status == 0 || contended || g.holdUnsure:
		m.holdInexact[g.uuid] = true
	case status == 200 && g.state == soft:
		if m.holdChanges[g.uuid] == nil {
			m.holdChanges[g.uuid] = map[bool]int{}
		}
		if g.legalHold != on {
			m.holdChanges[g.uuid][on]++
		}
	}
}

func (m *Model) add(g *Gen) *Gen {
	m.nextID++
	g.id = m.nextID
	g.takes = append(g.takes, take{g.location, g.id})
	if g.rows == nil {
		g.rows = map[int64]string{}
	}
	if g.maybe == nil {
		g.maybe = map[int64]string{}
	}
	if g.ever == nil {
		g.ever = map[int64]string{}
	}
	m.gens = append(m.gens, g)
	return g
}

// active lists the generations in a state.
func (m *Model) inState(ss ...state) []*Gen {
	var out []*Gen
	for _, g := range m.gens {
		if slices.Contains(ss, g.state) {
			out = append(out, g)
		}
	}
	return out
}

// liveAt is the live generation holding an identifier, if any.
func (m *Model) liveAt(ns, name string) *Gen {
	for _, g := range m.gens {
		if g.state == live && g.ns == ns && g.name == name {
			return g
		}
	}
	return nil
}

// softAt lists the soft-deleted generations of an identifier.
func (m *Model) softAt(ns, name string) []*Gen {
	var out []*Gen
	for _, g := range m.gens {
		if g.state == soft && g.ns == ns && g.name == name {
			out = append(out, g)
		}
	}
	return out
}

// canLegalHold: whether principal may set or clear a legal hold (SPEC §2:
// only TABLE_LEGAL_HOLD; admins hold every privilege).
func (m *Model) canLegalHold(principal string) bool {
	return principal == admin || (m.legalPriv && slices.Contains(m.grants[principal], "TABLE_LEGAL_HOLD"))
}

// holdFor is the hold period the model expects a drop to fix: the table's
// property over its namespace's over the catalog's, P7D by default, each
// only when valid (an invalid one was refused where it was set).
func (m *Model) holdFor(g *Gen) time.Duration {
	for _, v := range []string{g.holdProp, m.namespaces[g.ns]["soft-delete.hold-period"], m.catProps["soft-delete.hold-period"]} {
		if d, ok := parseHold(v); ok && v != "" {
			return d
		}
	}
	return 7 * 24 * time.Hour
}

// The duration rule (SPEC §2): ISO-8601 weeks, days, hours, minutes and
// seconds (P2W, P1DT12H, PT30M) or the short form 7d / 36h / 90m, at most
// 100 years, positive. The model's own parser, in big integers of seconds
// so that no value wraps.
var (
	shortDur = regexp.MustCompile(`^(\d+)([dhm])$`)
	isoDur   = regexp.MustCompile(`^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$`)
)

const maxHold = 100 * 365 * 24 * time.Hour

// durationVerdict: valid (with its value), invalid, or unsure (within a day
// of the bound, where "100 years" may be counted either way).
type verdict int

const (
	valid verdict = iota
	invalid
	unsure
)

func judgeDuration(s string) (time.Duration, verdict) {
	secs, ok := durationSeconds(s)
	if !ok || secs <= 0 {
		return 0, invalid
	}
	bound := int64(maxHold / time.Second)
	const slack = 30 * 24 * 3600 // 100 years of 365 or 365.25 days, leap days
	switch {
	case secs > bound+slack:
		return 0, invalid
	case secs >= bound-slack:
		return time.Duration(secs) * time.Second, unsure
	}
	return time.Duration(secs) * time.Second, valid
}

func parseHold(s string) (time.Duration, bool) {
	d, v := judgeDuration(s)
	return d, v == valid
}

func durationSeconds(s string) (int64, bool) {
	const big = int64(1) << 50
	num := func(t string) (int64, bool) {
		if t == "" {
			return 0, true
		}
		if len(t) > 15 {
			return big, true
		}
		n, err := strconv.ParseInt(t, 10, 64)
		return n, err == nil
	}
	if m := shortDur.FindStringSubmatch(s); m != nil {
		n, ok := num(m[1])
		unit := map[string]int64{"d": 86400, "h": 3600, "m": 60}[m[2]]
		if !ok || n > big/unit {
			return big, ok
		}
		return n * unit, true
	}
	m := isoDur.FindStringSubmatch(s)
	if m == nil || s == "P" || strings.HasSuffix(s, "T") {
		return 0, false
	}
	var total int64
	for i, unit := range []int64{7 * 86400, 86400, 3600, 60, 1} {
		n, ok := num(m[i+1])
		if !ok {
			return 0, false
		}
		if n > big/unit {
			return big, true
		}
		total += n * unit
	}
	return min(total, big), true
}

// --- reachability: what a metadata file reaches, read with iceberg-go ---

// reach is what a metadata file reaches, read with iceberg-go: every
// metadata file of its log, manifest lists, manifests, data and delete
// files of every retained snapshot, statistics files; per snapshot, what
// it reads; its refs; and what a purge of it deletes and counts (planned).
type reach struct {
	keys     map[string]bool
	location string
	snaps    []int64
	current  int64
	props    map[string]string
	// refs: name → snapshot and type ("branch" or "tag").
	refs map[string]refInfo
	// snapFiles: per snapshot, its manifest list, manifests and live data
	// and delete files; snapTS its timestamp (ms).
	snapFiles map[int64]map[string]bool
	snapTS    map[int64]int64
	// snapParent: each snapshot's parent (absent: none); snapOp its
	// summary's operation (append, overwrite, delete, replace).
	snapParent map[int64]int64
	snapOp     map[int64]string
	// sizes: data and delete files' file_size_in_bytes, manifests' length.
	sizes map[string]int64
	// planned: what a purge of this metadata deletes and counts (the
	// metadata layer, every data and delete file an ADDED entry of a
	// retained manifest names, and the current snapshot's files carried
	// over from expired snapshots); the rest under its prefix is the
	// final listing's (unreferenced).
	planned map[string]bool
	// named: every data and delete file an entry of a retained manifest
	// names, whatever its status (a DELETED entry too: the storage sweep
	// keeps what any entry names).
	named map[string]bool
	// gone: manifest lists or manifests it names that were missing.
	gone bool
}

type refInfo struct {
	snapshot  int64
	kind      string
	maxRefAge *int64
	// A branch's own retention (nil: the table's): its max snapshot age
	// and how many newest ancestors it keeps.
	maxSnapAge *int64
	minKeep    *int
}

// retention says a ref's own retention settings, for a violation.
func (r refInfo) retention() string {
	f := func(p *int64) string {
		if p == nil {
			return "unset"
		}
		return fmt.Sprint(*p)
	}
	mk := "unset"
	if r.minKeep != nil {
		mk = fmt.Sprint(*r.minKeep)
	}
	return fmt.Sprintf("max-ref-age-ms %s, max-snapshot-age-ms %s, min-snapshots-to-keep %s", f(r.maxRefAge), f(r.maxSnapAge), mk)
}

type reacher struct {
	mu    sync.Mutex
	cache map[string]*reach
}

func keyOf(path string) (string, bool) {
	l, err := objects.Parse(path)
	if err != nil || l.Bucket != bucket {
		return "", false
	}
	return l.Key, true
}

// of reads what meta reaches (metadata files never change: cached).
func (r *reacher) of(ctx context.Context, props map[string]string, meta string) (*reach, error) {
	r.mu.Lock()
	if c, ok := r.cache[meta]; ok {
		r.mu.Unlock()
		return c, nil
	}
	r.mu.Unlock()
	fs, err := icebergio.LoadFS(ctx, props, meta)
	if err != nil {
		return nil, err
	}
	f, err := fs.Open(meta)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", meta, err)
	}
	raw, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	md, err := table.ParseMetadataBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", meta, err)
	}
	out := &reach{keys: map[string]bool{}, location: md.Location(), props: maps.Clone(md.Properties()),
		refs: map[string]refInfo{}, snapFiles: map[int64]map[string]bool{}, snapTS: map[int64]int64{}, snapParent: map[int64]int64{},
		snapOp: map[int64]string{}, sizes: map[string]int64{}, planned: map[string]bool{}, named: map[string]bool{}}
	if cur := md.CurrentSnapshot(); cur != nil {
		out.current = cur.SnapshotID
	}
	for name, ref := range md.Refs() {
		out.refs[name] = refInfo{snapshot: ref.SnapshotID, kind: string(ref.SnapshotRefType), maxRefAge: ref.MaxRefAgeMs,
			maxSnapAge: ref.MaxSnapshotAgeMs, minKeep: ref.MinSnapshotsToKeep}
	}
	add := func(p string, set ...map[string]bool) {
		if k, ok := keyOf(p); ok {
			out.keys[k] = true
			for _, s := range set {
				s[k] = true
			}
		}
	}
	add(meta, out.planned)
	for e := range md.PreviousFiles() {
		add(e.MetadataFile, out.planned)
	}
	for s := range md.Statistics() {
		add(s.StatisticsPath, out.planned)
	}
	for s := range md.PartitionStatistics() {
		add(s.StatisticsPath, out.planned)
	}
	// Entries of every status, once per manifest (a manifest is listed by
	// many snapshots). carried: EXISTING entries of the current snapshot's
	// manifests, by adding snapshot; writers: who wrote each manifest.
	entries := map[string][]iceberg.ManifestEntry{}
	retained, wrote, inCurrent := map[int64]bool{}, map[string]int64{}, map[string]bool{}
	carried := map[int64][]string{}
	for _, sn := range md.Snapshots() {
		retained[sn.SnapshotID] = true
	}
	for _, sn := range md.Snapshots() {
		files := map[string]bool{}
		out.snaps = append(out.snaps, sn.SnapshotID)
		out.snapFiles[sn.SnapshotID], out.snapTS[sn.SnapshotID] = files, sn.TimestampMs
		if sn.ParentSnapshotID != nil {
			out.snapParent[sn.SnapshotID] = *sn.ParentSnapshotID
		}
		if sn.Summary != nil {
			out.snapOp[sn.SnapshotID] = string(sn.Summary.Operation)
		}
		add(sn.ManifestList, files, out.planned)
		mfs, err := sn.Manifests(fs)
		if errors.Is(err, iofs.ErrNotExist) {
			out.gone = true
			continue // reached but gone: the check says so (a forgery's borrowed files may be)
		}
		if err != nil {
			return nil, fmt.Errorf("manifest list of snapshot %d: %w", sn.SnapshotID, err)
		}
		for _, mf := range mfs {
			wrote[mf.FilePath()] = mf.SnapshotID()
			if sn.SnapshotID == out.current {
				inCurrent[mf.FilePath()] = true
			}
			add(mf.FilePath(), files, out.planned)
			if k, ok := keyOf(mf.FilePath()); ok {
				out.sizes[k] = mf.Length()
			}
			es, seen := entries[mf.FilePath()]
			if !seen {
				es, err = mf.FetchEntries(fs, false)
				if errors.Is(err, iofs.ErrNotExist) {
					out.gone = true
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("manifest %s: %w", mf.FilePath(), err)
				}
				entries[mf.FilePath()] = es
			}
			for _, e := range es {
				df := e.DataFile()
				k, ok := keyOf(df.FilePath())
				if !ok {
					continue
				}
				out.named[k] = true
				if e.Status() == iceberg.EntryStatusADDED {
					out.planned[k] = true
				}
				if e.Status() == iceberg.EntryStatusEXISTING && sn.SnapshotID == out.current {
					carried[e.SnapshotID()] = append(carried[e.SnapshotID()], k)
				}
				// Live entries only: a DELETED entry is the snapshot saying
				// the file is no longer part of it (expiry may delete it).
				if e.Status() != iceberg.EntryStatusDELETED {
					out.keys[k], files[k] = true, true
					out.sizes[k] = df.FileSizeBytes()
				}
			}
		}
	}
	// A purge counts what the current snapshot carries over from a
	// snapshot that expired and left no manifest behind but in the current
	// snapshot's list (that list names each live file once; a manifest
	// only an older retained snapshot lists may add it too); any other
	// entry's file is the listing's.
	writers := map[int64]bool{}
	for path, w := range wrote {
		if !inCurrent[path] {
			writers[w] = true
		}
	}
	for adder, ks := range carried {
		if !retained[adder] && !writers[adder] {
			for _, k := range ks {
				out.planned[k] = true
			}
		}
	}
	r.mu.Lock()
	r.cache[meta] = out
	r.mu.Unlock()
	return out, nil
}

// metaVersion is the version number of an icehold-written metadata file
// (<version>-<uuid>.metadata.json), -1 if the name has none.
func metaVersion(path string) int {
	base := path[strings.LastIndex(path, "/")+1:]
	v, _, ok := strings.Cut(base, "-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return -1
	}
	return n
}

var _ = iceberg.PrimitiveTypes

// held reads icehold.legal-hold as every path that sets it does (a
// boolean in any of strconv.ParseBool's spellings).
func held(v string) bool {
	on, _ := strconv.ParseBool(v)
	return on
}

// gcDisabled: a table's properties turn gc off (iceberg-go's GetBool:
// a value ParseBool reads as false; anything else keeps the default, on).
func gcDisabled(props map[string]string) bool {
	on, err := strconv.ParseBool(props["gc.enabled"])
	return err == nil && !on
}

// spelled writes a boolean as clients do: mostly true/false, sometimes
// TRUE, True, 1 or t (Spark SQL users write 'TRUE'; held-out 8: a hold
// read as exactly "true" held nothing written otherwise).
func (s *Sim) spelled(on bool) string {
	if s.chance(0.6) {
		return strconv.FormatBool(on)
	}
	if on {
		return pick(s, []string{"TRUE", "True", "1", "t"})
	}
	return pick(s, []string{"FALSE", "False", "0", "f"})
}
