package awstest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"
)

// SerialDynamoDB is a proxy to an AWS endpoint that lets one DynamoDB
// request at a time through, and makes a DynamoDB answer cut in transit
// whole again; every other service's requests pass concurrently, as they
// come.
//
// Why one at a time: moto 5.2's DynamoDB is not isolated under concurrent
// requests (its server is threaded, its backend takes no lock).
// TransactWriteItems checks every condition, then writes, and on a
// cancellation restores a copy of the whole table taken at its start, so
// two racing transactions can both pass their conditions, and a cancelled
// one can erase writes made meanwhile by others. DynamoDB documents
// transactions as serializable against every other write (docs/design/local.md,
// "Fidelity: moto and the AWS CLI"). One request at a time restores that
// guarantee, so a lost race in the store's contract tests is icehold's bug,
// never moto's.
//
// Why whole answers: on a loaded machine moto's development server cuts an
// answer now and then (the SDK reads "unexpected EOF", the proxy "use of
// closed network connection"); a test then fails on a transport fault no
// DynamoDB client is asked to bear for a request DynamoDB answered. The
// proxy reads each answer whole before passing it on, and on a cut:
//   - a read is sent again;
//   - a write is judged by the items it writes, read before it is sent and
//     again after the cut (one request at a time, and each test's tables
//     are its own, so nothing else changed them): unchanged, it is sent
//     again, and meets the state the first try met; changed, it took
//     effect, and the proxy answers as DynamoDB would have, its
//     ReturnValues taken from the two readings.
func SerialDynamoDB(target *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(target)
	// Long polls (SQS WaitTimeSeconds) and large S3 bodies pass as they come.
	proxy.FlushInterval = -1
	// A fresh connection per request: moto's threaded development server
	// closes kept-alive connections under load while a response body is
	// still being read.
	proxy.Transport = &http.Transport{Proxy: nil, DisableKeepAlives: true}
	d := &serialDynamo{target: target, keys: map[string][]string{},
		client: &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_") {
			proxy.ServeHTTP(w, r)
			return
		}
		d.serve(w, r)
	})
}

// maxCuts bounds how often one request's answer may be cut before the proxy
// gives up (and answers 502).
const maxCuts = 5

type serialDynamo struct {
	target *url.URL
	client *http.Client
	mu     sync.Mutex          // one DynamoDB request at a time; guards keys
	keys   map[string][]string // table → key attribute names
}

