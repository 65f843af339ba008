package storagesweep

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/icehold/icehold/shared/store"
)

// Each version a report lists lands in exactly one class, and only the
// orphans and the expired noncurrent versions of tables whose files may
// go become deletions (SPEC §3).
func TestClassification(t *testing.T) {
	report := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	day := func(d float64) int64 { return report.Add(-time.Duration(d * float64(24*time.Hour))).UnixMilli() }
	cur := func(key string, age float64) Row {
		return Row{Key: key, Version: "v" + key, Latest: true, Size: 10, Modified: day(age)}
	}
	old := func(key, v string, age float64) Row { return Row{Key: key, Version: v, Size: 3, Modified: day(age)} }
	marker := func(key, v string, latest bool, age float64) Row {
		return Row{Key: key, Version: v, Latest: latest, Marker: true, Modified: day(age)}
	}
	claims := []store.Claimed{
		{Prefix: "wh", Owner: store.Owner{ID: "w", Kind: store.OwnerWarehouse, Catalog: "c"}},
		{Prefix: "wh/live", Owner: store.Owner{ID: "live", Kind: store.OwnerTable, Catalog: "c", Namespace: []string{"n"}, Name: "live"}},
		{Prefix: "wh/moved", Owner: store.Owner{ID: "live-old", Kind: store.OwnerTable, Catalog: "c", Namespace: []string{"n"}, Name: "live"}},
		{Prefix: "wh/held", Owner: store.Owner{ID: "held", Kind: store.OwnerTable, Catalog: "c", Namespace: []string{"n"}, Name: "held"}},
		{Prefix: "wh/soft", Owner: store.Owner{ID: "soft", Kind: store.OwnerTable, Catalog: "c", Namespace: []string{"n"}, Name: "soft", SoftDeleted: true}},
		{Prefix: "wh/purging", Owner: store.Owner{ID: "purging", Kind: store.OwnerTable, Catalog: "c", Namespace: []string{"n"}, Name: "p", JobID: "pj-1"}},
		{Prefix: "wh/new", Owner: store.Owner{ID: "new", Kind: store.OwnerTable, Catalog: "c", Namespace: []string{"n"}, Name: "new"}},
	}
	live := &store.SweepTable{Catalog: "c", Namespace: []string{"n"}, Name: "live", Holds: []string{"live", "live-old"}, Metadata: "s3://b/wh/live/metadata/00003-m.metadata.json"}
	tables := map[string]*store.SweepTable{
		"live": live, "live-old": live,
		"held": {Catalog: "c", Namespace: []string{"n"}, Name: "held", Holds: []string{"held"}, Protected: protectLegalHold},
		"soft": {Catalog: "c", Namespace: []string{"n"}, Name: "soft", Holds: []string{"soft"}, Protected: protectSoftDeleted},
	}
	rows := []Row{
		cur("wh/live/data/committed.parquet", 30),                       // reachable
		cur("wh/moved/data/committed.parquet", 30),                      // reachable, under an old location
		cur("wh/live/metadata/00001-a.metadata.json", 30),               // a metadata file: kept
		cur("wh/live/data/young.parquet", 2),                            // recent
		cur("wh/live/data/old.parquet", 4),                              // orphan
		cur("wh/moved/data/old.parquet", 4),                             // orphan
		cur("wh/live/data/rewritten.parquet", 1),                        // reachable, its old versions:
		old("wh/live/data/rewritten.parquet", "r2", 10),                 // replaced 1 day ago: kept
		old("wh/live/data/rewritten.parquet", "r1", 20),                 // replaced 10 days ago: expired
		cur("wh/live/data/old-rewritten.parquet", 4),                    // orphan, and so every version
		old("wh/live/data/old-rewritten.parquet", "o1", 5),              //  of it
		marker("wh/live/data/deleted.parquet", "d2", true, 8),           // a marker with a version: kept
		old("wh/live/data/deleted.parquet", "d1", 30),                   // replaced 8 days ago: expired
		marker("wh/live/data/marker-alone", "m1", true, 8),              // alone, past the window: goes
		marker("wh/live/data/marker-young", "m2", true, 1),              // alone, young: kept
		cur("wh/held/data/old.parquet", 40), old("wh/held/x", "h1", 40), // legal hold
		cur("wh/soft/data/old.parquet", 40),                 // soft-deleted
		cur("wh/purging/data/old.parquet", 40),              // being purged
		cur("wh/new/data/old.parquet", 40),                  // claimed after the sweep read its tables
		cur("wh/stray/file", 40), cur("wh/stray/file2", 40), // the warehouse's, no table's
		cur("elsewhere/file", 40),              // outside the scope: not counted
		cur("wh/livestock/data/x.parquet", 40), // "wh/live" is no prefix of it
	}
	reached := []uint64{hashOf("wh/live/data/committed.parquet"), hashOf("wh/moved/data/committed.parquet"), hashOf("wh/live/data/rewritten.parquet")}
	slices.Sort(reached)
	sortRows(rows)
	var got []string
	jd := &judge{
		owners: newOwnerIndex(claims), tables: tables, reached: reached, scope: "wh/",
		orphanBefore: report.Add(-3 * 24 * time.Hour).UnixMilli(), versionBefore: report.Add(-7 * 24 * time.Hour).UnixMilli(),
		counts: map[string]int64{},
		emit: func(c candidate) {
			got = append(got, fmt.Sprintf("%s@%s noncurrent=%v owner=%s", c.key, c.version, c.noncurrent, c.owner))
		},
	}
	each(rows, jd.key)
	want := []string{
		"wh/live/data/deleted.parquet@d1 noncurrent=true owner=live",
		"wh/live/data/marker-alone@m1 noncurrent=true owner=live",
		"wh/live/data/old-rewritten.parquet@o1 noncurrent=false owner=live",
		"wh/live/data/old-rewritten.parquet@vwh/live/data/old-rewritten.parquet noncurrent=false owner=live",
		"wh/live/data/old.parquet@vwh/live/data/old.parquet noncurrent=false owner=live",
		"wh/live/data/rewritten.parquet@r1 noncurrent=true owner=live",
		"wh/moved/data/old.parquet@vwh/moved/data/old.parquet noncurrent=false owner=live-old",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("deletions:\n got %q\nwant %q", got, want)
	}
	wantCounts := map[string]int64{
		ClassReachable: 4, ClassRecent: 1, ClassOrphan: 4, ClassNoncurrentExpired: 3, ClassNoncurrentKept: 3,
		ClassUnowned: 3, ClassProtected: 5,
	}
	for _, c := range Classes {
		if jd.counts[c] != wantCounts[c] {
			t.Errorf("%s: %d objects, want %d", c, jd.counts[c], wantCounts[c])
		}
	}
	if jd.counts[ClassOrphan+"-bytes"] != 33 {
		t.Errorf("orphan bytes %d, want 33", jd.counts[ClassOrphan+"-bytes"])
	}
	if !slices.Equal(jd.unowned, []string{"wh/livestock/data", "wh/stray"}) {
		t.Errorf("unowned samples %q", jd.unowned)
	}

	// A sweep of one table counts and deletes that table's files only.
	got, jd.counts, jd.unowned = nil, map[string]int64{}, nil
	jd.only = &store.SweepTable{Catalog: "c", Namespace: []string{"n"}, Name: "held"}
	each(rows, jd.key)
	if len(got) != 0 || jd.counts[ClassProtected] != 2 || jd.counts[ClassUnowned] != 0 || jd.counts[ClassReachable] != 0 {
		t.Fatalf("sweep of table held: deletions %q, counts %v", got, jd.counts)
	}
}

