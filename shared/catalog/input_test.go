package catalog

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Defect: durations wrapped time.Duration: 213504d, P30501W, 307445735m and
// 5124096h gave tiny or negative holds (a soft drop purged 26 s later).
func TestParseDurationBounds(t *testing.T) {
	day := 24 * time.Hour
	ok := []struct {
		in   string
		want time.Duration
	}{
		{"7d", 7 * day},
		{"12h", 12 * time.Hour},
		{"30m", 30 * time.Minute},
		{"P7D", 7 * day},
		{"PT12H", 12 * time.Hour},
		{"P1DT6H", 30 * time.Hour},
		{"P2W", 14 * day},
		{"PT90S", 90 * time.Second},
		{"P0D", 0},
		{"36500d", 36500 * day},
		{"P36500D", 36500 * day},
		{"P5214W", 5214 * 7 * day},
		{"PT876000H", 36500 * day},
		{"0000000000000000000000007d", 7 * day},
	}
	for _, c := range ok {
		t.Run(c.in, func(t *testing.T) {
			d, err := ParseDuration(c.in)
			if err != nil || d != c.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", c.in, d, err, c.want)
			}
		})
	}
	tooLong := []string{
		"213504d", "P30501W", "307445735m", "5124096h", // the reported ones
		"36501d", "P36501D", "P5215W", "PT876001H", "P36500DT1S", "P5214WT2000000H",
		"52560001m", "PT3153600001S",
		"99999999999999999999d", "P99999999999999999999D", "PT9223372036854775808S",
		"P1W99999999999999999D",
	}
	for _, in := range tooLong {
		t.Run(in, func(t *testing.T) {
			d, err := ParseDuration(in)
			if err == nil {
				t.Fatalf("ParseDuration(%q) = %v, want an out-of-range error", in, d)
			}
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "100 years") {
				t.Fatalf("ParseDuration(%q): %v; want a 400 naming the bound (100 years)", in, err)
			}
		})
	}
	for _, in := range []string{"", "7", "d", "-1d", "+1d", "7 days", "P", "PT", "P1DT", "1.5d", "P1.5D", "7D", "7s", "P1Y", "P1M", "\u0667d"} {
		t.Run("malformed "+in, func(t *testing.T) {
			if d, err := ParseDuration(in); err == nil || !errors.Is(err, ErrBadRequest) {
				t.Fatalf("ParseDuration(%q) = %v, %v; want a 400", in, d, err)
			}
		})
	}
}

// shapeReq is a body of the lifecycle API's kind: optional and nested
// fields, a list, a map, and raw values a later step decodes.
type shapeReq struct {
	UUID     string                       `json:"table-uuid"`
	Rename   *Ident                       `json:"rename-to"`
	Props    map[string]string            `json:"properties"`
	Tuples   []map[string]json.RawMessage `json:"partitions"`
	SpecID   *int                         `json:"spec-id"`
	Snapshot *int64                       `json:"read-snapshot-id"`
}

// The strict decoder refuses what a lenient one quietly turns into another
// request, and takes the rest as encoding/json would.
func TestDecodeStrict(t *testing.T) {
	for _, body := range []string{
		`{}`,
		` {"table-uuid":"u"} `,
		`{"rename-to":{"namespace":["a"],"name":"b"}}`,
		`{"properties":{"a":"1","b":"2"}}`,
		`{"properties":{"a":""},"partitions":[{"d":""}]}`, // map values and raw values may be empty
		`{"partitions":[{"d":"2026-01-01","n":null},{"d":"2026-01-02","n":1}]}`,
		`{"spec-id":0,"read-snapshot-id":9223372036854775807}`,
		`{"partitions":[{"a":{"x":1},"b":{"x":1}}]}`, // the same key in sibling objects
	} {
		t.Run("accepts "+body, func(t *testing.T) {
			var strict, lenient shapeReq
			if err := DecodeStrict([]byte(body), &strict); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(body), &lenient); err != nil || !reflect.DeepEqual(strict, lenient) {
				t.Fatalf("strict %+v, lenient %+v (%v)", strict, lenient, err)
			}
		})
	}
	for _, c := range []struct{ body, want string }{
		{``, "body is required"},
		{`  `, "body is required"},
		{`null`, "the body is null"},
		{`{"table_uuid":"u"}`, `unknown field "table_uuid"`},
		{`{"Table-UUID":"u"}`, `unknown field "Table-UUID"`},
		{`{"rename-to":{"namespace":["a"],"name":"b","x":1}}`, `unknown field "x" in "rename-to"`},
		{`{"table-uuid":null}`, `"table-uuid" is null`},
		{`{"table-uuid":""}`, `"table-uuid" is empty`},
		{`{"rename-to":{"namespace":["a"],"name":""}}`, `"rename-to"."name" is empty`},
		{`{"rename-to":null}`, `"rename-to" is null`},
		{`{"properties":{"a":null}}`, `"properties"."a" is null`},
		{`{"partitions":[null]}`, `"partitions"[0] is null`},
		{`{"table-uuid":"a","table-uuid":"b"}`, `key "table-uuid" appears twice in the body`},
		{`{"partitions":[{"d":1},{"d":1,"d":2}]}`, `key "d" appears twice in "partitions"[1]`},
		{`{"properties":{"a":"1","a":"1"}}`, `key "a" appears twice in "properties"`},
		{`{"rename-to":{"name":"a","namespace":[],"name":"b"}}`, `key "name" appears twice in "rename-to"`},
		{`{"table-uuid":5}`, "cannot unmarshal"},
		{`{"spec-id":1.5}`, "cannot unmarshal"},
		{`{"spec-id":99999999999999999999}`, "cannot unmarshal"},
		{`[]`, "cannot unmarshal"},
		{`{} {}`, "trailing data"},
		{`{}x`, "trailing data"},
		{`{"table-uuid":"u"`, "malformed"},
		{`{"table-uuid" "u"}`, "malformed"},
		{strings.Repeat(`{"partitions":`, 40) + `1` + strings.Repeat(`}`, 40), "deeper than"},
	} {
		t.Run("refuses "+c.body, func(t *testing.T) {
			var req shapeReq
			err := DecodeStrict([]byte(c.body), &req)
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeStrict(%s) = %v, want a 400 with %q", c.body, err, c.want)
			}
		})
	}
}

// Whatever the body, DecodeStrict does not panic, and what it accepts
// encoding/json reads the same.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{`{}`, `{"partitions":[{"d":null}]}`, `{"rename-to":{"namespace":["a"],"name":"b"}}`, `{"a":1,"a":2}`, `[{}]`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var strict, lenient shapeReq
		if DecodeStrict([]byte(body), &strict) != nil {
			return
		}
		if err := json.Unmarshal([]byte(body), &lenient); err != nil || !reflect.DeepEqual(strict, lenient) {
			t.Fatalf("%s: strict %+v, lenient %+v (%v)", body, strict, lenient, err)
		}
	})
}
