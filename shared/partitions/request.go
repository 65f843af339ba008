package partitions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/catalog"
)

// MaxTuples bounds one drop: the answer lists every tuple, and it must fit
// a Lambda answer (SPEC §1) with room to spare.
const MaxTuples = 10000

// DropRequest is the body of POST …/partitions/drop (SPEC §7).
type DropRequest struct {
	// Partitions are the tuples, each keyed by partition field name with
	// values in Iceberg's JSON single-value form.
	Partitions []map[string]json.RawMessage `json:"partitions"`
	// SpecID names the partition spec the tuples are of (default: the
	// table's current spec).
	SpecID *int `json:"spec-id,omitempty"`
	// ExpectedTableUUID: 409 when the table is another generation.
	ExpectedTableUUID string `json:"expected-table-uuid,omitempty"`
	// ReadSnapshotID: 409 when a snapshot after it removed data.
	ReadSnapshotID *int64 `json:"read-snapshot-id,omitempty"`
}

// ParseDropRequest reads a drop body with the lifecycle API's strict
// decoder (catalog.DecodeStrict: unknown fields, a key twice, in a tuple
// too, null but as a tuple's value, trailing data are a 400) and checks
// its numbers. The tuples are checked against the table's spec later, by
// Drop.
func ParseDropRequest(body []byte) (DropRequest, error) {
	var req DropRequest
	if err := catalog.DecodeStrict(body, &req); err != nil {
		return req, err
	}
	return req, req.validate()
}

func (r DropRequest) validate() error {
	if len(r.Partitions) == 0 {
		return badRequest("partitions is empty: name at least one partition tuple")
	}
	if err := catalog.CheckRange("the number of partition tuples", int64(len(r.Partitions)), 1, MaxTuples); err != nil {
		return err
	}
	if r.SpecID != nil {
		if err := catalog.CheckRange("spec-id", int64(*r.SpecID), 0, math.MaxInt32); err != nil {
			return err
		}
	}
	if r.ReadSnapshotID != nil {
		// Snapshot ids are positive longs (Java and iceberg-go mask the sign).
		if err := catalog.CheckRange("read-snapshot-id", *r.ReadSnapshotID, 0, math.MaxInt64); err != nil {
			return err
		}
	}
	return nil
}

// CanonicalPayload is the form of a drop body the idempotency receipt
// fingerprints (SPEC §5: the table and the canonical payload): key order,
// white space and the order of the tuples do not change it, so a retry
// that re-serializes the same request replays instead of being a 422.
// A body that does not parse is returned as is (it answers 400 anyway).
func CanonicalPayload(body []byte) []byte {
	req, err := ParseDropRequest(body)
	if err != nil {
		return body
	}
	tuples := make([][]byte, len(req.Partitions))
	for i, t := range req.Partitions {
		c := make(map[string]json.RawMessage, len(t))
		for k, v := range t {
			var buf bytes.Buffer
			if json.Compact(&buf, v) != nil {
				return body
			}
			c[k] = buf.Bytes()
		}
		tuples[i], _ = json.Marshal(c) // map keys sorted
	}
	slices.SortFunc(tuples, bytes.Compare)
	out, _ := json.Marshal(struct {
		Partitions     []json.RawMessage `json:"partitions"`
		SpecID         *int              `json:"spec-id"`
		ExpectedUUID   string            `json:"expected-table-uuid"`
		ReadSnapshotID *int64            `json:"read-snapshot-id"`
	}{rawAll(tuples), req.SpecID, req.ExpectedTableUUID, req.ReadSnapshotID})
	return out
}

func rawAll(bs [][]byte) []json.RawMessage {
	out := make([]json.RawMessage, len(bs))
	for i, b := range bs {
		out[i] = b
	}
	return out
}

// field is one partition field of the spec a drop names.
type field struct {
	id   int
	name string
	typ  iceberg.Type
}

// tuple is one requested tuple: its canonical values in spec order.
type tuple struct {
	values []norm
	key    string
}

// specFields resolves the spec's fields and result types (specSchema).
func specFields(meta table.Metadata, spec iceberg.PartitionSpec) []field {
	var out []field
	for _, nf := range spec.PartitionType(specSchema(meta, spec)).FieldList {
		out = append(out, field{id: nf.ID, name: nf.Name, typ: nf.Type})
	}
	return out
}

// specSchema is the schema a spec's fields resolve against: the current
// one, or the newest holding every source column when one was dropped since.
func specSchema(meta table.Metadata, spec iceberg.PartitionSpec) *iceberg.Schema {
	schema := meta.CurrentSchema()
	if schemas := meta.Schemas(); !hasSources(schema, spec) {
		for i := len(schemas) - 1; i >= 0; i-- {
			if hasSources(schemas[i], spec) {
				return schemas[i]
			}
		}
	}
	return schema
}

func hasSources(schema *iceberg.Schema, spec iceberg.PartitionSpec) bool {
	for _, f := range spec.Fields() {
		if _, ok := schema.FindTypeByID(f.SourceID()); !ok {
			return false
		}
	}
	return true
}

// parseTuples checks every tuple against the spec: each names every
// field, no other key, and values of the field's type; no tuple twice.
func parseTuples(raw []map[string]json.RawMessage, fields []field) ([]tuple, error) {
	names := make(map[string]bool, len(fields))
	for _, f := range fields {
		names[f.name] = true
	}
	seen := make(map[string]int, len(raw))
	out := make([]tuple, len(raw))
	for i, t := range raw {
		for k := range t {
			if !names[k] {
				return nil, badRequest("partition tuple %d: %q is not a field of the partition spec (fields: %s)", i, k, fieldNames(fields))
			}
		}
		values := make([]norm, len(fields))
		for j, f := range fields {
			v, ok := t[f.name]
			if !ok {
				return nil, badRequest("partition tuple %d: field %q is missing (every tuple names every field: %s)", i, f.name, fieldNames(fields))
			}
			n, err := parseValue(v, f.typ)
			if err != nil {
				return nil, fmt.Errorf("%w: partition tuple %d, field %q (%s): %v", catalog.ErrBadRequest, i, f.name, f.typ, err)
			}
			values[j] = n
		}
		key := tupleKey(values)
		if j, dup := seen[key]; dup {
			return nil, badRequest("partition tuple %d repeats tuple %d", i, j)
		}
		seen[key] = i
		out[i] = tuple{values: values, key: key}
	}
	return out, nil
}

func fieldNames(fields []field) string {
	var b bytes.Buffer
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.name)
	}
	return b.String()
}
