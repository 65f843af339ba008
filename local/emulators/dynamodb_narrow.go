package emulators

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/truora/minidyn/core"
	"github.com/truora/minidyn/types"
)

// Keys. minidyn 0.8.2 keys an item in its table's map by its partition
// key, ".", and its sort key: "a" + "." + "q.T#t" and "a.T#q" + "." + "t"
// were one key, so two items were one (the second table's create was a
// 409, a load of one answered the other, a purge of one purged the other).
// So the items of a keyed table (string keys, no secondary index: every
// table icehold makes) are held under storeKey instead, which no two keys
// share, and minidyn sees such a table only through a view made for the
// request it serves:
//
//   - a keyed request (GetItem, PutItem, UpdateItem, DeleteItem, batches,
//     transactions) runs on a view holding the items it names under
//     minidyn's own keys; what it did to them is carried back. Two keys of
//     one request that minidyn's keys would make one are refused
//     (ValidationException), never merged;
//   - a Query or a Scan runs on the items in storeKey order (a query on
//     its partition's run alone), where minidyn reads them by the keys it
//     is given, not by keys it computes;
//   - an UpdateTable runs on minidyn's keys (an index it adds refers to
//     items by them; the table is then no longer keyed).
//
// A Query's or Scan's ExclusiveStartKey is placed by the emulator: the view
// starts after the key's place, whether its item exists or not, and minidyn
// gets the request without it (minidyn starts after the key's item, and a
// page whose start key's item was deleted meanwhile ended the listing;
// DynamoDB continues after the key's place). That holds for every table,
// keyed or not.
//
// Every request runs in minidyn under d.smu, so no other one sees a table
// while it is a view. Views also keep requests fast: minidyn answers a
// Query by walking, and deep-copying, every item it is given (180 ms for a
// partition of one item beside 20,000 others), a TransactWriteItems by
// deep-copying its tables first (for its rollback: 108 ms), and a PutItem
// of a new key re-sorts all keys (TestNarrowedRequestsAnswerAlike).
//
// Nothing on disk holds a table's map keys (the journal holds requests,
// the snapshot items with their key attributes), so a state written before
// storeKey loads as it is.

// storeKey is where an item of a keyed table is held: the partition key
// with each 0x00 as 0x00 0xFF, then 0x00 0x01, then the sort key (a table
// without one: the partition key). No two (partition, sort) pairs share
// it, and it sorts as DynamoDB orders items: by partition key, then sort
// key, bytewise; a partition's keys are one run, the ones starting with
// partitionPrefix.
func storeKey(pk string, sk *string) string {
	if sk == nil {
		return pk
	}
	return partitionPrefix(pk) + *sk
}

func partitionPrefix(pk string) string {
	return strings.ReplaceAll(pk, "\x00", "\x00\xff") + "\x00\x01"
}

// keyed: t's items are held under storeKey (not in the wide reference of
// the tests, which runs every request on minidyn's own keys).
func (d *DynamoDB) keyed(t *core.Table) bool { return !d.opts.wide && lazyCapable(t) }

// heldKey is the key t's map holds an item under.
func (d *DynamoDB) heldKey(t *core.Table, item map[string]*types.Item) (string, error) {
	if !d.keyed(t) {
		return itemKey(t, item)
	}
	h, r := item[t.KeySchema.HashKey], item[t.KeySchema.RangeKey]
	if h == nil || h.S == nil || (t.KeySchema.RangeKey != "" && (r == nil || r.S == nil)) {
		return t.KeySchema.GetKey(t.AttributesDef, item) // its error
	}
	if t.KeySchema.RangeKey == "" {
		return *h.S, nil
	}
	return storeKey(*h.S, r.S), nil
}

// narrowed runs a request on views of its tables (above), run getting the
// body minidyn is to serve. An error is the answer (run is not called).
func (d *DynamoDB) narrowed(op string, body []byte, run func(body []byte)) error {
	tables := minidynTables(d.inner)
	if tables == nil {
		run(body)
		return nil
	}
	switch op {
	case "Query", "Scan":
		d.narrowRead(tables, op, body, run)
		return nil
	case "GetItem", "PutItem", "UpdateItem", "DeleteItem", "BatchGetItem", "BatchWriteItem", "TransactGetItems", "TransactWriteItems":
		return d.narrowKeyed(tables, op, body, run)
	case "UpdateTable":
		return d.unkeyedUpdate(tables, body, run)
	}
	run(body)
	return nil
}

