// Package emulators serves AWS APIs in process for the local server and the
// tests: DynamoDB (minidyn) and S3 (its own store), reached by the real SDK
// clients over HTTP. A write journal makes DynamoDB state survive kill -9.
package emulators

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/truora/minidyn/server"
)

// mutating DynamoDB operations: these are journaled.
var mutating = map[string]bool{
	"CreateTable": true, "UpdateTable": true, "DeleteTable": true, "PutItem": true,
	"UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true,
}

// State on disk (docs/design/local.md, "The DynamoDB journal: snapshot + tail"):
//
//	dynamodb.snapshot  {"covers":C}, the table definitions, the items, {"end":true}
//	dynamodb.journal   {"gen":G}, then one applied mutating request per line
//
// The snapshot holds the state after every request of the journals of
// generation ≤ C; the journal is replayed on top of it only when G > C.
// Compaction writes a snapshot covering the open journal's generation G,
// then starts an empty journal of generation G+1 (see compactLocked).
const (
	journalFile  = "dynamodb.journal"
	snapshotFile = "dynamodb.snapshot"
	// DefaultCompactAt is the journal size (bytes) past which it is folded
	// into a snapshot.
	DefaultCompactAt = 1 << 20
)

// DynamoDBOptions tune the journal.
type DynamoDBOptions struct {
	// CompactAt: the journal is compacted once it is larger than this (and
	// than a quarter of the last snapshot; see due), and on Close. It
	// bounds the tail a start replays after a kill -9. 0:
	// DefaultCompactAt; < 0: never (the journal alone, as before
	// snapshots; the restart benchmark's baseline).
	CompactAt int64
	// step, when set, is called at each step of a compaction (the crash
	// tests kill the process there).
	step func(name string)
	// wide: no narrowed views (the tests' reference).
	wide bool
}

// DynamoDB is minidyn behind a write journal: every successful mutating
// request is appended and fsynced before it is answered, and replayed in
// order on start. Mutations are serialized so journal order is apply order.
type DynamoDB struct {
	// Requests counts every request served (benchmarks: reads per answer).
	Requests atomic.Int64
	inner    *server.Server
	dir      string
	opts     DynamoDBOptions
	// mu serializes mutations and compaction: journal order is apply order,
	// and a snapshot sees no half-applied request.
	mu       sync.Mutex
	journal  *os.File
	gen      int64 // the open journal's generation
	size     int64 // its size in bytes
	snapSize int64 // the last snapshot's size in bytes
	// tables: the CreateTable and UpdateTable requests that made each table,
	// in order; a snapshot replays them to define the tables again.
	tables map[string][]journalEntry
	// defs: the tables as CreateTable defined them, for ListTables and
	// DescribeTable (minidyn answers neither as AWS does).
	tmu  sync.Mutex
	defs map[string]tableDef
	// smu: one request at a time in minidyn (which serializes them anyway),
	// so that a request may load items into a table (dynamodb_lazy.go) or
	// run on a narrowed view of it (dynamodb_narrow.go) unseen. Held
	// after d.mu, before lmu.
	smu sync.Mutex
	// lazy: the last snapshot's item lines no request has loaded yet
	// (dynamodb_lazy.go); lmu guards it and is held while a compaction
	// writes (after d.mu and smu, before minidyn's lock).
	lmu  sync.Mutex
	lazy *lazyItems
}

// journalEntry is a journal line: a header ({"gen":G}) or a request.
type journalEntry struct {
	Gen    int64           `json:"gen,omitempty"`
	Target string          `json:"t,omitempty"`
	Body   json.RawMessage `json:"b,omitempty"`
}

// NewDynamoDB returns the emulator; with dir == "" it keeps nothing on disk.
func NewDynamoDB(dir string) (*DynamoDB, error) {
	return OpenDynamoDB(dir, DynamoDBOptions{})
}

