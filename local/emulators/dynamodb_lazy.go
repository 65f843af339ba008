package emulators

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/truora/minidyn/core"
	"github.com/truora/minidyn/server"
	"github.com/truora/minidyn/types"
)

// A snapshot holds the items of a table keyed by strings (and without
// secondary indexes) as item lines, one item per line, sorted by table,
// partition key and sort key:
//
//	{"k":["<table>","<pk>","<sk>"],"i":{<item>}}
//
// A start maps the file and decodes none of them, nor splits them into
// lines (the header counts them): a key is found by bisecting the bytes (a
// probe reads the line after a byte offset), so restart time stays flat
// however many items there are (issue 13). An item is decoded into minidyn the first
// time a request names it (a key, or a query's key range); a request that
// cannot be narrowed (a Scan, a query on an index, an operation this file
// does not know) loads its table whole first. A line once loaded is
// minidyn's: minidyn alone then answers for that item, deleted or not.
type lazyItems struct {
	raw      []byte       // the snapshot as mapped at start, or as last written
	from, to int          // the item lines are raw[from:to], whole lines
	loaded   map[int]bool // lines (by start offset) in minidyn, or whose table is gone
	left     int          // lines not loaded
}

// itemKeyOf is an item line's key.
type itemKeyOf struct{ table, pk, sk string }

func (a itemKeyOf) cmp(b itemKeyOf) int {
	if c := strings.Compare(a.table, b.table); c != 0 {
		return c
	}
	if c := strings.Compare(a.pk, b.pk); c != 0 {
		return c
	}
	return strings.Compare(a.sk, b.sk)
}

const itemLinePrefix = `{"k":[`

// next is the start of the line after the one starting at s.
func (l *lazyItems) next(s int) int {
	nl := bytes.IndexByte(l.raw[s:l.to], '\n')
	if nl < 0 {
		return l.to
	}
	return s + nl + 1
}

// startAt is the start of the first line starting at or after at.
func (l *lazyItems) startAt(at int) int {
	if at <= l.from {
		return l.from
	}
	if l.raw[at-1] == '\n' {
		return at
	}
	return l.next(at)
}

func (l *lazyItems) line(s int) []byte { return l.raw[s:l.next(s)] }

// key reads the key of the line starting at s and returns the parser
// placed at its item.
func (l *lazyItems) key(s int) (itemKeyOf, *itemsParser, error) {
	return l.keyWith(&itemsParser{}, s)
}

// keyWith is key with p (its slab of values kept) as the parser.
func (l *lazyItems) keyWith(p *itemsParser, s int) (itemKeyOf, *itemsParser, error) {
	p.b, p.i = l.line(s), 0
	var k itemKeyOf
	var err error
	ok := p.lit(itemLinePrefix)
	if ok {
		k.table, err = p.str()
		ok = err == nil && p.lit(",")
	}
	if ok {
		k.pk, err = p.str()
		ok = err == nil && p.lit(",")
	}
	if ok {
		k.sk, err = p.str()
		ok = err == nil && p.lit(`],"i":`)
	}
	if !ok {
		return k, nil, fmt.Errorf("snapshot byte %d: not an item line", s)
	}
	return k, p, nil
}

// item decodes the item of the line starting at s with p.
func (l *lazyItems) item(p *itemsParser, s int) (itemKeyOf, map[string]*types.Item, error) {
	k, p, err := l.keyWith(p, s)
	if err != nil {
		return k, nil, err
	}
	m, err := p.itemMap()
	if err == nil && p.lit("}") && p.lit("\n") && p.i == len(p.b) {
		return k, m, nil
	}
	var line struct {
		I map[string]*types.Item `json:"i"`
	}
	if err := json.Unmarshal(l.line(s), &line); err != nil || line.I == nil {
		return k, nil, fmt.Errorf("snapshot byte %d: %v", s, err)
	}
	return k, line.I, nil
}

