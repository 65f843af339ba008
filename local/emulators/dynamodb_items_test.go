package emulators

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/truora/minidyn/types"
)

// The fast items parser reads what encoding/json reads, and leaves to it
// (errSyntax) whatever it does not expect.
func TestParseItemsLine(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		fast       bool // parsed without encoding/json
	}{
		{"every attribute type", `{"table":"t","items":[{"s":{"S":"a"},"n":{"N":"-1.5e3"},"b":{"B":"AAE="},"t":{"BOOL":true},"f":{"BOOL":false},` +
			`"null":{"NULL":true},"ss":{"SS":["x","y"]},"ns":{"NS":["1","2"]},"bs":{"BS":["AAE=",""]},` +
			`"l":{"L":[{"S":"x"},{"L":[]},{"M":{"k":{"N":"1"}}}]},"m":{"M":{"inner":{"M":{}},"e":{"S":""}}}}]}` + "\n", true},
		{"escapes and unicode", `{"table":"t\"q","items":[{"k\\":{"S":"tab\tnl\n\u00e9 \ud83d\ude00 é \u003c"}},{"k":{"SS":["\"",""]}}]}`, true},
		{"no items", `{"table":"t","items":[]}`, true},
		{"other line", `{"covers":3}`, false},
		{"field order", `{"items":[],"table":"t"}`, false},
		{"whitespace", `{"table":"t","items":[ {"k":{"S":"a"}}]}`, false},
		{"unknown type", `{"table":"t","items":[{"k":{"X":"a"}}]}`, false},
		{"bad base64", `{"table":"t","items":[{"k":{"B":"!"}}]}`, false},
		{"trailing bytes", `{"table":"t","items":[]}x`, false},
		{"cut short", `{"table":"t","items":[{"k":{"S":"a`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, items, err := parseItemsLine([]byte(tc.line))
			if !tc.fast {
				if !errors.Is(err, errSyntax) {
					t.Fatalf("parsed %q: %v %v", tc.line, items, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want snapshotLine[[]map[string]*types.Item]
			if err := json.Unmarshal([]byte(tc.line), &want); err != nil {
				t.Fatal(err)
			}
			if table != want.Table || !reflect.DeepEqual(items, want.Items) {
				got, _ := json.Marshal(items)
				exp, _ := json.Marshal(want.Items)
				t.Fatalf("table %q items %s\nwant %q items %s", table, got, want.Table, exp)
			}
		})
	}
}

// itemKey is minidyn's GetKey, faster for string and number keys.
func TestItemKey(t *testing.T) {
	d, err := NewDynamoDB("")
	if err != nil {
		t.Fatal(err)
	}
	def := func(name, hashType, rangeType string) {
		attrs := `{"AttributeName":"h","AttributeType":"` + hashType + `"}`
		keys := `{"AttributeName":"h","KeyType":"HASH"}`
		if rangeType != "" {
			attrs += `,{"AttributeName":"r","AttributeType":"` + rangeType + `"}`
			keys += `,{"AttributeName":"r","KeyType":"RANGE"}`
		}
		do(t, d, "CreateTable", `{"TableName":"`+name+`","AttributeDefinitions":[`+attrs+`],"KeySchema":[`+keys+`],"BillingMode":"PAY_PER_REQUEST"}`)
	}
	def("ss", "S", "S")
	def("s", "S", "")
	def("nn", "N", "N")
	def("bs", "B", "S")
	tables := minidynTables(d.inner)
	for _, tc := range []struct{ table, item string }{
		{"ss", `{"h":{"S":"a.b"},"r":{"S":"c"},"x":{"N":"1"}}`},
		{"ss", `{"h":{"S":""},"r":{"S":""}}`},
		{"ss", `{"h":{"S":"a"}}`},               // no range key: GetKey's error
		{"ss", `{"h":{"N":"1"},"r":{"S":"c"}}`}, // wrong type: GetKey's error
		{"s", `{"h":{"S":"a"},"r":{"S":"ignored"}}`},
		{"nn", `{"h":{"N":"-1.50"},"r":{"N":"2e3"}}`},
		{"bs", `{"h":{"B":"AAE="},"r":{"S":"c"}}`}, // binary: GetKey
	} {
		t.Run(tc.table+" "+tc.item, func(t *testing.T) {
			var item map[string]*types.Item
			if err := json.Unmarshal([]byte(tc.item), &item); err != nil {
				t.Fatal(err)
			}
			tbl := tables[tc.table]
			got, gotErr := itemKey(tbl, item)
			want, wantErr := tbl.KeySchema.GetKey(tbl.AttributesDef, item)
			if got != want || (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("itemKey %q, %v; GetKey %q, %v", got, gotErr, want, wantErr)
			}
		})
	}
}
