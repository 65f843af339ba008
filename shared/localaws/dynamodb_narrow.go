package localaws

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/truora/minidyn/core"
	"github.com/truora/minidyn/types"
)

// minidyn 0.8.2 answers a Query by walking, and deep-copying, every item of
// the table (180 ms for a partition of one item beside 20,000 others), and
// a TransactWriteItems by deep-copying the whole table first (for its
// rollback: 108 ms); a PutItem of a new key re-sorts all keys. narrowed
// runs such a request on a view of its table holding only what it can
// touch: for a Query the keys of its partition (a contiguous run of the
// sorted keys), for a write the items its keys name; the write's effect on
// those items is then carried back into the table. The answers are the
// same (TestNarrowedRequestsAnswerAlike), whatever the table holds.
//
// Every request to minidyn runs under d.smu, so no other one sees a
// table while it is narrowed. Tables with secondary indexes (whose
// indexes would miss items) and keys that are not strings are left
// whole, and so is any request this file cannot read.
func (d *DynamoDB) narrowed(op string, body []byte, run func()) {
	if d.opts.wide {
		run()
		return
	}
	tables := minidynTables(d.inner)
	if tables == nil {
		run()
		return
	}
	switch op {
	case "Query":
		d.narrowQuery(tables, body, run)
	case "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems":
		d.narrowWrite(tables, op, body, run)
	default:
		run()
	}
}

// narrowQuery runs a query on its partition's keys alone.
func (d *DynamoDB) narrowQuery(tables map[string]*core.Table, body []byte, run func()) {
	var in struct {
		TableName, IndexName, KeyConditionExpression string
		ExpressionAttributeNames                     map[string]string
		ExpressionAttributeValues                    map[string]attrValue
	}
	t := (*core.Table)(nil)
	if json.Unmarshal(body, &in) == nil && in.IndexName == "" {
		t = tables[in.TableName]
	}
	if !lazyCapable(t) {
		run()
		return
	}
	from, _, ok := keyRange(t, in.TableName, in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if !ok {
		run()
		return
	}
	// minidyn's key is the hash key, then "." and the range key: a
	// partition's keys share that prefix (and a few others' may: minidyn
	// still matches each against the condition).
	prefix := from.pk
	if t.KeySchema.RangeKey != "" {
		prefix += "."
	}
	all := t.SortedKeys
	lo := sort.SearchStrings(all, prefix)
	hi := lo + sort.Search(len(all)-lo, func(i int) bool { return !strings.HasPrefix(all[lo+i], prefix) })
	t.SortedKeys = all[lo:hi:hi]
	defer func() { t.SortedKeys = all }()
	run()
}

// narrowWrite runs a keyed write on a view of its tables holding only the
// items its keys name, then carries what it did to them back.
func (d *DynamoDB) narrowWrite(tables map[string]*core.Table, op string, body []byte, run func()) {
	touched, ok := writeKeys(tables, op, body)
	if !ok {
		run()
		return
	}
	type view struct {
		data map[string]map[string]*types.Item
		keys []string
	}
	whole := map[*core.Table]view{}
	for t, keys := range touched {
		whole[t] = view{t.Data, t.SortedKeys}
		small := view{data: map[string]map[string]*types.Item{}}
		for _, k := range keys {
			if v, ok := t.Data[k]; ok {
				small.data[k] = v
				small.keys = append(small.keys, k)
			}
		}
		slices.Sort(small.keys)
		small.keys = slices.Compact(small.keys)
		t.Data, t.SortedKeys = small.data, small.keys
	}
	defer func() {
		for t, w := range whole {
			// minidyn may have replaced the view's map (a transaction's
			// rollback restores a copy): read what it holds now.
			after := t.Data
			t.Data, t.SortedKeys = w.data, w.keys
			for _, k := range touched[t] {
				v, now := after[k]
				_, was := t.Data[k]
				switch {
				case now:
					t.Data[k] = v
					if !was {
						t.SortedKeys = slices.Insert(t.SortedKeys, insertAt(t.SortedKeys, k), k)
					}
				case was:
					delete(t.Data, k)
					t.SortedKeys = slices.Delete(t.SortedKeys, insertAt(t.SortedKeys, k), insertAt(t.SortedKeys, k)+1)
				}
			}
		}
	}()
	run()
}

func insertAt(keys []string, k string) int { return sort.SearchStrings(keys, k) }

// writeKeys lists, per table, minidyn's keys of the items a keyed write
// names; ok false when any is not in a table that can be narrowed or cannot
// be read.
func writeKeys(tables map[string]*core.Table, op string, body []byte) (map[*core.Table][]string, bool) {
	type keyed struct {
		TableName string
		Key, Item json.RawMessage
	}
	var in struct {
		keyed
		TransactItems []map[string]keyed
	}
	if json.Unmarshal(body, &in) != nil {
		return nil, false
	}
	var named []keyed
	if op == "TransactWriteItems" {
		for _, ti := range in.TransactItems {
			for _, k := range ti {
				named = append(named, k)
			}
		}
	} else {
		named = append(named, in.keyed)
	}
	out := map[*core.Table][]string{}
	for _, k := range named {
		t := tables[k.TableName]
		raw := k.Key
		if raw == nil {
			raw = k.Item
		}
		if !lazyCapable(t) || raw == nil {
			return nil, false
		}
		p := &itemsParser{b: raw}
		item, err := p.itemMap()
		if err != nil || p.i != len(raw) {
			return nil, false
		}
		key, err := itemKey(t, item)
		if err != nil || key == "" {
			return nil, false
		}
		out[t] = append(out[t], key)
	}
	return out, len(out) > 0
}