// search is the start of the first line whose key is at least k.
func (l *lazyItems) search(k itemKeyOf) (int, error) {
	var err error
	i := sort.Search(l.to-l.from, func(i int) bool {
		s := l.startAt(l.from + i)
		if s >= l.to {
			return true
		}
		got, _, e := l.key(s)
		if e != nil {
			err = e
			return true
		}
		return got.cmp(k) >= 0
	})
	return l.startAt(l.from + i), err
}

// lines returns the unloaded lines from the first key at least from, for as
// long as more(key) holds.
func (l *lazyItems) lines(from itemKeyOf, more func(itemKeyOf) bool) ([]int, error) {
	s, err := l.search(from)
	if err != nil {
		return nil, err
	}
	var out []int
	for ; s < l.to; s = l.next(s) {
		k, _, err := l.key(s)
		if err != nil {
			return nil, err
		}
		if !more(k) {
			break
		}
		if !l.loaded[s] {
			out = append(out, s)
		}
	}
	return out, nil
}

// unloaded counts table's lines not loaded (DescribeTable's ItemCount).
func (l *lazyItems) unloaded(table string) int {
	idx, err := l.lines(itemKeyOf{table: table}, sameTable(table))
	if err != nil {
		return 0
	}
	return len(idx)
}

// lazyCapable: a table whose items can wait in item lines. Keys of other
// types would need DynamoDB's number order, and an index would have to
// hold items minidyn has not seen.
func lazyCapable(t *core.Table) bool {
	s := func(name string) bool { return t.AttributesDef[name] == "S" }
	return t != nil && len(t.Indexes) == 0 && s(t.KeySchema.HashKey) && (t.KeySchema.RangeKey == "" || s(t.KeySchema.RangeKey))
}

// minidynMu is the lock minidyn's client takes for every request: items
// are put into its tables under it.
func minidynMu(s *server.Server) *sync.Mutex {
	c := reflect.ValueOf(s).Elem().FieldByName("client")
	if !c.IsValid() || c.Kind() != reflect.Pointer || c.IsNil() {
		return nil
	}
	mu := c.Elem().FieldByName("mu")
	if !mu.IsValid() || mu.Type() != reflect.TypeFor[sync.Mutex]() {
		return nil
	}
	return (*sync.Mutex)(unsafe.Pointer(mu.UnsafeAddr()))
}

// errLazyDamaged: an item line a request needed does not decode.
var errLazyDamaged = errors.New("dynamodb snapshot damaged")

// load puts lines into minidyn's tables and marks them loaded. d.lmu and
// minidyn's lock are held.
func (d *DynamoDB) load(tables map[string]*core.Table, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	l := d.lazy
	type loadedItem struct {
		t    *core.Table
		key  string
		item map[string]*types.Item
	}
	items := make([]loadedItem, 0, len(idx))
	slices.Sort(idx)
	idx = slices.Compact(idx) // a request may name a key twice
	// One slab for the values of all: each value starts with {" (an
	// overcount: maps do too). The parser's default slab (256 values) would
	// be kept alive whole by an item of ten.
	p := &itemsParser{}
	n := 0
	for _, s := range idx {
		n += bytes.Count(l.line(s), []byte(`{"`))
	}
	p.slab = make([]types.Item, n)
	for _, s := range idx {
		k, item, err := l.item(p, s)
		if err != nil {
			return fmt.Errorf("%w: %v", errLazyDamaged, err)
		}
		t := tables[k.table]
		if !lazyCapable(t) {
			return fmt.Errorf("%w: byte %d: table %q does not keep item lines", errLazyDamaged, s, k.table)
		}
		key, err := d.heldKey(t, item)
		if err != nil {
			return fmt.Errorf("%w: byte %d: %v", errLazyDamaged, s, err)
		}
		items = append(items, loadedItem{t, key, item})
	}
	added := map[*core.Table][]string{}
	for _, it := range items {
		if _, dup := it.t.Data[it.key]; dup {
			continue // minidyn's own is newer (never expected: a loaded line is not loaded again)
		}
		it.t.Data[it.key] = it.item
		added[it.t] = append(added[it.t], it.key)
	}
	for t, keys := range added {
		slices.Sort(keys)
		t.SortedKeys = mergeSorted(t.SortedKeys, keys)
	}
	for _, s := range idx {
		l.loaded[s] = true
	}
	l.left -= len(idx)
	return nil
}

