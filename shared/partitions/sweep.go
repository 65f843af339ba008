package partitions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

// The retention sweep (SPEC §5): on a schedule, every table with a policy
// drops its expired partitions through Drop. Bounded per run (a number of
// tables, and a margin before the invocation's deadline); a cursor in the
// store carries the walk over to the next run, so thousands of policies
// are worked through run by run.

// DefaultSweepTables bounds the policies one run looks at.
const DefaultSweepTables = 200

// sweepMargin: a run stops this long before its context's deadline.
const sweepMargin = 10 * time.Second

// SweepResult reports one run.
type SweepResult struct {
	// Tables is how many policies the run looked at; Dropped how many of
	// their tables got a drop committed.
	Tables           int   `json:"tables"`
	Dropped          int   `json:"dropped"`
	DataFilesEnded   int64 `json:"data-files-ended"`
	DeleteFilesEnded int64 `json:"delete-files-ended"`
	// Skipped and Failed: "<catalog>.<table>: why" (a failed table is
	// tried again next time round; the run goes on).
	Skipped []string `json:"skipped,omitempty"`
	Failed  []string `json:"failed,omitempty"`
	// SnapshotsExpired and FilesToDelete: what snapshot expiry removed and
	// sent to the delete pipeline, in ExpireJobs (jobs of kind expire).
	SnapshotsExpired int      `json:"snapshots-expired"`
	FilesToDelete    int      `json:"files-to-delete"`
	ExpireJobs       []string `json:"expire-jobs,omitempty"`
	// More: the run stopped before the end of the policies.
	More bool `json:"more"`
}

// SweepRetention runs one bounded pass from where the last one stopped.
func (s *Service) SweepRetention(ctx context.Context, now time.Time, maxTables int) (SweepResult, error) {
	if maxTables <= 0 {
		maxTables = DefaultSweepTables
	}
	st := s.Catalog.Store()
	var res SweepResult
	cursor, err := st.RetentionCursor(ctx)
	if err != nil {
		return res, err
	}
	deadline, hasDeadline := ctx.Deadline()
	wrapped := false
	for res.Tables < maxTables {
		if hasDeadline && time.Until(deadline) < sweepMargin {
			break
		}
		// One more than the run takes: whether the walk goes on.
		want := min(100, maxTables-res.Tables)
		page, _, err := st.ListRetention(ctx, cursor, want+1)
		if err != nil {
			return res, err
		}
		more := len(page) > want
		if more {
			page = page[:want]
		}
		if len(page) == 0 {
			if cursor != "" && res.Tables == 0 && !wrapped {
				cursor, wrapped = "", true // the walk ended at the last policy: start over
				continue
			}
			cursor = ""
			break
		}
		for _, r := range page {
			if s.applyRetention(ctx, r, now, &res) {
				s.expire(ctx, r, now, &res)
			}
			res.Tables++
			cursor = r.Position()
		}
		if !more {
			cursor = "" // the end: the next run starts over
			break
		}
	}
	res.More = cursor != ""
	return res, st.SetRetentionCursor(ctx, cursor)
}

// expire expires the snapshots of a table the sweep found (after its drop,
// so that a drop's files go once its snapshot's predecessors age out).
func (s *Service) expire(ctx context.Context, r store.Retention, now time.Time, res *SweepResult) {
	x, err := s.ExpireSnapshots(ctx, r.Catalog, catalog.Ident{Namespace: r.Namespace, Name: r.Name}, r.TableUUID, now)
	if err != nil {
		res.Failed = append(res.Failed, r.Catalog+"."+catalog.Ident{Namespace: r.Namespace, Name: r.Name}.String()+": "+err.Error())
		return
	}
	res.SnapshotsExpired += x.Snapshots
	res.FilesToDelete += x.Files
	if x.Job != "" {
		res.ExpireJobs = append(res.ExpireJobs, x.Job)
	}
}

