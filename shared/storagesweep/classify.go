package storagesweep

import (
	"math"
	"slices"
	"strings"

	"github.com/icehold/icehold/shared/store"
)

// The classes of the objects a report lists (SPEC §3), as a sweep counts
// them (objects and bytes each).
const (
	// ClassReachable: a file a retained snapshot of its table reaches, or
	// a metadata file: kept.
	ClassReachable = "reachable"
	// ClassRecent: no snapshot reaches it, but it is younger than the
	// orphan window (an engine may still commit it): kept.
	ClassRecent = "recent"
	// ClassOrphan: owned by a table, reached by no snapshot, older than
	// the orphan window: deleted, every version of it.
	ClassOrphan = "orphan"
	// ClassNoncurrentExpired: a version replaced (or deleted) longer ago
	// than the version window: deleted.
	ClassNoncurrentExpired = "noncurrent-expired"
	// ClassNoncurrentKept: a version replaced within the window, kept for
	// repair.
	ClassNoncurrentKept = "noncurrent-kept"
	// ClassUnowned: under no table's claim: reported, never deleted.
	ClassUnowned = "unowned"
	// ClassProtected: of a table that is legal-held, soft-deleted, being
	// purged, forgotten (unregistered), has a job in flight or whose
	// metadata could not be read: never deleted.
	ClassProtected = "protected"
)

// Classes are the classes in the order the API shows them.
var Classes = []string{ClassReachable, ClassRecent, ClassOrphan, ClassNoncurrentExpired, ClassNoncurrentKept, ClassUnowned, ClassProtected}

// deleted reports whether a class's objects are deleted.
func deleted(class string) bool { return class == ClassOrphan || class == ClassNoncurrentExpired }

// maxUnownedSamples is how many folders of unowned objects a sweep names.
const maxUnownedSamples = 10

// candidate is one version the sweep deletes, with what its delete step
// checks again.
type candidate struct {
	key, version string
	size         int64
	owner        string // the claim that covers it
	metadata     string // its table's metadata file, as the sweep read it
	noncurrent   bool
}

// judge classifies the versions of each key of one join step.
type judge struct {
	owners *ownerIndex
	tables map[string]*store.SweepTable // by claim id
	// reached: the hashes of every key a table reaches, sorted.
	reached []uint64
	// orphanBefore, versionBefore: Unix ms bounds of the windows.
	orphanBefore, versionBefore int64
	// only, when set, is the table a sweep of one table covers.
	only *store.SweepTable
	// scope: the key prefix (with its '/') the sweep covers ("": all).
	scope   string
	counts  map[string]int64
	unowned []string
	emit    func(candidate)
}

func (j *judge) count(class string, rows []Row) {
	for _, r := range rows {
		j.counts[class]++
		j.counts[class+"-bytes"] += r.Size
	}
}

// key classifies every version of one key (newest first: the latest
// version, then the ones it replaced).
func (j *judge) key(rows []Row) {
	key := rows[0].Key
	if !strings.HasPrefix(key, j.scope) {
		return
	}
	o, owned := j.owners.of(key)
	if j.only != nil {
		if !owned || o.Catalog != j.only.Catalog || o.Name != j.only.Name || !slices.Equal(o.Namespace, j.only.Namespace) {
			return
		}
	}
	if !owned || o.Kind == store.OwnerWarehouse {
		j.count(ClassUnowned, rows)
		dir := key[:max(strings.LastIndexByte(key, '/'), 0)]
		if len(j.unowned) < maxUnownedSamples && !slices.Contains(j.unowned, dir) {
			j.unowned = append(j.unowned, dir)
		}
		return
	}
	t := j.tables[o.ID]
	if t == nil || t.Protected != "" || o.SoftDeleted || o.JobID != "" || o.Unregistered {
		// A claim the sweep did not read the table of (taken since) is
		// kept like a held one: its reachable files are unknown.
		j.count(ClassProtected, rows)
		return
	}
	_, reached := slices.BinarySearch(j.reached, hashOf(key))
	reached = reached || isMetadataFile(key)
	orphan := false
	for i, r := range rows {
		class := ""
		switch {
		case i == 0 && r.Latest && !r.Marker:
			switch {
			case reached:
				class = ClassReachable
			case r.Modified >= j.orphanBefore:
				class = ClassRecent
			default:
				class, orphan = ClassOrphan, true
			}
		case orphan:
			class = ClassOrphan // an orphan goes with every version of it
		case r.Latest:
			// A delete marker that is the key's newest version: alone,
			// past the window, it goes; with older versions it stays
			// until they have gone (removing it first would make the one
			// before it current again).
			class = ClassNoncurrentKept
			if len(rows) == 1 && r.Modified < j.versionBefore {
				class = ClassNoncurrentExpired
			}
		default:
			// Noncurrent since the next newer version was written: the
			// first write after its own, since versions of one instant
			// (an overwrite and a repair's copy back) have no order in a
			// report (docs/design/storagesweep.md).
			since := noncurrentSince(rows, r.Modified)
			class = ClassNoncurrentKept
			if since < j.versionBefore {
				class = ClassNoncurrentExpired
			}
		}
		j.counts[class]++
		j.counts[class+"-bytes"] += r.Size
		if deleted(class) {
			j.emit(candidate{key: key, version: r.Version, size: r.Size, owner: o.ID, metadata: t.Metadata, noncurrent: class != ClassOrphan})
		}
	}
}

// each calls fn with the versions of each key of sorted rows.
// noncurrentSince: the earliest time after modified that one of a key's
// versions was written (modified itself when none was: every newer
// version was written in that instant).
func noncurrentSince(rows []Row, modified int64) int64 {
	since := int64(math.MaxInt64)
	for _, o := range rows {
		if o.Modified > modified {
			since = min(since, o.Modified)
		}
	}
	if since == math.MaxInt64 {
		return modified
	}
	return since
}

func each(rows []Row, fn func([]Row)) {
	for start := 0; start < len(rows); {
		end := start + 1
		for end < len(rows) && rows[end].Key == rows[start].Key {
			end++
		}
		fn(rows[start:end])
		start = end
	}
}