// mergeSorted merges two sorted lists into a new one.
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] <= b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// fault loads, before minidyn serves op, every item line op may read or
// write.
func (d *DynamoDB) fault(op string, body []byte) error {
	d.lmu.Lock()
	defer d.lmu.Unlock()
	if d.lazy == nil || d.lazy.left == 0 {
		return nil
	}
	mu, tables := minidynMu(d.inner), minidynTables(d.inner)
	if mu == nil || tables == nil {
		return fmt.Errorf("load items for %s: minidyn's layout is not the expected one", op)
	}
	// Under minidyn's lock: its tables map changes with CreateTable.
	mu.Lock()
	defer mu.Unlock()
	idx, err := d.linesFor(tables, op, body)
	if err == nil {
		err = d.load(tables, idx)
	}
	if err != nil {
		return fmt.Errorf("load items for %s: %w", op, err)
	}
	return nil
}

// Operations that read and write no items.
var itemless = map[string]bool{
	"CreateTable": true, "DescribeTable": true, "ListTables": true,
	"UpdateTimeToLive": true, "DescribeTimeToLive": true,
	"TagResource": true, "UntagResource": true, "ListTagsOfResource": true,
	"DescribeEndpoints": true, "DescribeLimits": true,
}

type attrValue struct {
	S *string `json:"S"`
}

type keyedRequest struct {
	TableName string
	Key       map[string]attrValue
	Item      map[string]attrValue
}

