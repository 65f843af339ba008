package emulators

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// ReturnConsumedCapacity as DynamoDB answers it (minidyn ignores it), so
// that what the SDK clients count locally is what AWS bills: `make bench`
// counts capacity from the answers, as it would against AWS. The rules are
// DynamoDB's ("DynamoDB item sizes and formats", "read and write
// operations"): an item's size is its attribute names and values (a
// number one byte per two significant digits plus one, a list or map 3
// bytes plus one a element); a read is 1 unit per 4 KB (half for an
// eventually consistent one) of the whole item, found or not (1 unit at
// least), a Query or Scan of the items it read summed before rounding; a
// write is 1 unit per KB of the larger of the item before and after (1 at
// least, even when its condition fails), twice that in a transaction
// (a ConditionCheck counted as a write of its item). A Scan or Query with a
// filter is counted on the items it answers (an undercount; icehold's
// paths filter none).

// capacityAsked reports whether a request asks for its consumed capacity.
func capacityAsked(body []byte) bool {
	var in struct{ ReturnConsumedCapacity string }
	_ = json.Unmarshal(body, &in)
	return in.ReturnConsumedCapacity == "TOTAL" || in.ReturnConsumedCapacity == "INDEXES"
}

// keyed is one item a write names: its table and key.
type keyed struct {
	table string
	key   map[string]json.RawMessage
	twice bool // a transaction's: two underlying writes
}

// writtenItems lists the items a write request touches.
func (d *DynamoDB) writtenItems(op string, body []byte) []keyed {
	type one struct {
		TableName string
		Key, Item map[string]json.RawMessage
	}
	var in struct {
		one
		TransactItems []map[string]one
		RequestItems  map[string][]struct {
			PutRequest    *struct{ Item map[string]json.RawMessage }
			DeleteRequest *struct{ Key map[string]json.RawMessage }
		}
	}
	if json.Unmarshal(body, &in) != nil {
		return nil
	}
	var out []keyed
	add := func(table string, key, item map[string]json.RawMessage, twice bool) {
		if key == nil {
			key = d.keyOf(table, item)
		}
		out = append(out, keyed{table, key, twice})
	}
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		add(in.TableName, in.Key, in.Item, false)
	case "TransactWriteItems":
		for _, ti := range in.TransactItems {
			for _, w := range ti {
				add(w.TableName, w.Key, w.Item, true)
			}
		}
	case "BatchWriteItem":
		for table, reqs := range in.RequestItems {
			for _, r := range reqs {
				switch {
				case r.PutRequest != nil:
					add(table, nil, r.PutRequest.Item, false)
				case r.DeleteRequest != nil:
					add(table, r.DeleteRequest.Key, nil, false)
				}
			}
		}
	}
	return out
}

// keyOf is an item's key attributes, by its table's key schema.
func (d *DynamoDB) keyOf(table string, item map[string]json.RawMessage) map[string]json.RawMessage {
	t := minidynTables(d.inner)[table]
	if t == nil {
		return nil
	}
	key := map[string]json.RawMessage{t.KeySchema.HashKey: item[t.KeySchema.HashKey]}
	if r := t.KeySchema.RangeKey; r != "" {
		key[r] = item[r]
	}
	return key
}

// sizeOf is the stored size of the item under key (0: none).
func (d *DynamoDB) sizeOf(table string, key map[string]json.RawMessage) int {
	body, _ := json.Marshal(map[string]any{"TableName": table, "Key": key, "ConsistentRead": true})
	rec := d.callNarrowed("GetItem", body) // the items are held under the emulator's own keys (dynamodb_narrow.go)
	if rec.Code != http.StatusOK {
		return 0
	}
	var out struct{ Item map[string]json.RawMessage }
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return itemSize(out.Item)
}

// writeSizes are the sizes of the items a write touches, as they are now.
func (d *DynamoDB) writeSizes(items []keyed) []int {
	sizes := make([]int, len(items))
	for i, it := range items {
		sizes[i] = d.sizeOf(it.table, it.key)
	}
	return sizes
}

