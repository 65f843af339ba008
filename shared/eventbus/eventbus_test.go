package eventbus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/icehold/icehold/shared/eventbus"
)

// The EventBridge adapter through the SDK against stubbed answers: each
// event is one entry on the bus (source icehold, the type as detail-type,
// the documented fields in the detail), and a failed entry is an error.
func TestPublishToEventBridge(t *testing.T) {
	var got []map[string]any
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" {
			t.Errorf("call %s", r.Header.Get("X-Amz-Target"))
		}
		var in struct {
			Entries []map[string]any
		}
		body, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(body, &in)
		got = append(got, in.Entries...)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if fail {
			_, _ = io.WriteString(w, `{"FailedEntryCount":1,"Entries":[{"ErrorCode":"InternalFailure","ErrorMessage":"try again"}]}`)
			return
		}
		_, _ = io.WriteString(w, `{"FailedEntryCount":0,"Entries":[{"EventId":"e-1"}]}`)
	}))
	defer srv.Close()
	client := eventbridge.New(eventbridge.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	bus := eventbus.New(client, "icehold-lifecycle")
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	types := []string{eventbus.TableSoftDeleted, eventbus.TableUndropped, eventbus.LegalHoldChanged, eventbus.TablePermanentlyDeleted}
	for _, typ := range types {
		err := bus.Publish(context.Background(), eventbus.Event{Type: typ, Actor: "arn:aws:sts::1:assumed-role/etl/s", Catalog: "prod",
			Namespace: []string{"sales"}, Table: "orders", TableUUID: "u-1", Time: at, Detail: map[string]any{"legal-hold": true}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(types) {
		t.Fatalf("%d entries, want %d", len(got), len(types))
	}
	for i, e := range got {
		if e["Source"] != "icehold" || e["DetailType"] != types[i] || e["EventBusName"] != "icehold-lifecycle" {
			t.Errorf("entry %d: %v", i, e)
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(e["Detail"].(string)), &d); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"actor", "catalog", "namespace", "table", "table-uuid", "time"} {
			if d[k] == nil || d[k] == "" {
				t.Errorf("%s: detail lacks %s: %v", types[i], k, d)
			}
		}
	}
	fail = true
	if err := bus.Publish(context.Background(), eventbus.Event{Type: eventbus.TableSoftDeleted, Catalog: "prod"}); err == nil || !strings.Contains(err.Error(), "try again") {
		t.Errorf("a failed entry: %v", err)
	}
}

// The local bus writes an event id once: a redelivery in this run or of an
// event an earlier run logged adds no line.
func TestJSONLinesDedupesByEventID(t *testing.T) {
	ctx := context.Background()
	var first bytes.Buffer
	bus := eventbus.New(eventbus.NewJSONLines(&first, nil), "icehold")
	for _, id := range []string{"a", "b", "a"} {
		if err := bus.Publish(ctx, eventbus.Event{ID: id, Type: "PurgeStarted", Catalog: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(first.String(), "\n"); n != 2 {
		t.Fatalf("%d lines for events a, b, a:\n%s", n, first.String())
	}
	var second bytes.Buffer
	bus = eventbus.New(eventbus.NewJSONLines(&second, strings.NewReader(first.String())), "icehold")
	for _, id := range []string{"b", "c"} {
		if err := bus.Publish(ctx, eventbus.Event{ID: id, Type: "PurgeCompleted", Catalog: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(second.String(), `"event-id":"c"`) || strings.Contains(second.String(), `"event-id":"b"`) {
		t.Errorf("after a restart, b was logged again or c was not:\n%s", second.String())
	}
}
