// Package localaws serves AWS APIs in process for the local server and the
// tests: DynamoDB (minidyn) and S3 (gofakes3), reached by the real SDK
// clients over HTTP. A write journal makes DynamoDB state survive kill -9.
package localaws

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/truora/minidyn/server"
)

// mutating DynamoDB operations: these are journaled.
var mutating = map[string]bool{
	"CreateTable": true, "UpdateTable": true, "DeleteTable": true, "PutItem": true,
	"UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true,
}

// DynamoDB is minidyn behind a write journal: every successful mutating
// request is appended and fsynced before it is answered, and replayed in
// order on start. Mutations are serialized so journal order is apply order.
type DynamoDB struct {
	inner   http.Handler
	mu      sync.Mutex
	journal *os.File
	tmu     sync.Mutex
	tables  map[string]tableDef
}

type journalEntry struct {
	Target string          `json:"t"`
	Body   json.RawMessage `json:"b"`
}

// NewDynamoDB returns the emulator; with dir == "" it keeps nothing on disk.
func NewDynamoDB(dir string) (*DynamoDB, error) {
	d := &DynamoDB{inner: server.NewServer()}
	if dir == "" {
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "dynamodb.journal")
	if err := d.replay(path); err != nil {
		return nil, fmt.Errorf("replay %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	d.journal = f
	return d, nil
}

func (d *DynamoDB) replay(path string) error {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e journalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// A torn last line from a crash mid-append: the request was never
			// answered, so dropping it is right.
			break
		}
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(e.Body))
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+e.Target)
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		rec := httptest.NewRecorder()
		d.inner.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			d.note(e.Target, e.Body)
		}
	}
	return sc.Err()
}

// Close closes the journal.
func (d *DynamoDB) Close() error {
	if d.journal == nil {
		return nil
	}
	return d.journal.Close()
}

func (d *DynamoDB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	if mutating[op] {
		d.mu.Lock()
		defer d.mu.Unlock()
	}
	rec := httptest.NewRecorder()
	d.inner.ServeHTTP(rec, r)
	out := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		if d.journal != nil && mutating[op] {
			var compact bytes.Buffer
			if err := json.Compact(&compact, body); err == nil {
				line, _ := json.Marshal(journalEntry{Target: op, Body: compact.Bytes()})
				if _, err := d.journal.Write(append(line, '\n')); err != nil {
					http.Error(w, "journal: "+err.Error(), http.StatusInternalServerError)
					return
				}
				if err := d.journal.Sync(); err != nil {
					http.Error(w, "journal: "+err.Error(), http.StatusInternalServerError)
					return
				}
			}
		}
		d.note(op, body)
		out = d.reshape(op, out)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	// reshape may change the body
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
	if d.tables == nil {
		d.tables = map[string]tableDef{}
	}
	if op == "DeleteTable" {
		delete(d.tables, req.TableName)
		return
	}
	req.created = time.Now()
	d.tables[req.TableName] = req.tableDef
}

func (d *DynamoDB) listTables() map[string]any {
	d.tmu.Lock()
	defer d.tmu.Unlock()
	names := make([]string, 0, len(d.tables))
	for n := range d.tables {
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
		d.tmu.Lock()
		def, ok := d.tables[name]
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
