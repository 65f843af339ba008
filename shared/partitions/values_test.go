package partitions

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/catalog"
)

// The JSON single-value form of each result type parses to the value a
// manifest holds for the same partition, and is echoed back the same way.
func TestParseValueMatchesManifestValues(t *testing.T) {
	u := uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7")
	for _, c := range []struct {
		name   string
		typ    iceberg.Type
		json   string
		file   any // what iceberg-go reads from a manifest
		echo   any
		differ any // a file value that must not match
	}{
		{"day", iceberg.PrimitiveTypes.Date, `"2026-09-15"`, iceberg.Date(20711), "2026-09-15", iceberg.Date(20712)},
		{"identity int", iceberg.PrimitiveTypes.Int32, `42`, int32(42), int64(42), int32(43)},
		{"identity long", iceberg.PrimitiveTypes.Int64, `-7`, int64(-7), int64(-7), int64(7)},
		{"hour", iceberg.PrimitiveTypes.Int32, `493064`, int32(493064), int64(493064), int32(1)},
		{"string", iceberg.PrimitiveTypes.String, `"M\u00fcnchen"`, "München", "München", "Munchen"},
		{"bool", iceberg.PrimitiveTypes.Bool, `true`, true, true, false},
		{"double", iceberg.PrimitiveTypes.Float64, `1.5`, float64(1.5), 1.5, float64(2.5)},
		{"float", iceberg.PrimitiveTypes.Float32, `0.1`, float32(0.1), float64(float32(0.1)), float32(0.2)},
		{"timestamp", iceberg.PrimitiveTypes.Timestamp, `"2026-09-15T10:00:00"`, iceberg.Timestamp(1789466400000000), "2026-09-15T10:00:00", iceberg.Timestamp(1)},
		{"timestamptz", iceberg.PrimitiveTypes.TimestampTz, `"2026-09-15T10:00:00+00:00"`, iceberg.Timestamp(1789466400000000), "2026-09-15T10:00:00+00:00", iceberg.Timestamp(1)},
		{"uuid", iceberg.PrimitiveTypes.UUID, `"f79c3e09-677c-4bbd-a479-3f349cb785e7"`, u, u.String(), uuid.New()},
		{"binary", iceberg.PrimitiveTypes.Binary, `"0a0b"`, []byte{10, 11}, "0a0b", []byte{10}},
		{"decimal", iceberg.DecimalTypeOf(9, 2), `"14.20"`, iceberg.DecimalLiteral(decimalOf(t, "14.20", 9, 2)), "14.20", iceberg.DecimalLiteral(decimalOf(t, "14.21", 9, 2))},
		{"null", iceberg.PrimitiveTypes.Date, `null`, nil, nil, iceberg.Date(0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := parseValue(json.RawMessage(c.json), c.typ)
			if err != nil {
				t.Fatalf("parse %s as %s: %v", c.json, c.typ, err)
			}
			f, err := normalize(c.file)
			if err != nil {
				t.Fatal(err)
			}
			if tupleKey([]norm{v}) != tupleKey([]norm{f}) {
				t.Errorf("%s parses to %#v, the manifest's %#v to %#v", c.json, v, c.file, f)
			}
			o, _ := normalize(c.differ)
			if tupleKey([]norm{v}) == tupleKey([]norm{o}) {
				t.Errorf("%s matches %#v", c.json, c.differ)
			}
			if got := formatValue(v, c.typ); got != c.echo {
				t.Errorf("echo %#v, want %#v", got, c.echo)
			}
		})
	}
}

func decimalOf(t *testing.T, s string, p, sc int) iceberg.Decimal {
	t.Helper()
	lit, err := iceberg.NewLiteral(s).To(iceberg.DecimalTypeOf(p, sc))
	if err != nil {
		t.Fatal(err)
	}
	return iceberg.Decimal(lit.(iceberg.DecimalLiteral))
}