// linesFor lists the unloaded lines op may touch.
func (d *DynamoDB) linesFor(tables map[string]*core.Table, op string, body []byte) ([]int, error) {
	if itemless[op] {
		return nil, nil
	}
	var in struct {
		keyedRequest
		IndexName                 string
		KeyConditionExpression    string
		ExpressionAttributeNames  map[string]string
		ExpressionAttributeValues map[string]attrValue
		TransactItems             []map[string]keyedRequest
		RequestItems              map[string]json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil // minidyn refuses it without reading items
	}
	var out []int
	add := func(idx []int, err error) error {
		out = append(out, idx...)
		return err
	}
	// item: the lines of one key; a key that is not strings: its table.
	item := func(r keyedRequest) error {
		key := r.Key
		if key == nil {
			key = r.Item
		}
		t := tables[r.TableName]
		if t == nil {
			return nil // minidyn answers ResourceNotFound
		}
		h, rk := key[t.KeySchema.HashKey].S, key[t.KeySchema.RangeKey].S
		if h == nil || (t.KeySchema.RangeKey != "" && rk == nil) {
			return add(d.lazy.lines(itemKeyOf{table: r.TableName}, sameTable(r.TableName)))
		}
		k := itemKeyOf{table: r.TableName, pk: *h}
		if rk != nil {
			k.sk = *rk
		}
		return add(d.lazy.lines(k, func(got itemKeyOf) bool { return got == k }))
	}
	switch op {
	case "GetItem", "PutItem", "UpdateItem", "DeleteItem":
		err := item(in.keyedRequest)
		return out, err
	case "TransactWriteItems", "TransactGetItems":
		for _, ti := range in.TransactItems {
			for _, r := range ti {
				if err := item(r); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	case "BatchGetItem", "BatchWriteItem":
		for table, raw := range in.RequestItems {
			var get struct{ Keys []map[string]attrValue }
			var write []struct {
				PutRequest    struct{ Item map[string]attrValue }
				DeleteRequest struct{ Key map[string]attrValue }
			}
			if op == "BatchGetItem" {
				_ = json.Unmarshal(raw, &get)
			} else {
				_ = json.Unmarshal(raw, &write)
			}
			var keys []map[string]attrValue
			keys = append(keys, get.Keys...)
			for _, w := range write {
				keys = append(keys, w.PutRequest.Item, w.DeleteRequest.Key)
			}
			for _, k := range keys {
				if k == nil {
					continue
				}
				if err := item(keyedRequest{TableName: table, Key: k}); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	case "Query":
		if t := tables[in.TableName]; t != nil && in.IndexName == "" {
			from, more, ok := keyRange(t, in.TableName, in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
			if ok {
				err := add(d.lazy.lines(from, more))
				return out, err
			}
		}
	}
	if in.TableName != "" {
		// A Scan, a query on an index or one not narrowed here, UpdateTable,
		// DeleteTable: the whole table.
		err := add(d.lazy.lines(itemKeyOf{table: in.TableName}, sameTable(in.TableName)))
		return out, err
	}
	err := add(d.lazy.lines(itemKeyOf{}, func(itemKeyOf) bool { return true }))
	return out, err
}

func sameTable(table string) func(itemKeyOf) bool {
	return func(k itemKeyOf) bool { return k.table == table }
}

// The key conditions a query's KeyConditionExpression is made of.
var (
	condEq      = regexp.MustCompile(`(#?[\w.-]+)\s*=\s*(:[\w-]+)`)
	condCmp     = regexp.MustCompile(`(#?[\w.-]+)\s*(<=|>=|<|>)\s*(:[\w-]+)`)
	condBetween = regexp.MustCompile(`(?i)(#?[\w.-]+)\s+BETWEEN\s+(:[\w-]+)\s+AND\s+(:[\w-]+)`)
	condBegins  = regexp.MustCompile(`(?i)begins_with\s*\(\s*(#?[\w.-]+)\s*,\s*(:[\w-]+)\s*\)`)
)

// keyRange narrows a query to the item lines it may read: its partition,
// and within it from the sort key condition's lower bound for as long as
// its upper bound allows. Whatever it does not recognise reads more (the
// whole partition), never less; ok false: not even the partition.
func keyRange(t *core.Table, table, expr string, names map[string]string, values map[string]attrValue) (from itemKeyOf, more func(itemKeyOf) bool, ok bool) {
	name := func(n string) string {
		if strings.HasPrefix(n, "#") {
			return names[n]
		}
		return n
	}
	value := func(v string) (string, bool) {
		s := values[v].S
		if s == nil {
			return "", false
		}
		return *s, true
	}
	var pk *string
	var sk []func() (string, func(string) bool, bool)
	for _, m := range condEq.FindAllStringSubmatch(expr, -1) {
		v, okv := value(m[2])
		switch name(m[1]) {
		case t.KeySchema.HashKey:
			if !okv || pk != nil {
				return from, nil, false
			}
			pk = &v
		case t.KeySchema.RangeKey:
			sk = append(sk, func() (string, func(string) bool, bool) { return v, func(s string) bool { return s == v }, okv })
		}
	}
	if pk == nil {
		return from, nil, false
	}
	for _, m := range condCmp.FindAllStringSubmatch(expr, -1) {
		if name(m[1]) != t.KeySchema.RangeKey {
			continue
		}
		v, okv := value(m[3])
		op := m[2]
		sk = append(sk, func() (string, func(string) bool, bool) {
			if op[0] == '>' {
				return v, func(string) bool { return true }, okv
			}
			return "", func(s string) bool { return s <= v }, okv
		})
	}
	for _, m := range condBetween.FindAllStringSubmatch(expr, -1) {
		if name(m[1]) != t.KeySchema.RangeKey {
			continue
		}
		lo, ok1 := value(m[2])
		hi, ok2 := value(m[3])
		sk = append(sk, func() (string, func(string) bool, bool) {
			return lo, func(s string) bool { return s <= hi }, ok1 && ok2
		})
	}
	for _, m := range condBegins.FindAllStringSubmatch(expr, -1) {
		if name(m[1]) != t.KeySchema.RangeKey {
			continue
		}
		p, okv := value(m[2])
		sk = append(sk, func() (string, func(string) bool, bool) {
			return p, func(s string) bool { return strings.HasPrefix(s, p) }, okv
		})
	}
	from = itemKeyOf{table: table, pk: *pk}
	in := func(string) bool { return true }
	if len(sk) == 1 {
		lo, upTo, okv := sk[0]()
		if okv {
			from.sk, in = lo, upTo
		}
	}
	return from, func(k itemKeyOf) bool { return k.table == table && k.pk == *pk && in(k.sk) }, true
}
