// Package s3model puts S3's physics in front of the in-process S3 emulator,
// so that a benchmark measures what AWS would allow and not how fast the
// emulator runs: a latency per call, and S3's per-prefix write ceiling with
// SlowDown beyond it.
//
// What a "prefix" is here: S3 scales a bucket by splitting its key space
// into partitioned prefixes, each with at least 3,500 writes a second
// (PUT, COPY, POST, DELETE; every key of a DeleteObjects call counts). Which
// prefixes S3 has split is not visible to a client and changes with load.
// The model takes the split to be at every "directory": a key's prefix is
// the key up to and including its last '/' (a table's partition directory
// `…/data/p=3/`, its `…/metadata/`). That is where S3's partitioning of a
// table written by partition ends up once it has scaled; a bucket that has
// not scaled yet would offer less (one ceiling for all of a table's keys).
//
// The model:
//   - DeleteObjects (POST ?delete): every key takes a token from its
//     prefix's bucket (Rate a second, Burst at most, full at start). Keys
//     without a token get a per-key SlowDown in the result; a call none of
//     whose keys get one is answered 503 SlowDown whole. The keys admitted are
//     deleted in the emulator's backend. More than 1,000 keys: 400
//     MalformedXML, as S3.
//   - DELETE and PUT of one object: one token; none left: 503 SlowDown.
//   - Latency: WriteLatency for DeleteObjects, DELETE and PUT (30 ms), and
//     ReadLatency for GET, HEAD and LIST (10 ms), slept for real, after
//     admission. Reads have no ceiling here (S3's is 5,500 a second per
//     prefix; nothing measured comes near it).
package s3model

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/icehold/icehold/local/emulators"
)

// Model is an http.Handler in front of an S3 emulator.
type Model struct {
	// Next serves every call but DeleteObjects (the emulator).
	Next http.Handler
	// Store is the emulator's store: DeleteObjects deletes the admitted
	// keys there.
	Store Store
	// WriteLatency and ReadLatency are slept per call.
	WriteLatency, ReadLatency time.Duration
	// Rate is the write ceiling per prefix (keys a second); Burst the most
	// a prefix can take at once. Set them before serving, or with SetRate.
	Rate, Burst float64
	// Now is the model's clock for its token buckets (nil: time.Now); a
	// test drives it so that refills do not depend on the machine's speed.
	Now func() time.Time

	mu          sync.Mutex
	buckets     map[string]*bucket
	first, last time.Time // the first and last key admitted
	stats       counters
}

type bucket struct {
	tokens float64
	at     time.Time
}

type counters struct {
	requests, deleteCalls, keysAsked, keysDeleted, slowCalls, slowKeys, reads, writes atomic.Int64
}

// Stats are the model's counters since it started.
type Stats struct {
	Requests    int64 // every call
	DeleteCalls int64 // DeleteObjects calls, 503s included
	KeysAsked   int64 // keys in DeleteObjects calls
	KeysDeleted int64 // keys admitted and deleted
	SlowCalls   int64 // calls answered 503 SlowDown whole
	SlowKeys    int64 // keys answered SlowDown in a DeleteObjects result
	Reads       int64 // GET, HEAD, LIST
	Writes      int64 // single-object DELETE and PUT
}

// Sub is the difference of two snapshots.
func (s Stats) Sub(o Stats) Stats {
	return Stats{s.Requests - o.Requests, s.DeleteCalls - o.DeleteCalls, s.KeysAsked - o.KeysAsked, s.KeysDeleted - o.KeysDeleted,
		s.SlowCalls - o.SlowCalls, s.SlowKeys - o.SlowKeys, s.Reads - o.Reads, s.Writes - o.Writes}
}

// SlowDowns is every SlowDown answered: whole calls and keys.
func (s Stats) SlowDowns() int64 { return s.SlowCalls + s.SlowKeys }

// DefaultRate is S3's documented write ceiling per partitioned prefix;
// DefaultBurst what an idle prefix takes at once: one full DeleteObjects
// call (S3 documents no burst; a model that banked a second of rate would
// flatter short runs by 3,500 free keys per prefix).
const (
	DefaultRate  = 3500
	DefaultBurst = 1000
)

// New returns the model with the figures of SPEC §8's bench row: 30 ms a
// write call, 10 ms a read, 3,500 key deletions a second per prefix (1,000
// at most at once).
// Store deletes keys as the emulator's DeleteObjects does.
type Store interface {
	DeleteObjects(bucket string, ids []emulators.ObjectID) ([]emulators.DeleteResult, error)
}

func New(next http.Handler, store Store) *Model {
	return &Model{Next: next, Store: store, WriteLatency: 30 * time.Millisecond, ReadLatency: 10 * time.Millisecond,
		Rate: DefaultRate, Burst: DefaultBurst, buckets: map[string]*bucket{}}
}