// answer is an upstream answer read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (d *serialDynamo) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx := r.Context()
	var before []image
	if itemWrites[op] {
		if before, err = d.images(ctx, r.Header, op, body); err != nil {
			http.Error(w, "serial proxy: the items before the write: "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	for cut := 0; ; cut++ {
		ans, err := d.send(ctx, r.Header, body)
		if err == nil {
			ans.writeTo(w)
			return
		}
		if ctx.Err() != nil {
			return // the client left
		}
		if cut == maxCuts {
			http.Error(w, fmt.Sprintf("serial proxy: %s cut %d times: %v", op, cut+1, err), http.StatusBadGateway)
			return
		}
		if before != nil {
			after, ierr := d.images(ctx, r.Header, op, body)
			if ierr == nil && !sameImages(before, after) {
				log.Printf("awstest.SerialDynamoDB: the answer to %s was cut (%v); it took effect: answering as DynamoDB would have", op, err)
				applied(op, body, before, after).writeTo(w)
				return
			}
			if ierr != nil {
				err = fmt.Errorf("%w; the items after it: %v", err, ierr)
			}
		}
		log.Printf("awstest.SerialDynamoDB: the answer to %s was cut (%v): sending it again", op, err)
		time.Sleep(time.Duration(cut+1) * 50 * time.Millisecond)
	}
}

// send forwards one request and reads its answer whole.
func (d *serialDynamo) send(ctx context.Context, h http.Header, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.target.String(), bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	for k, vs := range h {
		if k != "Connection" && k != "Content-Length" && k != "Accept-Encoding" {
			req.Header[k] = vs
		}
	}
	res, err := d.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}, nil
}

func (a answer) writeTo(w http.ResponseWriter) {
	for k, vs := range a.header {
		if k != "Connection" && k != "Content-Length" && k != "Transfer-Encoding" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// itemWrites are the writes judged by their items; any other call (reads,
// tables' creation and settings) is sent again after a cut.
var itemWrites = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "TransactWriteItems": true, "BatchWriteItem": true}

// image is one item a write touches, as read before or after it (nil: none).
type image struct {
	table string
	key   map[string]any
	item  map[string]any
}

// writtenKeys are the (table, key) pairs a write touches.
func (d *serialDynamo) writtenKeys(ctx context.Context, h http.Header, op string, body []byte) ([]image, error) {
	var req struct {
		TableName     string
		Key, Item     map[string]any
		TransactItems []map[string]struct {
			TableName string
			Key, Item map[string]any
		}
		RequestItems map[string][]struct {
			PutRequest    *struct{ Item map[string]any }
			DeleteRequest *struct{ Key map[string]any }
		}
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	var out []image
	add := func(table string, key, item map[string]any) error {
		if key == nil {
			names, err := d.keyNames(ctx, h, table)
			if err != nil {
				return err
			}
			key = map[string]any{}
			for _, n := range names {
				key[n] = item[n]
			}
		}
		out = append(out, image{table: table, key: key})
		return nil
	}
	var err error
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		err = add(req.TableName, req.Key, req.Item)
	case "TransactWriteItems":
		for _, ti := range req.TransactItems {
			for kind, x := range ti {
				if kind != "ConditionCheck" && err == nil {
					err = add(x.TableName, x.Key, x.Item)
				}
			}
		}
	case "BatchWriteItem":
		for table, reqs := range req.RequestItems {
			for _, wr := range reqs {
				switch {
				case err != nil:
				case wr.PutRequest != nil:
					err = add(table, nil, wr.PutRequest.Item)
				case wr.DeleteRequest != nil:
					err = add(table, wr.DeleteRequest.Key, nil)
				}
			}
		}
	}
	return out, err
}

// images reads, consistently, every item a write touches.
func (d *serialDynamo) images(ctx context.Context, h http.Header, op string, body []byte) ([]image, error) {
	keys, err := d.writtenKeys(ctx, h, op, body)
	if err != nil {
		return nil, err
	}
	for i := range keys {
		var got struct{ Item map[string]any }
		if err := d.call(ctx, h, "GetItem", map[string]any{"TableName": keys[i].table, "Key": keys[i].key, "ConsistentRead": true}, &got); err != nil {
			return nil, err
		}
		keys[i].item = got.Item
	}
	return keys, nil
}

// keyNames are a table's key attributes (DescribeTable, once).
func (d *serialDynamo) keyNames(ctx context.Context, h http.Header, table string) ([]string, error) {
	if names, ok := d.keys[table]; ok {
		return names, nil
	}
	var desc struct {
		Table struct {
			KeySchema []struct{ AttributeName string }
		}
	}
	if err := d.call(ctx, h, "DescribeTable", map[string]any{"TableName": table}, &desc); err != nil {
		return nil, err
	}
	var names []string
	for _, k := range desc.Table.KeySchema {
		names = append(names, k.AttributeName)
	}
	d.keys[table] = names
	return names, nil
}

// call is one read of the proxy's own (sent again while cut), with the
// client's credentials headers (moto checks no signature).
func (d *serialDynamo) call(ctx context.Context, h http.Header, op string, in, out any) error {
	body, _ := json.Marshal(in)
	hdr := http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amz-Target": {"DynamoDB_20120810." + op},
		"Authorization": h["Authorization"], "X-Amz-Date": h["X-Amz-Date"]}
	var err error
	for cut := 0; cut <= maxCuts; cut++ {
		var ans answer
		if ans, err = d.send(ctx, hdr, body); err != nil {
			continue
		}
		if ans.status != http.StatusOK {
			return fmt.Errorf("%s: %d %s", op, ans.status, ans.body)
		}
		return decode(ans.body, out)
	}
	return err
}

func decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

func sameImages(a, b []image) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !reflect.DeepEqual(a[i].item, b[i].item) {
			return false
		}
	}
	return true
}

// applied is DynamoDB's answer to a write that took effect: ReturnValues
// from the items before (ALL_OLD, UPDATED_OLD) and after (ALL_NEW,
// UPDATED_NEW) it.
func applied(op string, body []byte, before, after []image) answer {
	out := map[string]any{}
	var req struct{ ReturnValues string }
	_ = decode(body, &req)
	if op == "PutItem" || op == "UpdateItem" || op == "DeleteItem" {
		old, cur := before[0].item, after[0].item
		var attrs map[string]any
		switch req.ReturnValues {
		case "ALL_OLD":
			attrs = old
		case "ALL_NEW":
			attrs = cur
		case "UPDATED_OLD", "UPDATED_NEW":
			from, other := cur, old
			if req.ReturnValues == "UPDATED_OLD" {
				from, other = old, cur
			}
			attrs = map[string]any{}
			for k, v := range from {
				if !reflect.DeepEqual(v, other[k]) {
					attrs[k] = v
				}
			}
		}
		if len(attrs) > 0 {
			out["Attributes"] = attrs
		}
	}
	if op == "BatchWriteItem" {
		out["UnprocessedItems"] = map[string]any{}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(errors.New("serial proxy: " + err.Error()))
	}
	return answer{status: http.StatusOK, header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, body: b}
}