// narrowRead runs a Query or Scan on the table's keys in order: a query's
// partition alone when its key condition names one, from its
// ExclusiveStartKey's place on.
func (d *DynamoDB) narrowRead(tables map[string]*core.Table, op string, body []byte, run func([]byte)) {
	var in struct {
		TableName, IndexName, KeyConditionExpression string
		ExpressionAttributeNames                     map[string]string
		ExpressionAttributeValues                    map[string]attrValue
		ExclusiveStartKey                            map[string]*types.Item
		ScanIndexForward                             *bool
	}
	t := (*core.Table)(nil)
	if json.Unmarshal(body, &in) == nil && in.IndexName == "" {
		t = tables[in.TableName]
	}
	if !lazyCapable(t) {
		run(body) // an index's order, or keys that are not strings: minidyn's
		return
	}
	all := t.SortedKeys
	keys := all
	if op == "Query" && d.keyed(t) {
		if from, _, ok := keyRange(t, in.TableName, in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues); ok {
			prefix := partitionPrefix(from.pk)
			if t.KeySchema.RangeKey == "" {
				prefix = from.pk // its one key (and longer ones, which minidyn's condition rejects)
			}
			keys = run0(keys, prefix)
		}
	}
	if len(in.ExclusiveStartKey) > 0 {
		start, err := d.heldKey(t, in.ExclusiveStartKey)
		if err != nil {
			run(body) // minidyn says what is wrong with it
			return
		}
		var req map[string]json.RawMessage
		if json.Unmarshal(body, &req) != nil {
			run(body)
			return
		}
		delete(req, "ExclusiveStartKey")
		body, _ = json.Marshal(req)
		at := sort.SearchStrings(keys, start)
		if op == "Scan" || in.ScanIndexForward == nil || *in.ScanIndexForward {
			if at < len(keys) && keys[at] == start {
				at++
			}
			keys = keys[at:]
		} else {
			keys = keys[:at]
		}
	}
	t.SortedKeys = keys[:len(keys):len(keys)] // minidyn may append: never into all
	defer func() { t.SortedKeys = all }()
	run(body)
}

// run0 is the run of sorted keys that start with prefix.
func run0(keys []string, prefix string) []string {
	lo := sort.SearchStrings(keys, prefix)
	hi := lo + sort.Search(len(keys)-lo, func(i int) bool { return !strings.HasPrefix(keys[lo+i], prefix) })
	return keys[lo:hi]
}

// narrowKeyed runs a keyed request with each keyed table it names as a view
// holding only the items its keys name, under minidyn's keys, then carries
// what the request did to them back under their held keys. A keyed table
// whose keys this cannot read is an empty view (minidyn then refuses the
// request, or touches nothing).
func (d *DynamoDB) narrowKeyed(tables map[string]*core.Table, op string, body []byte, run func([]byte)) error {
	named := namedKeys(tables, op, body)
	type view struct {
		data map[string]map[string]*types.Item
		keys []string
		held map[string]string // minidyn's key → held key
	}
	whole := map[*core.Table]view{}
	restore := func() {
		for t, w := range whole {
			t.Data, t.SortedKeys = w.data, w.keys
		}
	}
	for name, items := range named {
		t := tables[name]
		if !d.keyed(t) {
			continue
		}
		v := view{data: t.Data, keys: t.SortedKeys, held: map[string]string{}}
		whole[t] = v
		small := map[string]map[string]*types.Item{}
		var smallKeys []string
		for _, item := range items {
			if item == nil {
				continue // unreadable: the view lacks it
			}
			m, err := itemKey(t, item)
			if err != nil {
				continue
			}
			h, err := d.heldKey(t, item)
			if err != nil {
				continue
			}
			if prev, ok := v.held[m]; ok && prev != h {
				restore()
				return awsError{"ValidationException", fmt.Sprintf("the local DynamoDB cannot serve, in one request, two keys of table %s whose partition and sort keys join alike (%q)", name, m)}
			}
			v.held[m] = h
			if it, ok := v.data[h]; ok {
				small[m] = it
				smallKeys = append(smallKeys, m)
			}
		}
		slices.Sort(smallKeys)
		t.Data, t.SortedKeys = small, slices.Compact(smallKeys)
	}
	defer func() {
		for t, w := range whole {
			// minidyn may have replaced the view's map (a transaction's
			// rollback restores a copy): read what it holds now.
			after := t.Data
			t.Data, t.SortedKeys = w.data, w.keys
			for m, h := range w.held {
				v, now := after[m]
				_, was := t.Data[h]
				switch {
				case now:
					t.Data[h] = v
					if !was {
						t.SortedKeys = slices.Insert(t.SortedKeys, insertAt(t.SortedKeys, h), h)
					}
				case was:
					delete(t.Data, h)
					at := insertAt(t.SortedKeys, h)
					t.SortedKeys = slices.Delete(t.SortedKeys, at, at+1)
				}
			}
		}
	}()
	run(body)
	return nil
}

