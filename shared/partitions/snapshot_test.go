package partitions

import (
	"errors"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

func bound(t *testing.T, lit iceberg.Literal) *[]byte {
	t.Helper()
	b, err := lit.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return &b
}

// A manifest is read only when its partition summaries admit a tuple.
func TestManifestPruning(t *testing.T) {
	meta := testMeta(t)
	fields := specFields(meta, meta.PartitionSpec())
	summary := func(teamLo, teamHi int32, dayLo, dayHi iceberg.Date, nulls bool) iceberg.ManifestFile {
		return iceberg.NewManifestFile(2, "s3://b/t/metadata/m.avro", 1, 0, 1).Partitions([]iceberg.FieldSummary{
			{LowerBound: bound(t, iceberg.NewLiteral(teamLo)), UpperBound: bound(t, iceberg.NewLiteral(teamHi))},
			{ContainsNull: nulls, LowerBound: bound(t, iceberg.NewLiteral(dayLo)), UpperBound: bound(t, iceberg.NewLiteral(dayHi))},
		}).Build()
	}
	day := iceberg.Date(20711) // 2026-09-15
	for _, c := range []struct {
		name string
		m    iceberg.ManifestFile
		body string
		want bool
	}{
		{"inside both ranges", summary(40, 50, day-1, day+1, false), `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15"}]}`, true},
		{"team below", summary(43, 50, day-1, day+1, false), `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15"}]}`, false},
		{"day above", summary(40, 50, day-5, day-1, false), `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15"}]}`, false},
		{"one of two tuples", summary(40, 50, day-5, day-1, false), `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15"}, {"team_id": 41, "ts_day": "2026-09-12"}]}`, true},
		{"null without nulls", summary(40, 50, day, day, false), `{"partitions": [{"team_id": 42, "ts_day": null}]}`, false},
		{"null with nulls", summary(40, 50, day, day, true), `{"partitions": [{"team_id": 42, "ts_day": null}]}`, true},
		{"no summaries", iceberg.NewManifestFile(2, "s3://b/t/metadata/m.avro", 1, 0, 1).Build(), `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15"}]}`, true},
		{"only nulls", iceberg.NewManifestFile(2, "s3://b/t/metadata/m.avro", 1, 0, 1).Partitions([]iceberg.FieldSummary{
			{LowerBound: bound(t, iceberg.NewLiteral(int32(42))), UpperBound: bound(t, iceberg.NewLiteral(int32(42)))}, {ContainsNull: true},
		}).Build(), `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15"}]}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := ParseDropRequest([]byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			tuples, err := parseTuples(req.Partitions, fields)
			if err != nil {
				t.Fatal(err)
			}
			if got := mayMatch(c.m, fields, tuples); got != c.want {
				t.Errorf("mayMatch = %v, want %v", got, c.want)
			}
		})
	}
}

// read-snapshot-id: appends and rewrites after it are fine, a delete or an
// overwrite is a conflict, and so is a snapshot that is not an ancestor.
func TestCheckRead(t *testing.T) {
	meta := testMeta(t)
	var parent *int64
	ops := []table.Operation{table.OpAppend, table.OpAppend, table.OpDelete, table.OpAppend, table.OpReplace, table.OpAppend}
	var updates table.Updates
	for i, op := range ops {
		id := int64(i + 1)
		updates = append(updates, table.NewAddSnapshotUpdate(&table.Snapshot{
			SnapshotID: id, ParentSnapshotID: parent, SequenceNumber: id, TimestampMs: time.Now().UnixMilli() + id,
			ManifestList: "s3://b/t/metadata/snap.avro", Summary: &table.Summary{Operation: op},
		}), table.NewSetSnapshotRefUpdate(table.MainBranch, id, table.BranchRef, 0, 0, 0))
		parent = &id
	}
	meta, err := table.UpdateTableMetadata(meta, updates, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		read     int64
		conflict bool
	}{{6, false}, {4, false}, {3, false}, {2, true}, {1, true}, {99, true}} {
		err := checkRead(meta, c.read)
		if got := errors.Is(err, ErrDataRemoved); got != c.conflict {
			t.Errorf("read-snapshot-id %d: %v, conflict want %v", c.read, err, c.conflict)
		}
	}
}