// OpenDynamoDB is NewDynamoDB with options.
func OpenDynamoDB(dir string, o DynamoDBOptions) (*DynamoDB, error) {
	if o.CompactAt == 0 {
		o.CompactAt = DefaultCompactAt
	}
	d := &DynamoDB{inner: server.NewServer(), dir: dir, opts: o, tables: map[string][]journalEntry{}}
	if dir == "" {
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// A compaction that crashed before its rename left a file nothing reads.
	for _, f := range []string{snapshotFile, journalFile} {
		if err := os.Remove(d.path(f + ".tmp")); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	covers, err := d.loadSnapshot()
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", d.path(snapshotFile), err)
	}
	gen, err := d.replay(covers)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", d.path(journalFile), err)
	}
	if gen > covers+1 {
		// The snapshot this journal continues is gone: starting would
		// silently drop everything before it.
		return nil, fmt.Errorf("%s continues a snapshot of generation %d, %s has %d", d.path(journalFile), gen-1, d.path(snapshotFile), covers)
	}
	if gen <= covers {
		// No journal yet, or a compaction stopped after its snapshot and
		// before its new journal: the journal there is in the snapshot.
		if err := d.newJournal(covers + 1); err != nil {
			return nil, err
		}
	} else {
		f, err := os.OpenFile(d.path(journalFile), os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		d.journal, d.gen = f, gen
	}
	if d.due() {
		d.mu.Lock()
		err := d.compactLocked()
		d.mu.Unlock()
		if err != nil {
			if d.journal != nil {
				_ = d.journal.Close()
			}
			return nil, fmt.Errorf("compact %s: %w", dir, err)
		}
	}
	return d, nil
}

func (d *DynamoDB) path(name string) string { return filepath.Join(d.dir, name) }

// due reports whether the journal should be compacted now: past CompactAt,
// and past a quarter of the snapshot, so that the bytes a compaction
// writes stay within 4× the journal bytes written since the last one.
func (d *DynamoDB) due() bool {
	return d.opts.CompactAt > 0 && d.size > d.opts.CompactAt && d.size > d.snapSize/4
}

// replay applies the journal on top of a snapshot covering generation
// covers and returns the journal's generation (0: no journal). A torn last
// line (a crash mid-append: never answered; an append is one write ending
// in its newline) is cut off, so that what is appended next starts a line
// of its own. A whole line that does not decode is damage: refused.
func (d *DynamoDB) replay(covers int64) (int64, error) {
	f, err := os.OpenFile(d.path(journalFile), os.O_RDWR, 0)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	gen := int64(1) // a journal from before snapshots has no header: generation 1
	var good int64  // bytes up to the end of the last whole line
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break // a line without its newline is torn
		}
		if err != nil {
			return 0, err
		}
		var e journalEntry
		if err := json.Unmarshal(line, &e); err != nil {
			return 0, fmt.Errorf("line %d: %w", n, err)
		}
		good += int64(len(line))
		switch {
		case n == 1 && e.Gen > 0:
			if gen = e.Gen; gen <= covers {
				return gen, nil // all in the snapshot
			}
		case gen > covers:
			if err := d.apply(e.Target, e.Body); err != nil {
				return 0, fmt.Errorf("line %d: %w", n, err)
			}
		}
	}
	if st, err := f.Stat(); err != nil {
		return 0, err
	} else if st.Size() > good {
		if err := f.Truncate(good); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	d.size = good
	return gen, nil
}

// call serves one request to minidyn.
func (d *DynamoDB) call(op string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	rec := httptest.NewRecorder()
	d.inner.ServeHTTP(rec, req)
	return rec
}

// apply replays one journaled request.
func (d *DynamoDB) apply(op string, body []byte) error {
	if err := d.fault(op, body); err != nil {
		return err
	}
	if op == "TransactWriteItems" {
		d.applyTransaction(body)
		return nil
	}
	if d.callNarrowed(op, body).Code == http.StatusOK {
		d.track(op, body)
	}
	return nil
}

// callNarrowed is call on views of the request's tables
// (dynamodb_narrow.go).
func (d *DynamoDB) callNarrowed(op string, body []byte) (rec *httptest.ResponseRecorder) {
	err := d.narrowed(op, body, func(b []byte) { rec = d.call(op, b) })
	var ae awsError
	if errors.As(err, &ae) {
		rec = httptest.NewRecorder()
		writeAWSError(rec, ae.code, ae.msg)
	}
	return rec
}