// Versions written in one instant (an overwrite and the repair's copy
// back; a report's times are no finer than S3's) cannot be ordered by
// the report: the report lists no sequence and version ids are opaque.
// A noncurrent version is judged noncurrent only since the first write
// after its own, so none goes while the version window may still hold
// it, whichever way the tie is listed (soak seed 1049 step 242: the
// repair's copy of the file, replaced a moment before the sweep, was
// taken as replaced 32 days before).
func TestNoncurrentVersionsOfOneInstantStayTheirWindow(t *testing.T) {
	report := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	day := func(d float64) int64 { return report.Add(-time.Duration(d * float64(24*time.Hour))).UnixMilli() }
	const key = "wh/live/data/f.parquet"
	for _, ids := range [][2]string{{"a-copy", "z-overwrite"}, {"z-copy", "a-overwrite"}} {
		t.Run(ids[0], func(t *testing.T) {
			rows := []Row{
				{Key: key, Version: "latest-copy", Latest: true, Modified: day(0)},
				{Key: key, Version: "second-overwrite", Modified: day(0)},
				{Key: key, Version: ids[0], Modified: day(32)}, // replaced now
				{Key: key, Version: ids[1], Modified: day(32)}, // replaced 32 days ago
				{Key: key, Version: "original", Modified: day(60)},
			}
			sortRows(rows)
			var got []string
			jd := &judge{
				owners:  newOwnerIndex([]store.Claimed{{Prefix: "wh/live", Owner: store.Owner{ID: "live", Kind: store.OwnerTable, Catalog: "c", Namespace: []string{"n"}, Name: "live"}}}),
				tables:  map[string]*store.SweepTable{"live": {Catalog: "c", Namespace: []string{"n"}, Name: "live", Holds: []string{"live"}}},
				reached: []uint64{hashOf(key)}, scope: "wh/",
				orphanBefore: report.Add(-3 * 24 * time.Hour).UnixMilli(), versionBefore: report.Add(-7 * 24 * time.Hour).UnixMilli(),
				counts: map[string]int64{},
				emit:   func(c candidate) { got = append(got, c.version) },
			}
			each(rows, jd.key)
			// Only the original is surely past the window: replaced 32 days
			// ago by one of the two written then.
			if !slices.Equal(got, []string{"original"}) {
				t.Fatalf("deleted %q, want only the original (the versions of one instant may have been replaced a moment ago)", got)
			}
		})
	}
}