func insertAt(keys []string, k string) int { return sort.SearchStrings(keys, k) }

// namedKeys lists, per table, the key attributes of each item a keyed
// request names (nil where one cannot be read).
func namedKeys(tables map[string]*core.Table, op string, body []byte) map[string][]map[string]*types.Item {
	type keyed struct {
		TableName string
		Key, Item map[string]*types.Item
	}
	type batch struct {
		Keys          []map[string]*types.Item
		PutRequest    *struct{ Item map[string]*types.Item }
		DeleteRequest *struct{ Key map[string]*types.Item }
	}
	var in struct {
		keyed
		TransactItems []map[string]keyed
		RequestItems  map[string]json.RawMessage
	}
	out := map[string][]map[string]*types.Item{}
	if json.Unmarshal(body, &in) != nil {
		for name := range tables {
			out[name] = []map[string]*types.Item{nil} // whatever it names: an empty view
		}
		return out
	}
	add := func(k keyed) {
		if k.Key == nil {
			k.Key = k.Item
		}
		out[k.TableName] = append(out[k.TableName], k.Key)
	}
	switch op {
	case "TransactGetItems", "TransactWriteItems":
		for _, ti := range in.TransactItems {
			for _, k := range ti {
				add(k)
			}
		}
	case "BatchGetItem", "BatchWriteItem":
		for name, raw := range in.RequestItems {
			var get batch
			var write []batch
			if op == "BatchGetItem" {
				_ = json.Unmarshal(raw, &get)
				write = []batch{get}
			} else if json.Unmarshal(raw, &write) != nil {
				add(keyed{TableName: name})
			}
			for _, w := range write {
				for _, k := range w.Keys {
					add(keyed{TableName: name, Key: k})
				}
				if w.PutRequest != nil {
					add(keyed{TableName: name, Key: w.PutRequest.Item})
				}
				if w.DeleteRequest != nil {
					add(keyed{TableName: name, Key: w.DeleteRequest.Key})
				}
			}
		}
	default:
		add(in.keyed)
	}
	return out
}

// unkeyedUpdate runs an UpdateTable of a keyed table on minidyn's own keys
// (an index it creates refers to items by them), and holds the items under
// storeKey again if the table is still keyed afterwards.
func (d *DynamoDB) unkeyedUpdate(tables map[string]*core.Table, body []byte, run func([]byte)) error {
	var in struct{ TableName string }
	_ = json.Unmarshal(body, &in)
	t := tables[in.TableName]
	if !d.keyed(t) {
		run(body)
		return nil
	}
	if err := rekey(t, func(item map[string]*types.Item) (string, error) { return itemKey(t, item) }); err != nil {
		return err
	}
	run(body)
	if d.keyed(t) {
		return rekey(t, func(item map[string]*types.Item) (string, error) { return d.heldKey(t, item) })
	}
	return nil
}

// rekey holds t's items under the keys key gives them; refused, changing
// nothing, when two would share one.
func rekey(t *core.Table, key func(map[string]*types.Item) (string, error)) error {
	data := make(map[string]map[string]*types.Item, len(t.Data))
	keys := make([]string, 0, len(t.Data))
	for _, item := range t.Data {
		k, err := key(item)
		if err != nil {
			return err
		}
		if _, dup := data[k]; dup {
			return awsError{"ValidationException", fmt.Sprintf("the local DynamoDB cannot index table %s: two of its keys join alike (%q)", t.Name, k)}
		}
		data[k] = item
		keys = append(keys, k)
	}
	slices.Sort(keys)
	t.Data, t.SortedKeys = data, keys
	return nil
}