// applyTransaction replays a journaled transaction as its single writes.
// It succeeded when it was journaled, and replay rebuilds the state it met,
// so its conditions hold again and each write touches a different item:
// one by one gives the same result. minidyn's TransactWriteItems copies
// every table it touches (for a rollback replay never needs), which made a
// replay quadratic in the number of items (6,378 table creates: 6.5 min).
func (d *DynamoDB) applyTransaction(body []byte) {
	var in struct{ TransactItems []map[string]json.RawMessage }
	if json.Unmarshal(body, &in) != nil {
		return
	}
	single := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem"}
	for _, item := range in.TransactItems {
		for kind, raw := range item {
			if op := single[kind]; op != "" { // a ConditionCheck writes nothing
				d.callNarrowed(op, raw)
			}
		}
	}
}

// track keeps the requests that define each table (for the snapshot).
func (d *DynamoDB) track(op string, body []byte) {
	d.note(op, body)
	var in struct{ TableName string }
	if json.Unmarshal(body, &in) != nil {
		return
	}
	switch op {
	case "CreateTable":
		d.tables[in.TableName] = []journalEntry{{Target: op, Body: body}}
	case "UpdateTable":
		d.tables[in.TableName] = append(d.tables[in.TableName], journalEntry{Target: op, Body: body})
	case "DeleteTable":
		delete(d.tables, in.TableName)
	}
}

// Close closes the journal. A clean stop compacts a journal holding more
// than its header, so the next start is a snapshot load.
func (d *DynamoDB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.journal == nil {
		return nil
	}
	var err error
	if d.opts.CompactAt > 0 && d.size > headerSize(d.gen) {
		err = d.compactLocked()
	}
	err = errors.Join(err, d.journal.Close())
	d.journal = nil
	return err
}