// applyRetention drops one table's expired partitions. It reports whether
// the table is the policy's (found, same generation): snapshot expiry
// follows then, whatever the drop did.
func (s *Service) applyRetention(ctx context.Context, r store.Retention, now time.Time, res *SweepResult) bool {
	id := catalog.Ident{Namespace: r.Namespace, Name: r.Name}
	name := r.Catalog + "." + id.String()
	skip := func(why string) { res.Skipped = append(res.Skipped, name+": "+why) }
	fail := func(err error) { res.Failed = append(res.Failed, name+": "+err.Error()) }
	entry, err := s.Catalog.Entry(ctx, r.Catalog, id)
	switch {
	case errors.Is(err, catalog.ErrNoSuchTable), errors.Is(err, catalog.ErrNoSuchNamespace):
		skip("no such table")
		return false
	case err != nil:
		fail(err)
		return false
	case entry.TableUUID != r.TableUUID:
		skip("the policy was set on table uuid " + r.TableUUID + ", the name now holds " + entry.TableUUID)
		return false
	}
	meta, err := s.Catalog.ReadMetadata(ctx, entry.MetadataLocation)
	if err != nil {
		fail(err)
		return false
	}
	spec := meta.PartitionSpec()
	tf, err := resolveTimeField(meta, spec, r.Field)
	if err != nil {
		skip(err.Error())
		return true
	}
	keep, err := parseKeep(r.Keep)
	if err != nil {
		skip(err.Error())
		return true
	}
	cutoff := tf.cutoff(now, keep)
	cutoffText := cutoff.Format(time.RFC3339)
	key := "retention:" + r.TableUUID + ":" + cutoffText
	applied := func() {
		if err := s.Catalog.Store().MarkRetentionApplied(ctx, r, cutoffText, now.UTC().Format(time.RFC3339)); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			fail(err)
		}
	}
	cur := meta.CurrentSnapshot()
	if cur == nil {
		applied()
		return true
	}
	if p := cur.Summary; p != nil && p.Properties[PropIdempotencyKey] == key && p.Properties[propComplete] == "true" {
		applied() // this cutoff's drop is the current snapshot: nothing new
		return true
	}
	tuples, err := s.expiredTuples(ctx, meta, cur, spec, tf, cutoff)
	if err != nil {
		fail(err)
		return true
	}
	fields := specFields(meta, spec)
	dropped := false // any chunk committed: the table counts once
	defer func() {
		if dropped {
			res.Dropped++
		}
	}()
	for start := 0; start < len(tuples); start += MaxTuples {
		chunk := tuples[start:min(start+MaxTuples, len(tuples))]
		req := DropRequest{Partitions: make([]map[string]json.RawMessage, len(chunk)), ExpectedTableUUID: r.TableUUID}
		for i, t := range chunk {
			req.Partitions[i] = jsonTuple(t, fields)
		}
		extra := map[string]string{PropRetentionCutoff: cutoffText, PropIdempotencyKey: key}
		if start+MaxTuples >= len(tuples) {
			extra[propComplete] = "true"
		}
		d, err := s.drop(ctx, r.Catalog, id, req, extra)
		if err != nil {
			fail(err)
			return true
		}
		if d.Committed {
			res.DataFilesEnded += d.DataFilesEnded
			res.DeleteFilesEnded += d.DeleteFilesEnded
			dropped = true
		}
	}
	applied()
	return true
}

// jsonTuple writes a tuple back in the JSON single-value form Drop reads.
func jsonTuple(t tuple, fields []field) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(fields))
	for i, f := range fields {
		out[f.name], _ = json.Marshal(formatValue(t.values[i], f.typ))
	}
	return out
}

// expiredTuples lists the distinct partition tuples of the current spec
// whose retention field is expired and that hold a live file, oldest first.
func (s *Service) expiredTuples(ctx context.Context, meta table.Metadata, cur *table.Snapshot, spec iceberg.PartitionSpec, tf timeField, cutoff time.Time) ([]tuple, error) {
	fs, err := icebergio.LoadFS(ctx, s.IOProps, meta.Location())
	if err != nil {
		return nil, fmt.Errorf("file io: %w", err)
	}
	fields := specFields(meta, spec)
	var mu sync.Mutex
	all := map[string]tuple{}
	err = s.eachExpired(ctx, fs, cur, spec, tf, cutoff, func(df iceberg.DataFile, _ norm) error {
		part := df.Partition()
		values := make([]norm, len(fields))
		for j, f := range fields {
			var err error
			if values[j], err = normalize(part[f.id]); err != nil {
				return fmt.Errorf("%s: %w", df.FilePath(), err)
			}
		}
		k := tupleKey(values)
		mu.Lock()
		all[k] = tuple{values: values, key: k}
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]tuple, 0, len(all))
	for _, t := range all {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b tuple) int {
		ea, _ := tf.end(a.values[tf.pos])
		eb, _ := tf.end(b.values[tf.pos])
		if c := ea.Compare(eb); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return out, nil
}

// eachExpired calls fn (from several goroutines) for every live file of the
// snapshot, of the spec, whose retention field is expired at cutoff. It
// reads only the manifests whose summary lower bound on the field is
// expired: the others cannot hold an expired value.
func (s *Service) eachExpired(ctx context.Context, fs icebergio.IO, cur *table.Snapshot, spec iceberg.PartitionSpec, tf timeField, cutoff time.Time, fn func(iceberg.DataFile, norm) error) error {
	list, err := cur.Manifests(fs)
	if err != nil {
		return missing("manifest list", cur.ManifestList, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.workers())
	for _, m := range list {
		if int(m.PartitionSpecID()) != spec.ID() || (!m.HasAddedFiles() && !m.HasExistingFiles()) || !mayHoldExpired(m, tf, cutoff) {
			continue
		}
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			for e, err := range m.Entries(fs, true) {
				if err != nil {
					return missing("manifest", m.FilePath(), err)
				}
				v, err := normalize(e.DataFile().Partition()[tf.id])
				if err != nil || !tf.expired(v, cutoff) {
					continue
				}
				if err := fn(e.DataFile(), v); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// mayHoldExpired: the manifest's smallest value of the field (its summary's
// lower bound) is expired; without a usable summary, perhaps.
func mayHoldExpired(m iceberg.ManifestFile, tf timeField, cutoff time.Time) bool {
	sums := m.Partitions()
	if tf.pos >= len(sums) {
		return true
	}
	lb := sums[tf.pos].LowerBound
	if lb == nil {
		return false // only nulls: no time to expire
	}
	lit, err := iceberg.LiteralFromBytes(tf.typ, *lb)
	if err != nil {
		return true
	}
	v, err := normalize(lit.Any())
	if err != nil {
		return true
	}
	return tf.expired(v, cutoff)
}

func (s *Service) workers() int {
	if s.Workers > 0 {
		return s.Workers
	}
	return 8
}