// Working files keep every row and hash, section by section (a step
// writes rows or hashes, never both), with offsets that round-trip.
func TestWorkingFilesRoundTrip(t *testing.T) {
	type file struct {
		body    []byte
		offsets []int64
		hashes  bool
	}
	var files []file
	sp := &spill{write: func(body []byte, offsets []int64, hashes bool) error {
		files = append(files, file{body, offsets, hashes})
		return nil
	}}
	var want []Row
	var wantHashes []uint64
	for i := range 5000 {
		r := Row{Key: fmt.Sprintf("wh/t%d/data/part-%05d.parquet", i%7, i), Version: fmt.Sprintf("v%d", i%3), Latest: i%3 == 0, Marker: i%11 == 0, Size: int64(i * 31), Modified: int64(1e12 + i)}
		want = append(want, r)
		wantHashes = append(wantHashes, hashOf(r.Key))
		if err := sp.addRow(r, hashOf(r.Key)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.flush(); err != nil {
		t.Fatal(err)
	}
	for _, h := range wantHashes {
		if err := sp.addHash(h); err != nil {
			t.Fatal(err)
		}
	}
	if err := sp.flush(); err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].hashes || !files[1].hashes {
		t.Fatalf("%d files", len(files))
	}
	var got []Row
	var gotHashes []uint64
	for i, f := range files {
		off, err := decodeOffsets(encodeOffsets(f.offsets))
		if err != nil || !slices.Equal(off, f.offsets) {
			t.Fatalf("offsets do not round-trip: %v", err)
		}
		for sec := range Sections {
			part := f.body[off[sec]:off[sec+1]]
			if i == 1 {
				for k := 0; k < len(part); k += 8 {
					h := binary.LittleEndian.Uint64(part[k:])
					if sectionOf(h) != sec {
						t.Fatalf("hash %x in section %d", h, sec)
					}
					gotHashes = append(gotHashes, h)
				}
				continue
			}
			n := len(got)
			if got, err = decodeRows(part, got); err != nil {
				t.Fatal(err)
			}
			for _, r := range got[n:] {
				if sectionOf(hashOf(r.Key)) != sec {
					t.Fatalf("row %s in section %d", r.Key, sec)
				}
			}
		}
	}
	sortRows(got)
	sortRows(want)
	slices.Sort(gotHashes)
	slices.Sort(wantHashes)
	if !slices.Equal(got, want) || !slices.Equal(gotHashes, wantHashes) {
		t.Fatalf("%d rows and %d hashes back, want %d (or they differ)", len(got), len(gotHashes), len(want))
	}
}