func (d *DynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.Requests.Add(1)
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	if op == "ListTables" {
		writeAWS(w, d.listTables())
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if n := roundedNumber(body); n != "" {
		ae := roundedNumberError(n)
		writeAWSError(w, ae.code, ae.msg)
		return
	}
	journaled := d.dir != "" && mutating[op]
	if journaled {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.journal == nil {
			http.Error(w, "journal closed", http.StatusServiceUnavailable)
			return
		}
	}
	rec, out, err := d.serve(op, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if !journaled {
		if rec.Code == http.StatusOK {
			d.note(op, body)
		}
		writeRecorded(w, rec, out)
		return
	}
	if rec.Code == http.StatusOK {
		var compact bytes.Buffer
		if err := json.Compact(&compact, body); err == nil {
			d.track(op, compact.Bytes())
			line, _ := json.Marshal(journalEntry{Target: op, Body: compact.Bytes()})
			if err := d.append(line); err != nil {
				http.Error(w, "journal: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
	}
	writeRecorded(w, rec, out)
	if d.due() {
		// The answer goes out first; other requests wait (mutations on
		// d.mu, reads on d.smu) until the snapshot is written.
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if err := d.compactLocked(); err != nil {
			// Before the rename the journal goes on; after, writes are
			// refused until a restart (compactLocked).
			slog.Error("dynamodb journal compaction failed", "err", err, "writes_refused", d.journal == nil)
		}
	}
}

// serve runs one request in minidyn under d.smu: the items it names are
// loaded first, it runs on a narrowed view of its table, and a read's
// answer is reshaped as AWS answers.
func (d *DynamoDB) serve(op string, body []byte) (*httptest.ResponseRecorder, []byte, error) {
	d.smu.Lock()
	defer d.smu.Unlock()
	if err := d.fault(op, body); err != nil {
		return nil, nil, err
	}
	counted := capacityAsked(body)
	var written []keyed
	var before []int
	if counted {
		written = d.writtenItems(op, body)
		before = d.writeSizes(written)
	}
	rec := d.callNarrowed(op, body)
	out := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		out = d.reshape(op, out)
		if counted {
			out = withCapacity(op, out, d.capacity(op, body, out, written, before))
		}
	}
	return rec, out, nil
}

// append writes a journal line and fsyncs it. A failed write is cut off
// again, so that the next line does not continue a torn one.
func (d *DynamoDB) append(line []byte) error {
	if _, err := d.journal.Write(append(line, '\n')); err != nil {
		_ = d.journal.Truncate(d.size)
		return err
	}
	d.size += int64(len(line) + 1)
	return d.journal.Sync()
}

func headerSize(gen int64) int64 {
	line, _ := json.Marshal(journalEntry{Gen: gen})
	return int64(len(line) + 1)
}

// writeRecorded sends a recorded answer with out as its body (reshape may
// have changed it: the length and checksum headers go).
func writeRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder, out []byte) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.Header().Del("X-Amz-Crc32")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(out)
}

// Tables as CreateTable defined them: minidyn answers no ListTables and a
// DescribeTable without status, ARN or attribute definitions; AWS tools
// (the CLI, consoles, CDK's checks) expect them.
type tableDef struct {
	AttributeDefinitions []any  `json:"AttributeDefinitions"`
	BillingMode          string `json:"BillingMode"`
	created              time.Time
}

// note tracks the tables a successful request created or deleted.
func (d *DynamoDB) note(op string, body []byte) {
	if op != "CreateTable" && op != "DeleteTable" {
		return
	}
	var req struct {
		TableName string `json:"TableName"`
		tableDef
	}
	if json.Unmarshal(body, &req) != nil || req.TableName == "" {
		return
	}
	d.tmu.Lock()
	defer d.tmu.Unlock()
	if d.defs == nil {
		d.defs = map[string]tableDef{}
	}
	if op == "DeleteTable" {
		delete(d.defs, req.TableName)
		return
	}
	req.created = time.Now()
	d.defs[req.TableName] = req.tableDef
}

func (d *DynamoDB) listTables() map[string]any {
	d.tmu.Lock()
	defer d.tmu.Unlock()
	names := make([]string, 0, len(d.defs))
	for n := range d.defs {
		names = append(names, n)
	}
	slices.Sort(names)
	return map[string]any{"TableNames": names}
}

// reshape gives minidyn's answers the fields AWS always sends: a
// DescribeTable's status, ARN, attribute definitions and billing mode (and
// none of its empty enum strings); a Query's or Scan's Items, Count and
// ScannedCount when nothing matched.
func (d *DynamoDB) reshape(op string, out []byte) []byte {
	if op != "DescribeTable" && op != "Query" && op != "Scan" {
		return out
	}
	var m map[string]any
	if json.Unmarshal(out, &m) != nil {
		return out
	}
	switch op {
	case "DescribeTable":
		t, _ := m["Table"].(map[string]any)
		if t == nil {
			return out
		}
		for k, v := range t {
			if v == "" {
				delete(t, k)
			}
		}
		name, _ := t["TableName"].(string)
		t["TableStatus"] = "ACTIVE"
		t["TableArn"] = "arn:aws:dynamodb:us-east-1:000000000000:table/" + name
		if _, ok := t["TableSizeBytes"]; !ok {
			t["TableSizeBytes"] = 0
		}
		// minidyn counts what it holds; the snapshot's lines not loaded
		// yet are items too (d.smu is held: no load meanwhile).
		if d.lazy != nil && d.lazy.left > 0 {
			n, _ := t["ItemCount"].(float64)
			t["ItemCount"] = int(n) + d.lazy.unloaded(name)
		}
		d.tmu.Lock()
		def, ok := d.defs[name]
		d.tmu.Unlock()
		if ok {
			t["AttributeDefinitions"] = def.AttributeDefinitions
			t["CreationDateTime"] = epoch(def.created)
			if def.BillingMode != "" {
				t["BillingModeSummary"] = map[string]any{"BillingMode": def.BillingMode}
			}
		}
	default:
		if _, ok := m["Items"]; !ok {
			m["Items"] = []any{}
		}
		if _, ok := m["Count"]; !ok {
			items, _ := m["Items"].([]any)
			m["Count"] = len(items)
		}
		if _, ok := m["ScannedCount"]; !ok {
			m["ScannedCount"] = m["Count"]
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return out
	}
	return b
}
