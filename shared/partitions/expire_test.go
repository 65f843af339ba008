package partitions

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// metadataWith builds v2 metadata with snapshots 1..n on main (one a day,
// snapshot i at day i), extra refs and table properties.
func metadataWith(t *testing.T, n int, refs, props string) table.Metadata {
	t.Helper()
	var snaps []string
	for i := 1; i <= n; i++ {
		parent := ""
		if i > 1 {
			parent = fmt.Sprintf(`"parent-snapshot-id": %d,`, i-1)
		}
		snaps = append(snaps, fmt.Sprintf(`{"snapshot-id": %d, %s "sequence-number": %d, "timestamp-ms": %d, "manifest-list": "s3://b/t/metadata/snap-%d.avro", "summary": {"operation": "append"}, "schema-id": 0}`,
			i, parent, i, int64(i)*86_400_000, i))
	}
	raw := fmt.Sprintf(`{"format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": "s3://b/t",
		"last-sequence-number": %d, "last-updated-ms": %d, "last-column-id": 1, "current-schema-id": 0,
		"schemas": [{"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "x", "type": "long", "required": false}]}],
		"default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], "last-partition-id": 999,
		"default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
		"properties": {%s}, "current-snapshot-id": %d, "snapshots": [%s],
		"refs": {"main": {"snapshot-id": %d, "type": "branch"}%s}}`,
		n, int64(n)*86_400_000, props, n, strings.Join(snaps, ","), n, refs)
	meta, err := table.ParseMetadataBytes([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// Iceberg's retention rules on the sweep's clock (day 10 of the metadata's
// timeline): what each setting keeps.
func TestSelectExpiredFollowsTheRetentionProperties(t *testing.T) {
	day := func(d int) time.Time { return time.UnixMilli(int64(d) * 86_400_000) }
	for _, c := range []struct {
		name, refs, props string
		at                time.Time
		snapshots         []int64
		removedRefs       []string
	}{
		{name: "defaults: five days, one snapshot", at: day(10), snapshots: []int64{1, 2, 3, 4}},
		{name: "all young", at: day(6), snapshots: nil},
		{name: "max age one day", props: `"history.expire.max-snapshot-age-ms": "86400000"`, at: day(10), snapshots: []int64{1, 2, 3, 4, 5, 6, 7, 8}},
		{name: "min snapshots to keep beats the age", props: `"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "3"`, at: day(10), snapshots: []int64{1, 2, 3, 4, 5, 6, 7}},
		{name: "a tag keeps its snapshot", refs: `, "v1": {"snapshot-id": 2, "type": "tag"}`, at: day(10), snapshots: []int64{1, 3, 4}},
		{name: "a branch keeps its own ancestors by its own settings",
			refs: `, "b": {"snapshot-id": 3, "type": "branch", "min-snapshots-to-keep": 2, "max-snapshot-age-ms": 1}`, at: day(10), snapshots: []int64{1, 4}},
		{name: "an old ref goes with what only it kept",
			refs: `, "v1": {"snapshot-id": 2, "type": "tag", "max-ref-age-ms": 86400000}`, at: day(10), snapshots: []int64{1, 2, 3, 4}, removedRefs: []string{"v1"}},
		{name: "main never goes", props: `"history.expire.max-ref-age-ms": "1"`, at: day(10), snapshots: []int64{1, 2, 3, 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := selectExpired(metadataWith(t, 10, c.refs, c.props), c.at)
			slices.Sort(got.snapshots)
			if !slices.Equal(got.snapshots, c.snapshots) || !slices.Equal(got.refs, c.removedRefs) {
				t.Errorf("expired %v, refs removed %v; want %v, %v", got.snapshots, got.refs, c.snapshots, c.removedRefs)
			}
		})
	}
}
