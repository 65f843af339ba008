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
	"strings"
	"sync"

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
		d.inner.ServeHTTP(httptest.NewRecorder(), req)
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
	if d.journal == nil || !mutating[op] {
		d.inner.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	d.mu.Lock()
	defer d.mu.Unlock()
	rec := httptest.NewRecorder()
	d.inner.ServeHTTP(rec, r)
	if rec.Code == http.StatusOK {
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
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}
