package emulators

import (
	"bufio"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SQS is an in-process queue service on the SQS JSON protocol with the
// semantics the pipeline relies on: visibility timeouts, receive counts, a
// redrive policy moving a message to its DLQ after maxReceiveCount receives,
// and StartMessageMoveTask (the console's "redrive"). Effects are journaled
// and fsynced before they are answered; after a restart in-flight messages
// are visible again, with their receive counts, as SQS does once their
// visibility timeout passes.
type SQS struct {
	mu      sync.Mutex
	queues  map[string]*queue
	journal *os.File
	base    string // URL prefix of queue URLs
	// tasks are the message move tasks per source queue, newest first
	// (memory only: a task completes before StartMessageMoveTask answers).
	tasks map[string][]moveTask
	// duplicates: every send is delivered twice (at-least-once, tests).
	duplicates atomic.Bool
	// refuse: the next entries of SendMessageBatch calls to refuse.
	refuse atomic.Int32
}

// SetDuplicates makes every message sent from now on arrive twice.
func (s *SQS) SetDuplicates(on bool) { s.duplicates.Store(on) }

// SetRefuse makes SendMessageBatch refuse the next n entries it is sent
// (tests): each is answered in Failed, not sent, while the call succeeds,
// as SQS answers a batch part of which failed on its side.
func (s *SQS) SetRefuse(n int32) { s.refuse.Store(n) }

// refused takes one refusal, if any is left.
func (s *SQS) refused() bool {
	for {
		n := s.refuse.Load()
		if n <= 0 {
			return false
		}
		if s.refuse.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

type queue struct {
	name       string
	visibility time.Duration
	dlq        string // DLQ name, "" for none
	maxRecv    int
	msgs       []*message
}

// moveTask is a finished StartMessageMoveTask as ListMessageMoveTasks
// reports it.
type moveTask struct {
	sourceARN string
	moved     int
	started   time.Time
}

type message struct {
	id, body, receipt string
	receives          int
	visibleAt         time.Time
	sentAt            time.Time
	source            string // the queue it came from, for redrive out of a DLQ
}

type sqsEffect struct {
	Op       string `json:"op"` // create, send, recv, del, move
	Queue    string `json:"q"`
	ID       string `json:"id,omitempty"`
	Body     string `json:"b,omitempty"`
	To       string `json:"to,omitempty"`
	Visible  int    `json:"vis,omitempty"`
	DLQ      string `json:"dlq,omitempty"`
	MaxRecv  int    `json:"max,omitempty"`
	SentAt   int64  `json:"ts,omitempty"`
	Receives int    `json:"n,omitempty"`
}

// NewSQS returns the queue service; with dir == "" it keeps nothing on disk.
func NewSQS(dir string) (*SQS, error) {
	s := &SQS{queues: map[string]*queue{}, base: "http://localhost/000000000000/"}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "sqs.journal")
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var e sqsEffect
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				break // a torn last line: that effect was never answered
			}
			s.apply(e)
		}
		f.Close()
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	s.journal = f
	return s, nil
}

// Close closes the journal.
func (s *SQS) Close() error {
	if s.journal == nil {
		return nil
	}
	return s.journal.Close()
}

// SetBaseURL makes queue URLs point at the emulator's address.
func (s *SQS) SetBaseURL(u string) { s.base = strings.TrimRight(u, "/") + "/000000000000/" }

func (s *SQS) record(e sqsEffect) error {
	s.apply(e)
	if s.journal == nil {
		return nil
	}
	line, _ := json.Marshal(e)
	if _, err := s.journal.Write(append(line, '\n')); err != nil {
		return err
	}
	return s.journal.Sync()
}

// apply changes state; callers hold s.mu (or are replaying).
func (s *SQS) apply(e sqsEffect) {
	q := s.queues[e.Queue]
	switch e.Op {
	case "create":
		if q == nil {
			s.queues[e.Queue] = &queue{name: e.Queue, visibility: time.Duration(e.Visible) * time.Second, dlq: e.DLQ, maxRecv: e.MaxRecv}
		}
	case "send":
		if q != nil {
			q.msgs = append(q.msgs, &message{id: e.ID, body: e.Body, sentAt: time.UnixMilli(e.SentAt), source: e.To})
		}
	case "recv":
		if m := q.find(e.ID); m != nil {
			m.receives++
		}
	case "del":
		q.remove(e.ID)
	case "move":
		if m := q.find(e.ID); m != nil {
			q.remove(e.ID)
			if to := s.queues[e.To]; to != nil {
				if m.source == "" {
					m.source = e.Queue
				}
				m.receives, m.visibleAt, m.receipt = e.Receives, time.Time{}, ""
				to.msgs = append(to.msgs, m)
			}
		}
	}
}