// capacity is the request's consumed capacity by table, read and write
// units apart; before are the written items' sizes before it ran.
func (d *DynamoDB) capacity(op string, body, answer []byte, items []keyed, before []int) map[string][2]float64 {
	units := map[string][2]float64{}
	var in struct {
		TableName      string
		ConsistentRead bool
		Key            map[string]json.RawMessage
	}
	_ = json.Unmarshal(body, &in)
	read := func(table string, size int, consistent bool) {
		u := math.Max(1, math.Ceil(float64(size)/4096))
		if !consistent {
			u /= 2
		}
		v := units[table]
		v[0] += u
		units[table] = v
	}
	switch op {
	case "GetItem":
		read(in.TableName, d.sizeOf(in.TableName, in.Key), in.ConsistentRead)
	case "Query", "Scan":
		var out struct{ Items []map[string]json.RawMessage }
		_ = json.Unmarshal(answer, &out)
		total := 0
		for _, it := range out.Items {
			total += itemSize(it)
		}
		read(in.TableName, total, in.ConsistentRead)
	default:
		after := d.writeSizes(items)
		for i, it := range items {
			u := math.Max(1, math.Ceil(float64(max(before[i], after[i]))/1024))
			if it.twice {
				u *= 2
			}
			v := units[it.table]
			v[1] += u
			units[it.table] = v
		}
	}
	return units
}

// withCapacity adds ConsumedCapacity to an answer, in the shape of op's.
func withCapacity(op string, answer []byte, units map[string][2]float64) []byte {
	var m map[string]any
	if json.Unmarshal(answer, &m) != nil || len(units) == 0 {
		return answer
	}
	var list []map[string]any
	for table, u := range units {
		c := map[string]any{"TableName": table, "CapacityUnits": u[0] + u[1]}
		if u[0] > 0 {
			c["ReadCapacityUnits"] = u[0]
		}
		if u[1] > 0 {
			c["WriteCapacityUnits"] = u[1]
		}
		list = append(list, c)
	}
	if op == "TransactWriteItems" || op == "BatchWriteItem" || op == "TransactGetItems" || op == "BatchGetItem" {
		m["ConsumedCapacity"] = list
	} else {
		m["ConsumedCapacity"] = list[0]
	}
	out, err := json.Marshal(m)
	if err != nil {
		return answer
	}
	return out
}

// itemSize is an item's size as DynamoDB counts it.
func itemSize(item map[string]json.RawMessage) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(raw json.RawMessage) int {
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil {
		return 0
	}
	n := 0
	for typ, x := range v {
		switch typ {
		case "S":
			var s string
			_ = json.Unmarshal(x, &s)
			n += len(s)
		case "N":
			var s string
			_ = json.Unmarshal(x, &s)
			n += numberSize(s)
		case "B":
			var b []byte
			_ = json.Unmarshal(x, &b)
			n += len(b)
		case "BOOL", "NULL":
			n++
		case "SS":
			var ss []string
			_ = json.Unmarshal(x, &ss)
			for _, s := range ss {
				n += len(s)
			}
		case "NS":
			var ss []string
			_ = json.Unmarshal(x, &ss)
			for _, s := range ss {
				n += numberSize(s)
			}
		case "BS":
			var bs [][]byte
			_ = json.Unmarshal(x, &bs)
			for _, b := range bs {
				n += len(b)
			}
		case "L":
			var l []json.RawMessage
			_ = json.Unmarshal(x, &l)
			n += 3
			for _, e := range l {
				n += 1 + valueSize(e)
			}
		case "M":
			var m map[string]json.RawMessage
			_ = json.Unmarshal(x, &m)
			n += 3
			for k, e := range m {
				n += 1 + len(k) + valueSize(e)
			}
		}
	}
	return n
}

// numberSize: one byte per two significant digits, plus one.
func numberSize(s string) int {
	mant, _, _ := strings.Cut(strings.ToUpper(s), "E")
	digits := strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return r
		}
		return -1
	}, mant)
	digits = strings.Trim(digits, "0")
	return (len(digits)+1)/2 + 1
}
