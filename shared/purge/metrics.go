package purge

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/icehold/icehold/shared/store"
)

// MetricsNamespace is the CloudWatch namespace of icehold's metrics.
const MetricsNamespace = "icehold"

// metricsMu serializes EMF lines written by concurrent steps.
var metricsMu sync.Mutex

// emit writes one CloudWatch embedded-metric-format line: in Lambda the
// line goes to stdout and CloudWatch turns it into metrics; locally it goes
// to a file in the state directory.
func (s *Service) emit(values map[string]float64) {
	if s.Metrics == nil || len(values) == 0 {
		return
	}
	var defs []map[string]string
	doc := map[string]any{}
	for name, v := range values {
		unit := "Count"
		if name == "OldestPendingAgeSeconds" {
			unit = "Seconds"
		}
		defs = append(defs, map[string]string{"Name": name, "Unit": unit})
		doc[name] = v
	}
	doc["_aws"] = map[string]any{
		"Timestamp": time.Now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace": MetricsNamespace, "Dimensions": [][]string{{}}, "Metrics": defs,
		}},
	}
	line, _ := json.Marshal(doc)
	metricsMu.Lock()
	defer metricsMu.Unlock()
	_, _ = s.Metrics.Write(append(line, '\n'))
}

// Gauges are the backlog figures the reconcile sweep publishes.
type Gauges struct {
	Pending, Running, DeadLettered int
	OldestPending                  time.Duration
}

// gauges counts the jobs that are not terminal by state.
func (s *Service) gauges(ctx context.Context) (Gauges, error) {
	var g Gauges
	token := ""
	for {
		active, next, err := s.Store.ActiveJobs(ctx, token, 100)
		if err != nil {
			return g, err
		}
		for _, a := range active {
			j, err := s.Store.GetJob(ctx, a.Catalog, a.ID)
			if err != nil {
				continue
			}
			switch j.State {
			case store.JobPending:
				g.Pending++
				if at, err := time.Parse(time.RFC3339Nano, j.CreatedAt); err == nil && time.Since(at) > g.OldestPending {
					g.OldestPending = time.Since(at)
				}
			case store.JobRunning:
				g.Running++
			case store.JobDeadLettered:
				g.DeadLettered++
			}
		}
		if next == "" {
			return g, nil
		}
		token = next
	}
}

// Writer is where EMF lines go.
type Writer = io.Writer