// attributes are the queue attributes GetQueueAttributes names ("All" for
// every one); SQS returns none when none are named.
func (q *queue) attributes(s *SQS, names map[string]bool) map[string]string {
	visible, inflight := 0, 0
	now := time.Now()
	for _, m := range q.msgs {
		if m.visibleAt.After(now) {
			inflight++
		} else {
			visible++
		}
	}
	all := map[string]string{
		"ApproximateNumberOfMessages": strconv.Itoa(visible), "ApproximateNumberOfMessagesNotVisible": strconv.Itoa(inflight),
		"ApproximateNumberOfMessagesDelayed": "0", "QueueArn": s.arn(q.name),
		"VisibilityTimeout": strconv.Itoa(int(q.visibility / time.Second)),
		"DelaySeconds":      "0", "MaximumMessageSize": "262144", "MessageRetentionPeriod": "345600", "ReceiveMessageWaitTimeSeconds": "0",
	}
	if q.dlq != "" {
		rp, _ := json.Marshal(map[string]any{"deadLetterTargetArn": s.arn(q.dlq), "maxReceiveCount": q.maxRecv})
		all["RedrivePolicy"] = string(rp)
	}
	out := map[string]string{}
	for k, v := range all {
		if names["All"] || names[k] {
			out[k] = v
		}
	}
	return out
}

func (q *queue) find(id string) *message {
	if q == nil {
		return nil
	}
	for _, m := range q.msgs {
		if m.id == id {
			return m
		}
	}
	return nil
}