// Stats snapshots the counters.
func (m *Model) Stats() Stats {
	c := &m.stats
	return Stats{c.requests.Load(), c.deleteCalls.Load(), c.keysAsked.Load(), c.keysDeleted.Load(),
		c.slowCalls.Load(), c.slowKeys.Load(), c.reads.Load(), c.writes.Load()}
}

// SetRate changes the ceiling per prefix while serving (a bucket S3 has
// not scaled yet offers less than the documented rate).
func (m *Model) SetRate(rate float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Rate = rate
}

// Span is when the first and the last write since StartSpan were admitted.
func (m *Model) Span() (first, last time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.first, m.last
}

// StartSpan starts a new Span.
func (m *Model) StartSpan() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.first, m.last = time.Time{}, time.Time{}
}

// Prefix is the partitioned prefix a key counts against (see the package
// comment).
func Prefix(bucket, key string) string {
	return bucket + "/" + key[:strings.LastIndexByte(key, '/')+1]
}

// admit takes one token per key from each key's prefix, in order, and
// reports which keys got one.
func (m *Model) admit(bucketName string, keys []string) []bool {
	now := time.Now()
	if m.Now != nil {
		now = m.Now()
	}
	ok := make([]bool, len(keys))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buckets == nil {
		m.buckets = map[string]*bucket{}
	}
	for i, k := range keys {
		p := Prefix(bucketName, k)
		b := m.buckets[p]
		if b == nil {
			b = &bucket{tokens: m.Burst, at: now}
			m.buckets[p] = b
		}
		if now.After(b.at) {
			b.tokens = min(m.Burst, b.tokens+m.Rate*now.Sub(b.at).Seconds())
			b.at = now
		}
		if b.tokens >= 1 {
			b.tokens--
			ok[i] = true
			if m.first.IsZero() {
				m.first = now
			}
			m.last = now
		}
	}
	return ok
}

// split parses a path-style request's bucket and key.
func split(r *http.Request) (string, string) {
	b, k, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return b, k
}

func slowDown(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
}

func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.stats.requests.Add(1)
	bucketName, key := split(r)
	_, multi := r.URL.Query()["delete"]
	switch {
	case r.Method == http.MethodPost && multi:
		m.deleteObjects(w, r, bucketName)
	case (r.Method == http.MethodDelete || r.Method == http.MethodPut) && key != "":
		m.stats.writes.Add(1)
		if !m.admit(bucketName, []string{key})[0] {
			time.Sleep(m.WriteLatency)
			slowDown(w)
			return
		}
		time.Sleep(m.WriteLatency)
		m.Next.ServeHTTP(w, r)
	default:
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			m.stats.reads.Add(1)
			time.Sleep(m.ReadLatency)
		}
		m.Next.ServeHTTP(w, r)
	}
}

func (m *Model) deleteObjects(w http.ResponseWriter, r *http.Request, bucketName string) {
	m.stats.deleteCalls.Add(1)
	var in struct {
		Quiet   bool `xml:"Quiet"`
		Objects []struct {
			Key string `xml:"Key"`
		} `xml:"Object"`
	}
	if err := xml.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Objects) > 1000 {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `<Error><Code>MalformedXML</Code><Message>%d keys, %v</Message></Error>`, len(in.Objects), err)
		return
	}
	keys := make([]string, len(in.Objects))
	for i, o := range in.Objects {
		keys[i] = o.Key
	}
	m.stats.keysAsked.Add(int64(len(keys)))
	ok := m.admit(bucketName, keys)
	var admitted []string
	var out deleteResult
	for i, k := range keys {
		if ok[i] {
			admitted = append(admitted, k)
		} else {
			out.Error = append(out.Error, deleteError{Key: k, Code: "SlowDown", Message: "Please reduce your request rate."})
		}
	}
	time.Sleep(m.WriteLatency)
	if len(admitted) == 0 {
		m.stats.slowCalls.Add(1)
		slowDown(w)
		return
	}
	m.stats.slowKeys.Add(int64(len(out.Error)))
	ids := make([]emulators.ObjectID, len(admitted))
	for i, k := range admitted {
		ids[i] = emulators.ObjectID{Key: k}
	}
	res, err := m.Store.DeleteObjects(bucketName, ids)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `<Error><Code>InternalError</Code><Message>%s</Message></Error>`, err)
		return
	}
	m.stats.keysDeleted.Add(int64(len(admitted)))
	if !in.Quiet {
		for _, d := range res {
			out.Deleted = append(out.Deleted, deleted{Key: d.Key})
		}
	}
	w.Header().Set("Content-Type", "application/xml")
	_, _ = io.WriteString(w, xml.Header)
	_ = xml.NewEncoder(w).Encode(out)
}

type deleteResult struct {
	XMLName xml.Name      `xml:"DeleteResult"`
	Deleted []deleted     `xml:"Deleted"`
	Error   []deleteError `xml:"Error"`
}

type deleted struct {
	Key string `xml:"Key"`
}

type deleteError struct {
	Key     string `xml:"Key"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}