// Wrong types, wildcards and predicates are refused.
func TestParseValueRefusesWrongShapes(t *testing.T) {
	for _, c := range []struct {
		name string
		typ  iceberg.Type
		json string
	}{
		{"string for an int", iceberg.PrimitiveTypes.Int32, `"42"`},
		{"fraction for an int", iceberg.PrimitiveTypes.Int32, `4.2`},
		{"int out of range", iceberg.PrimitiveTypes.Int32, `4294967296`},
		{"number for a day", iceberg.PrimitiveTypes.Date, `20711`},
		{"bad date", iceberg.PrimitiveTypes.Date, `"2026-13-01"`},
		{"wildcard day", iceberg.PrimitiveTypes.Date, `"*"`},
		{"wildcard string", iceberg.PrimitiveTypes.String, `"*"`},
		{"predicate", iceberg.PrimitiveTypes.Date, `{"lt": "2026-09-16"}`},
		{"list", iceberg.PrimitiveTypes.Int32, `[1, 2]`},
		{"string for a bool", iceberg.PrimitiveTypes.Bool, `"true"`},
		{"string for a double", iceberg.PrimitiveTypes.Float64, `"1.5"`},
		{"not hex", iceberg.PrimitiveTypes.Binary, `"zz"`},
		{"wrong fixed length", iceberg.FixedTypeOf(4), `"0a0b"`},
		{"decimal scale", iceberg.DecimalTypeOf(9, 2), `"14.2"`},
		{"decimal rounding", iceberg.DecimalTypeOf(9, 2), `"14.205"`},
		{"decimal exponent", iceberg.DecimalTypeOf(9, 2), `"1e3"`},
		{"timestamp with zone for timestamp", iceberg.PrimitiveTypes.Timestamp, `"2026-09-15T10:00:00+00:00"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if v, err := parseValue(json.RawMessage(c.json), c.typ); !errors.Is(err, errValue) {
				t.Errorf("%s as %s: %#v, %v; want errValue", c.json, c.typ, v, err)
			}
		})
	}
}

var testSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "team_id", Type: iceberg.PrimitiveTypes.Int32},
	iceberg.NestedField{ID: 2, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
)

var testSpec = iceberg.NewPartitionSpec(
	iceberg.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "team_id", Transform: iceberg.IdentityTransform{}},
	iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1001, Name: "ts_day", Transform: iceberg.DayTransform{}},
)

func testMeta(t *testing.T) table.Metadata {
	t.Helper()
	meta, err := table.NewMetadata(testSchema, &testSpec, table.UnsortedSortOrder, "s3://b/t", nil)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

func tuplesOf(t *testing.T, body string) ([]tuple, error) {
	t.Helper()
	meta := testMeta(t)
	req, err := ParseDropRequest([]byte(body))
	if err != nil {
		return nil, err
	}
	return parseTuples(req.Partitions, specFields(meta, meta.PartitionSpec()))
}

// Every tuple names every field of the spec and nothing else; the whole
// request is refused (400) on the first bad tuple.
func TestTuplesAgainstTheSpec(t *testing.T) {
	for _, c := range []struct {
		name, body, want string
	}{
		{"ok", `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15"}, {"team_id": 7, "ts_day": null}]}`, ""},
		{"unknown field", `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15", "region": "eu"}]}`, `"region" is not a field`},
		{"missing field", `{"partitions": [{"team_id": 42}]}`, `field "ts_day" is missing`},
		{"wrong type", `{"partitions": [{"team_id": "42", "ts_day": "2026-09-15"}]}`, `field "team_id"`},
		{"wildcard", `{"partitions": [{"team_id": 42, "ts_day": "*"}]}`, "wildcards"},
		{"empty list", `{"partitions": []}`, "partitions is empty"},
		{"no list", `{}`, "partitions is empty"},
		{"null tuple", `{"partitions": [null]}`, "is null"},
		{"repeated tuple", `{"partitions": [{"team_id": 1, "ts_day": "2026-09-15"}, {"ts_day": "2026-09-15", "team_id": 1}]}`, "repeats tuple 0"},
		{"unknown top-level field", `{"partitions": [{"team_id": 1, "ts_day": "2026-09-15"}], "read_snapshot_id": 1}`, "unknown field"},
		{"trailing data", `{"partitions": [{"team_id": 1, "ts_day": "2026-09-15"}]} {}`, "trailing data"},
		{"predicate", `{"partitions": [{"team_id": 1, "ts_day": {"lt": "2026-09-16"}}]}`, "not a single value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts, err := tuplesOf(t, c.body)
			if c.want == "" {
				if err != nil || len(ts) != 2 {
					t.Fatalf("%d tuples, %v", len(ts), err)
				}
				return
			}
			if !errors.Is(err, catalog.ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want a bad request saying %q", err, c.want)
			}
		})
	}
}

// The receipt's fingerprint does not see key order, white space or the
// order of the tuples; it sees their values.
func TestCanonicalPayload(t *testing.T) {
	a := `{"partitions": [{"team_id": 42, "ts_day": "2026-09-15"}, {"team_id": 7, "ts_day": "2026-09-14"}], "expected-table-uuid": "u"}`
	b := `{"expected-table-uuid":"u","partitions":[{"ts_day":"2026-09-14","team_id":7},{"ts_day":"2026-09-15","team_id":42}]}`
	c := `{"partitions": [{"team_id": 42, "ts_day": "2026-09-16"}, {"team_id": 7, "ts_day": "2026-09-14"}], "expected-table-uuid": "u"}`
	if string(CanonicalPayload([]byte(a))) != string(CanonicalPayload([]byte(b))) {
		t.Errorf("same request, two canonical forms:\n%s\n%s", CanonicalPayload([]byte(a)), CanonicalPayload([]byte(b)))
	}
	if string(CanonicalPayload([]byte(a))) == string(CanonicalPayload([]byte(c))) {
		t.Errorf("another tuple, same canonical form")
	}
	if bad := []byte(`{"partitions": `); string(CanonicalPayload(bad)) != string(bad) {
		t.Errorf("an unparsable body is fingerprinted as is")
	}
}