func (q *queue) remove(id string) {
	if q == nil {
		return
	}
	for i, m := range q.msgs {
		if m.id == id {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			return
		}
	}
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

func (s *SQS) queueOf(url string) (*queue, error) {
	name := url[strings.LastIndexByte(url, '/')+1:]
	q := s.queues[name]
	if q == nil {
		return nil, awsError{"AWS.SimpleQueueService.NonExistentQueue", "no queue " + name}
	}
	return q, nil
}

func (s *SQS) arn(name string) string { return "arn:aws:sqs:us-east-1:000000000000:" + name }

func nameOfARN(arn string) string { return arn[strings.LastIndexByte(arn, ':')+1:] }

// receive takes up to n visible messages, moving to the DLQ those received
// maxReceiveCount times already.
func (s *SQS) receive(q *queue, n int, visibility time.Duration) ([]message, error) {
	now := time.Now()
	var out []message
	for _, m := range append([]*message{}, q.msgs...) {
		if len(out) >= n {
			break
		}
		if m.visibleAt.After(now) {
			continue
		}
		if q.dlq != "" && q.maxRecv > 0 && m.receives >= q.maxRecv {
			if err := s.record(sqsEffect{Op: "move", Queue: q.name, ID: m.id, To: q.dlq, Receives: m.receives}); err != nil {
				return nil, err
			}
			continue
		}
		if err := s.record(sqsEffect{Op: "recv", Queue: q.name, ID: m.id}); err != nil {
			return nil, err
		}
		m.visibleAt = now.Add(visibility)
		m.receipt = m.id + ":" + newID()
		out = append(out, *m)
	}
	return out, nil
}

// sendLocked enqueues one message (with s.mu held), twice when duplicates
// are on.
func (s *SQS) sendLocked(q *queue, body string) (string, error) {
	id := newID()
	if err := s.record(sqsEffect{Op: "send", Queue: q.name, ID: id, Body: body, SentAt: time.Now().UnixMilli()}); err != nil {
		return "", err
	}
	if s.duplicates.Load() {
		if err := s.record(sqsEffect{Op: "send", Queue: q.name, ID: newID(), Body: body, SentAt: time.Now().UnixMilli()}); err != nil {
			return "", err
		}
	}
	return id, nil
}

func (s *SQS) ServeHTTP(w http.ResponseWriter, r *http.Request) { serveJSON(w, r, s.call) }

func (s *SQS) call(ctx context.Context, op string, req map[string]any) (map[string]any, error) {
	str := func(k string) string { v, _ := req[k].(string); return v }
	num := func(k string, def int) int {
		if f, ok := toFloat(req[k]); ok {
			return int(f)
		}
		return def
	}
	if op == "ReceiveMessage" {
		return s.receiveCall(ctx, str("QueueUrl"), num("MaxNumberOfMessages", 1), num("WaitTimeSeconds", 0), num("VisibilityTimeout", -1),
			wanted(req["MessageSystemAttributeNames"], req["AttributeNames"]))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch op {
	case "CreateQueue":
		name := str("QueueName")
		attrs, _ := req["Attributes"].(map[string]any)
		vis := 30
		if v, ok := attrs["VisibilityTimeout"].(string); ok {
			vis, _ = strconv.Atoi(v)
		}
		e := sqsEffect{Op: "create", Queue: name, Visible: vis}
		if rp, ok := attrs["RedrivePolicy"].(string); ok {
			var p struct {
				Target string `json:"deadLetterTargetArn"`
				Max    any    `json:"maxReceiveCount"`
			}
			_ = json.Unmarshal([]byte(rp), &p)
			e.DLQ = nameOfARN(p.Target)
			e.MaxRecv, _ = strconv.Atoi(fmt.Sprint(p.Max))
		}
		if s.queues[name] == nil {
			if err := s.record(e); err != nil {
				return nil, err
			}
		}
		return map[string]any{"QueueUrl": s.base + name}, nil
	case "GetQueueUrl":
		if s.queues[str("QueueName")] == nil {
			return nil, awsError{"AWS.SimpleQueueService.NonExistentQueue", "no queue " + str("QueueName")}
		}
		return map[string]any{"QueueUrl": s.base + str("QueueName")}, nil
	case "GetQueueAttributes":
		q, err := s.queueOf(str("QueueUrl"))
		if err != nil {
			return nil, err
		}
		return map[string]any{"Attributes": q.attributes(s, wanted(req["AttributeNames"]))}, nil
	case "ListQueues":
		prefix := str("QueueNamePrefix")
		var names []string
		for name := range s.queues {
			if strings.HasPrefix(name, prefix) {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		urls := make([]string, len(names))
		for i, n := range names {
			urls[i] = s.base + n
		}
		if len(urls) == 0 {
			return map[string]any{}, nil // SQS omits QueueUrls when none match
		}
		return map[string]any{"QueueUrls": urls}, nil
	case "SendMessage":
		q, err := s.queueOf(str("QueueUrl"))
		if err != nil {
			return nil, err
		}
		id, err := s.sendLocked(q, str("MessageBody"))
		if err != nil {
			return nil, err
		}
		return map[string]any{"MessageId": id, "MD5OfMessageBody": md5hex(str("MessageBody"))}, nil
	case "SendMessageBatch":
		q, err := s.queueOf(str("QueueUrl"))
		if err != nil {
			return nil, err
		}
		entries := asList(req["Entries"])
		switch {
		case len(entries) == 0:
			return nil, awsError{"AWS.SimpleQueueService.EmptyBatchRequest", "the batch has no entries"}
		case len(entries) > 10:
			return nil, awsError{"AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "at most 10 entries"}
		}
		seen := map[string]bool{}
		for _, e := range entries {
			m, _ := e.(map[string]any)
			id, _ := m["Id"].(string)
			if id == "" || seen[id] {
				return nil, awsError{"AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "entry ids must be distinct and present"}
			}
			seen[id] = true
		}
		ok, failed := []map[string]any{}, []map[string]any{}
		for _, e := range entries {
			m, _ := e.(map[string]any)
			if s.refused() {
				failed = append(failed, map[string]any{"Id": m["Id"], "SenderFault": false, "Code": "InternalError", "Message": "injected fault"})
				continue
			}
			body, _ := m["MessageBody"].(string)
			id, err := s.sendLocked(q, body)
			if err != nil {
				return nil, err
			}
			ok = append(ok, map[string]any{"Id": m["Id"], "MessageId": id, "MD5OfMessageBody": md5hex(body)})
		}
		return map[string]any{"Successful": ok, "Failed": failed}, nil
	case "DeleteMessage":
		q, err := s.queueOf(str("QueueUrl"))
		if err != nil {
			return nil, err
		}
		id, _, _ := strings.Cut(str("ReceiptHandle"), ":")
		if m := q.find(id); m != nil && m.receipt == str("ReceiptHandle") {
			if err := s.record(sqsEffect{Op: "del", Queue: q.name, ID: id}); err != nil {
				return nil, err
			}
		}
		return map[string]any{}, nil
	case "ChangeMessageVisibility":
		q, err := s.queueOf(str("QueueUrl"))
		if err != nil {
			return nil, err
		}
		id, _, _ := strings.Cut(str("ReceiptHandle"), ":")
		m := q.find(id)
		if m == nil || m.receipt != str("ReceiptHandle") {
			return nil, awsError{"ReceiptHandleIsInvalid", "stale receipt handle"}
		}
		m.visibleAt = time.Now().Add(time.Duration(num("VisibilityTimeout", 30)) * time.Second)
		return map[string]any{}, nil
	case "StartMessageMoveTask":
		src := s.queues[nameOfARN(str("SourceArn"))]
		if src == nil {
			return nil, awsError{"ResourceNotFoundException", "no queue " + str("SourceArn")}
		}
		moved := 0
		for _, m := range append([]*message{}, src.msgs...) {
			to := m.source
			if d := str("DestinationArn"); d != "" {
				to = nameOfARN(d)
			}
			if to == "" {
				continue
			}
			if err := s.record(sqsEffect{Op: "move", Queue: src.name, ID: m.id, To: to, Receives: 0}); err != nil {
				return nil, err
			}
			moved++
		}
		if s.tasks == nil {
			s.tasks = map[string][]moveTask{}
		}
		s.tasks[src.name] = append([]moveTask{{sourceARN: str("SourceArn"), moved: moved, started: time.Now()}}, s.tasks[src.name]...)
		return map[string]any{"TaskHandle": newID()}, nil
	case "ListMessageMoveTasks":
		// As SQS: newest first; a finished task has no TaskHandle.
		out := []map[string]any{}
		for i, t := range s.tasks[nameOfARN(str("SourceArn"))] {
			if i >= num("MaxResults", 1) {
				break
			}
			out = append(out, map[string]any{"Status": "COMPLETED", "SourceArn": t.sourceARN,
				"ApproximateNumberOfMessagesMoved": t.moved, "ApproximateNumberOfMessagesToMove": t.moved,
				"StartedTimestamp": t.started.UnixMilli()})
		}
		return map[string]any{"Results": out}, nil
	}
	return nil, awsError{"InvalidAction", "unsupported action " + op}
}

// wanted is the set of message system attributes a receive asks for (SQS
// returns only those: "All", or names, in either parameter).
func wanted(lists ...any) map[string]bool {
	out := map[string]bool{}
	for _, l := range lists {
		for _, v := range asList(l) {
			if name, ok := v.(string); ok {
				out[name] = true
			}
		}
	}
	return out
}

func (s *SQS) receiveCall(ctx context.Context, url string, n, wait, vis int, attrs map[string]bool) (map[string]any, error) {
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for {
		s.mu.Lock()
		q, err := s.queueOf(url)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		visibility := q.visibility
		if vis >= 0 {
			visibility = time.Duration(vis) * time.Second
		}
		msgs, err := s.receive(q, max(n, 1), visibility)
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 || !time.Now().Before(deadline) {
			out := make([]map[string]any, len(msgs))
			for i, m := range msgs {
				out[i] = map[string]any{
					"MessageId": m.id, "ReceiptHandle": m.receipt, "Body": m.body, "MD5OfBody": md5hex(m.body),
				}
				a := map[string]string{}
				for k, v := range map[string]string{
					"ApproximateReceiveCount": strconv.Itoa(m.receives), "SentTimestamp": strconv.FormatInt(m.sentAt.UnixMilli(), 10),
				} {
					if attrs["All"] || attrs[k] {
						a[k] = v
					}
				}
				if len(a) > 0 {
					out[i]["Attributes"] = a
				}
			}
			return map[string]any{"Messages": out}, nil
		}
		if !sleep(ctx, 20*time.Millisecond) {
			return map[string]any{"Messages": []any{}}, nil
		}
	}
}
