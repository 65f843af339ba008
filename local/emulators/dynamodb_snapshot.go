package emulators

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/truora/minidyn/core"
	"github.com/truora/minidyn/server"
	"github.com/truora/minidyn/types"
)

// snapshotLine is a line of dynamodb.snapshot: the header (covers, and how
// many item lines there are), a table definition (a CreateTable or
// UpdateTable request), a page of the items of a table with indexes as
// Scan answers them, or the end mark (a snapshot without it is refused: it
// is not the state). Items is raw when written and decoded into minidyn's
// own item type when read. Item lines, one item each, come between the
// pages and the end mark (dynamodb_lazy.go).
type snapshotLine[I any] struct {
	Covers int64           `json:"covers,omitempty"`
	Lines  int             `json:"lines,omitempty"` // in the header: how many item lines follow the pages
	Target string          `json:"t,omitempty"`
	Body   json.RawMessage `json:"b,omitempty"`
	Table  string          `json:"table,omitempty"`
	Items  I               `json:"items,omitempty"`
	End    bool            `json:"end,omitempty"`
}

// scanPage is how many items a snapshot line holds.
const scanPage = 1000

func (d *DynamoDB) step(name string) {
	if d.opts.step != nil {
		d.opts.step(name)
	}
}

// compactLocked folds the journal into a snapshot; d.mu is held, so the
// snapshot is the state after exactly the journal's requests. Each step
// leaves files a start reads right (the names are the crash tests'):
//
//	"snapshot.tmp half", "snapshot.tmp synced": a crash before the rename
//	leaves dynamodb.snapshot.tmp, which a start deletes unread; the old
//	snapshot and the journal are whole.
//	"snapshot renamed", "snapshot synced": the snapshot covers the open
//	journal's generation G. Whether the rename survived or not, a start
//	reads either the old snapshot and the journal, or the new snapshot and
//	skips the journal of generation G, whose requests it holds: nothing is
//	applied twice (a transaction's conditions, an ADD counter).
//	"journal.tmp synced", "journal renamed": an empty journal of generation
//	G+1 replaces the old one the same way (written beside, fsynced,
//	renamed, directory fsynced); either journal is right beside the new
//	snapshot. New requests go to it only once the rename is durable.
func (d *DynamoDB) compactLocked() error {
	d.smu.Lock()
	defer d.smu.Unlock()
	d.lmu.Lock()
	defer d.lmu.Unlock()
	tmp := d.path(snapshotFile + ".tmp")
	size, lines, err := d.writeSnapshot(tmp)
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d.step("snapshot.tmp synced")
	if err := os.Rename(tmp, d.path(snapshotFile)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	// Either snapshot holds the items not loaded yet; the new one's lines
	// are those to load from now on.
	d.lazy = lines
	d.step("snapshot renamed")
	err = syncDir(d.dir)
	if err == nil {
		d.snapSize = size
		d.step("snapshot synced")
		err = d.newJournal(d.gen + 1)
	}
	if err != nil {
		// The snapshot may cover the open journal: what is appended there
		// could be skipped at the next start. Refuse writes until a restart.
		_ = d.journal.Close()
		d.journal = nil
		return err
	}
	d.step("compacted")
	return nil
}

// newJournal replaces the journal with an empty one of generation gen.
func (d *DynamoDB) newJournal(gen int64) error {
	tmp := d.path(journalFile + ".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(journalEntry{Gen: gen})
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		d.step("journal.tmp synced")
		err = os.Rename(tmp, d.path(journalFile))
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return err
	}
	d.step("journal renamed")
	if d.journal != nil {
		_ = d.journal.Close()
	}
	d.journal, d.gen, d.size = f, gen, int64(len(line)+1)
	return syncDir(d.dir)
}

// writeSnapshot writes the state to path, fsynced, and returns its size and
// the item lines it wrote (to load from from now on). d.mu and d.lmu are
// held: no request changes minidyn or loads a line meanwhile, so every item
// is either in minidyn or in an unloaded line of the last snapshot, never
// both, never neither.
func (d *DynamoDB) writeSnapshot(path string) (int64, *lazyItems, error) {
	names := make([]string, 0, len(d.tables))
	for name := range d.tables {
		names = append(names, name)
	}
	slices.Sort(names)
	// Tables of item lines last (their lines are sorted; the header counts
	// them), the others in pages of Scan answers, loaded whole at a start.
	capable := map[string]bool{}
	var keys map[string][2]string // table: its hash and range key names
	if mu, tables := minidynMu(d.inner), minidynTables(d.inner); mu != nil && tables != nil {
		keys = map[string][2]string{}
		mu.Lock()
		for _, name := range names {
			if t := tables[name]; lazyCapable(t) {
				capable[name] = true
				keys[name] = [2]string{t.KeySchema.HashKey, t.KeySchema.RangeKey}
			}
		}
		mu.Unlock()
	}
	lines := &lazyItems{loaded: map[int]bool{}}
	var buf bytes.Buffer
	for _, name := range names {
		if capable[name] {
			if err := d.writeItemLines(&buf, lines, name, keys[name]); err != nil {
				return 0, nil, err
			}
		}
	}
	lines.raw, lines.to = buf.Bytes(), buf.Len()

	f, err := os.Create(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(snapshotLine[json.RawMessage]{Covers: d.gen, Lines: len(lines.loaded) + lines.left}); err != nil {
		return 0, nil, err
	}
	for _, name := range names {
		for _, e := range d.tables[name] {
			if err := enc.Encode(snapshotLine[json.RawMessage]{Target: e.Target, Body: e.Body}); err != nil {
				return 0, nil, err
			}
		}
	}
	if err := w.Flush(); err != nil {
		return 0, nil, err
	}
	d.step("snapshot.tmp half")
	for _, name := range names {
		if capable[name] {
			continue
		}
		err := d.scanTable(name, func(items json.RawMessage) error {
			return enc.Encode(snapshotLine[json.RawMessage]{Table: name, Items: items})
		})
		if err != nil {
			return 0, nil, err
		}
	}
	if _, err := w.Write(lines.raw); err != nil {
		return 0, nil, err
	}
	if err := enc.Encode(snapshotLine[json.RawMessage]{End: true}); err != nil {
		return 0, nil, err
	}
	if err := w.Flush(); err != nil {
		return 0, nil, err
	}
	if err := f.Sync(); err != nil {
		return 0, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	return st.Size(), lines, f.Close()
}

// scanTable hands each page of a Scan of table to page.
func (d *DynamoDB) scanTable(table string, page func(items json.RawMessage) error) error {
	var start json.RawMessage
	for {
		req, _ := json.Marshal(map[string]any{"TableName": table, "Limit": scanPage, "ExclusiveStartKey": start})
		rec := d.callNarrowed("Scan", req) // the start key placed by the emulator (dynamodb_narrow.go)
		if rec.Code != http.StatusOK {
			return fmt.Errorf("scan %s: %d %s", table, rec.Code, rec.Body)
		}
		var out struct {
			Items            json.RawMessage
			LastEvaluatedKey json.RawMessage
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			return fmt.Errorf("scan %s: %w", table, err)
		}
		if len(out.Items) > 0 && string(out.Items) != "[]" {
			if err := page(out.Items); err != nil {
				return err
			}
		}
		if start = out.LastEvaluatedKey; len(start) == 0 || string(start) == "{}" || string(start) == "null" {
			return nil
		}
	}
}

// writeItemLines appends table's item lines to buf, sorted by key: the
// items minidyn holds (loaded from now on) merged with the last snapshot's
// lines of the table no request has loaded (copied as they are).
func (d *DynamoDB) writeItemLines(buf *bytes.Buffer, lines *lazyItems, table string, key [2]string) error {
	type held struct {
		k    itemKeyOf
		item json.RawMessage
	}
	var mine []held
	err := d.scanTable(table, func(items json.RawMessage) error {
		var page []json.RawMessage
		if err := json.Unmarshal(items, &page); err != nil {
			return err
		}
		for _, item := range page {
			var attrs map[string]attrValue
			if err := json.Unmarshal(item, &attrs); err != nil {
				return err
			}
			k := itemKeyOf{table: table}
			if h := attrs[key[0]].S; h != nil {
				k.pk = *h
			}
			if r := attrs[key[1]].S; key[1] != "" && r != nil {
				k.sk = *r
			}
			mine = append(mine, held{k, item})
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(mine, func(a, b held) int { return a.k.cmp(b.k) })
	var old []int // the last snapshot's unloaded lines of table, in order
	if d.lazy != nil && d.lazy.left > 0 {
		if old, err = d.lazy.lines(itemKeyOf{table: table}, sameTable(table)); err != nil {
			return err
		}
	}
	emit := func(line []byte, loaded bool) {
		if loaded {
			lines.loaded[buf.Len()] = true
		} else {
			lines.left++
		}
		buf.Write(line)
	}
	for len(mine) > 0 || len(old) > 0 {
		var ok itemKeyOf
		if len(old) > 0 {
			if ok, _, err = d.lazy.key(old[0]); err != nil {
				return err
			}
		}
		if len(mine) > 0 && (len(old) == 0 || mine[0].k.cmp(ok) <= 0) {
			if len(old) > 0 && mine[0].k == ok {
				old = old[1:] // never expected: minidyn's is the newer
			}
			k, _ := json.Marshal([]string{mine[0].k.table, mine[0].k.pk, mine[0].k.sk})
			line := append(append(append([]byte(`{"k":`), k...), `,"i":`...), mine[0].item...)
			emit(append(line, "}\n"...), true)
			mine = mine[1:]
			continue
		}
		emit(d.lazy.line(old[0]), false)
		old = old[1:]
	}
	return nil
}

// loadSnapshot loads dynamodb.snapshot, if any, and returns the journal
// generation it covers (0: none). Its item lines wait in d.lazy.
func (d *DynamoDB) loadSnapshot() (int64, error) {
	raw, err := mapFile(d.path(snapshotFile))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	d.snapSize = int64(len(raw))
	// The end mark is the last line: a snapshot without it is not the state.
	body, ok := bytes.CutSuffix(raw, []byte(`{"end":true}`+"\n"))
	if !ok {
		return 0, errors.New("incomplete: no end mark")
	}
	itemsAt := len(body)
	if i := bytes.Index(body, []byte("\n"+itemLinePrefix)); i >= 0 {
		itemsAt = i + 1
	}
	lines, err := decodeSnapshot(body[:itemsAt])
	if err != nil {
		return 0, err
	}
	// The table definitions come first (writeSnapshot), then the items.
	var covers int64
	for i, l := range lines {
		switch {
		case l.Covers > 0:
			covers = l.Covers
			if itemsAt < len(body) {
				if l.Lines <= 0 {
					return 0, errors.New("item lines the header does not count")
				}
				d.lazy = &lazyItems{raw: raw, from: itemsAt, to: len(body), loaded: map[int]bool{}, left: l.Lines}
			}
		case l.Target != "":
			if rec := d.call(l.Target, l.Body); rec.Code != http.StatusOK {
				return 0, fmt.Errorf("line %d: %s: %d %s", i+1, l.Target, rec.Code, rec.Body)
			}
			d.track(l.Target, l.Body)
		}
	}
	direct := minidynTables(d.inner)
	keys := make([][]string, len(lines))
	err = parallel(len(lines), func(i int) error {
		l := lines[i]
		t := direct[l.Table]
		if l.Table == "" || t == nil || len(t.Indexes) > 0 {
			return nil
		}
		k := make([]string, len(l.Items))
		for j, item := range l.Items {
			var err error
			if k[j], err = d.heldKey(t, item); err != nil {
				return fmt.Errorf("line %d: %w", i+1, err)
			}
		}
		keys[i] = k
		return nil
	})
	if err != nil {
		return 0, err
	}
	loaded := map[*core.Table]bool{}
	for i, l := range lines {
		if l.Table == "" {
			continue
		}
		if keys[i] == nil {
			// No direct access, or secondary indexes to maintain too:
			// item by item, as minidyn puts them.
			if err := d.putEach(l.Table, l.Items); err != nil {
				return 0, fmt.Errorf("line %d: %w", i+1, err)
			}
			continue
		}
		t := direct[l.Table]
		for j, item := range l.Items {
			key := keys[i][j]
			if _, dup := t.Data[key]; !dup {
				t.SortedKeys = append(t.SortedKeys, key)
			}
			t.Data[key] = item
		}
		loaded[t] = true
	}
	for t := range loaded {
		slices.Sort(t.SortedKeys)
	}
	return covers, nil
}

// decodeSnapshot decodes the snapshot's whole lines (a last line without
// its newline is left out: the end mark then is missing), on every CPU: a
// start spends most of its time here. The items' strings point into raw.
func decodeSnapshot(raw []byte) ([]snapshotLine[[]map[string]*types.Item], error) {
	var bounds []int // line i is raw[bounds[i]:bounds[i+1]]
	for at := 0; ; {
		bounds = append(bounds, at)
		nl := bytes.IndexByte(raw[at:], '\n')
		if nl < 0 {
			break
		}
		at += nl + 1
	}
	lines := make([]snapshotLine[[]map[string]*types.Item], len(bounds)-1)
	err := parallel(len(lines), func(i int) error {
		line, l := raw[bounds[i]:bounds[i+1]], &lines[i]
		var err error
		if l.Table, l.Items, err = parseItemsLine(line); err != nil {
			*l = snapshotLine[[]map[string]*types.Item]{}
			if err := json.Unmarshal(line, l); err != nil {
				return fmt.Errorf("line %d: %w", i+1, err)
			}
		}
		return nil
	})
	return lines, err
}

// parallel runs f(0..n-1) on every CPU and returns the errors.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				errs[i] = f(i)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// itemKey is t.KeySchema.GetKey (minidyn's key of an item in its table's
// map) without its fmt.Sprintf for string and number keys, a fifth of a
// load; other keys, and errors, are GetKey's.
func itemKey(t *core.Table, item map[string]*types.Item) (string, error) {
	part := func(name string) *string {
		v := item[name]
		switch {
		case v == nil:
			return nil
		case t.AttributesDef[name] == "S":
			return v.S
		case t.AttributesDef[name] == "N":
			return v.N
		}
		return nil
	}
	h := part(t.KeySchema.HashKey)
	if h != nil && t.KeySchema.RangeKey == "" {
		return *h, nil
	}
	if r := part(t.KeySchema.RangeKey); h != nil && r != nil {
		return *h + "." + *r, nil
	}
	return t.KeySchema.GetKey(t.AttributesDef, item)
}

func (d *DynamoDB) putEach(table string, items []map[string]*types.Item) error {
	for _, item := range items {
		req, _ := json.Marshal(map[string]any{"TableName": table, "Item": item})
		if rec := d.call("PutItem", req); rec.Code != http.StatusOK {
			return fmt.Errorf("put into %s: %d %s", table, rec.Code, rec.Body)
		}
	}
	return nil
}

// minidynTables reaches the tables behind minidyn's HTTP server (nil if its
// layout is not the expected one: then items are put one by one). minidyn
// v0.8.2 has no bulk load, and its PutItem re-sorts all of a table's keys
// for each new item: loading n items that way costs O(n²) (about 4 s for the
// 30,000 items of 10,000 tables), directly it costs one sort.
func minidynTables(s *server.Server) map[string]*core.Table {
	c := reflect.ValueOf(s).Elem().FieldByName("client")
	if !c.IsValid() || c.Kind() != reflect.Pointer || c.IsNil() {
		return nil
	}
	t := c.Elem().FieldByName("tables")
	if !t.IsValid() || t.Type() != reflect.TypeFor[map[string]*core.Table]() {
		return nil
	}
	return *(*map[string]*core.Table)(unsafe.Pointer(t.UnsafeAddr()))
}

// syncDir makes renames in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
