// Package eventbus publishes icehold's lifecycle events (SPEC §4: table and
// purge events with actor, catalog, identifier, table uuid, time and ids) to
// an EventBridge bus; locally the same calls land in a JSON-lines log.
package eventbus

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// Event types.
const (
	TableSoftDeleted        = "TableSoftDeleted"
	TableUndropped          = "TableUndropped"
	LegalHoldChanged        = "LegalHoldChanged"
	TablePermanentlyDeleted = "TablePermanentlyDeleted"
	PurgeStarted            = "PurgeStarted"
	PurgeCompleted          = "PurgeCompleted"
	PurgeDeadLettered       = "PurgeDeadLettered"
	PurgeFailed             = "PurgeFailed"
	// A view's lifecycle (its events carry detail kind "view", as do the
	// LegalHoldChanged and Purge* events of a view).
	ViewSoftDeleted        = "ViewSoftDeleted"
	ViewUndropped          = "ViewUndropped"
	ViewPermanentlyDeleted = "ViewPermanentlyDeleted"
)

// Source is the EventBridge source of every icehold event.
const Source = "icehold"

// PutEvents is the EventBridge call the bus makes; *eventbridge.Client and
// JSONLines satisfy it.
type PutEvents interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Event is one lifecycle event's detail. ID identifies it across
// redeliveries: the outbox delivers at least once, so a consumer dedupes on
// event-id.
type Event struct {
	ID        string         `json:"event-id"`
	Type      string         `json:"-"`
	Actor     string         `json:"actor,omitempty"`
	Catalog   string         `json:"catalog"`
	Namespace []string       `json:"namespace"`
	Table     string         `json:"table"`
	TableUUID string         `json:"table-uuid"`
	JobID     string         `json:"job-id,omitempty"`
	Time      time.Time      `json:"time"`
	Detail    map[string]any `json:"detail,omitempty"`
}

// Bus publishes to one event bus.
type Bus struct {
	api  PutEvents
	name string
}

// New returns a bus; a nil *Bus publishes nothing.
func New(api PutEvents, busName string) *Bus { return &Bus{api: api, name: busName} }

// Publish sends one event.
func (b *Bus) Publish(ctx context.Context, e Event) error {
	if b == nil || b.api == nil {
		return nil
	}
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	detail, err := json.Marshal(e)
	if err != nil {
		return err
	}
	out, err := b.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
		EventBusName: aws.String(b.name), Source: aws.String(Source), DetailType: aws.String(e.Type),
		Detail: aws.String(string(detail)), Time: aws.Time(e.Time),
	}}})
	if err != nil {
		return fmt.Errorf("publish %s: %w", e.Type, err)
	}
	if out.FailedEntryCount > 0 {
		return fmt.Errorf("publish %s: %s", e.Type, aws.ToString(out.Entries[0].ErrorMessage))
	}
	return nil
}

// JSONLines is the local event bus: every entry becomes one JSON line
// {"detail-type", "source", "bus", "detail"}. An event whose event-id it
// has written already (a redelivery) is not written again.
type JSONLines struct {
	mu   sync.Mutex
	W    io.Writer
	seen map[string]bool
}

// NewJSONLines returns the local bus appending to w; past holds the lines
// written before (the log of an earlier run), whose event ids count as seen.
func NewJSONLines(w io.Writer, past io.Reader) *JSONLines {
	j := &JSONLines{W: w, seen: map[string]bool{}}
	if past != nil {
		sc := bufio.NewScanner(past)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var line struct {
				Detail struct {
					ID string `json:"event-id"`
				} `json:"detail"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Detail.ID != "" {
				j.seen[line.Detail.ID] = true
			}
		}
	}
	return j
}

// PutEvents writes the entries.
func (j *JSONLines) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range in.Entries {
		var d struct {
			ID string `json:"event-id"`
		}
		if json.Unmarshal([]byte(aws.ToString(e.Detail)), &d) == nil && d.ID != "" {
			if j.seen[d.ID] {
				continue
			}
			if j.seen == nil {
				j.seen = map[string]bool{}
			}
			j.seen[d.ID] = true
		}
		line, _ := json.Marshal(map[string]any{
			"detail-type": aws.ToString(e.DetailType), "source": aws.ToString(e.Source),
			"bus": aws.ToString(e.EventBusName), "detail": json.RawMessage(aws.ToString(e.Detail)),
		})
		if _, err := j.W.Write(append(line, '\n')); err != nil {
			return nil, err
		}
	}
	return &eventbridge.PutEventsOutput{Entries: make([]ebtypes.PutEventsResultEntry, len(in.Entries))}, nil
}
