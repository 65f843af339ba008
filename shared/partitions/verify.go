package partitions

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// Verify (SPEC §5) checks a table's invariants: its metadata pointer is
// readable, no live file lies in a partition its retention policy has
// already dropped, nothing its metadata reaches lies outside the location
// it owns, and every file its retained snapshots reference is there as the
// metadata records it (integrity.go).

// Check names.
const (
	CheckMetadata  = "metadata-readable"
	CheckRetention = "retention-window"
	CheckLocation  = "files-inside-location"
)

// maxExamples bounds the offending paths a check lists.
const maxExamples = 10

// MaxVerifyManifests bounds the manifests one verify reads (the API
// answers within API Gateway's 29 s); past it the location check says it
// is incomplete.
const MaxVerifyManifests = 5000

// Check is one invariant's outcome.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
	// Violations counts offending files; Examples lists some.
	Violations int64    `json:"violations,omitempty"`
	Examples   []string `json:"examples,omitempty"`
	// Incomplete: the check stopped at a bound before seeing everything.
	Incomplete bool `json:"incomplete,omitempty"`
}

// Report is the answer of verify.
type Report struct {
	OK               bool    `json:"ok"`
	TableUUID        string  `json:"table-uuid,omitempty"`
	MetadataLocation string  `json:"metadata-location,omitempty"`
	Checks           []Check `json:"checks"`
}

// Verify runs the checks; a failed check is part of the report, not an
// error (errors are for a table that does not exist, or the store).
func (s *Service) Verify(ctx context.Context, cat string, id catalog.Ident) (Report, error) {
	entry, err := s.Catalog.Entry(ctx, cat, id)
	if err != nil {
		return Report{}, err
	}
	rep := Report{TableUUID: entry.TableUUID, MetadataLocation: entry.MetadataLocation}
	meta, err := s.Catalog.ReadMetadata(ctx, entry.MetadataLocation)
	if err != nil {
		rep.Checks = append(rep.Checks, Check{Name: CheckMetadata, Detail: err.Error()})
		return rep, nil
	}
	rep.Checks = append(rep.Checks, Check{Name: CheckMetadata, OK: true, Detail: fmt.Sprintf("format version %d, %d snapshots", meta.Version(), len(meta.Snapshots()))})
	fs, err := icebergio.LoadFS(ctx, s.IOProps, meta.Location())
	if err != nil {
		return rep, fmt.Errorf("file io: %w", err)
	}
	rep.Checks = append(rep.Checks, s.checkRetention(ctx, cat, id, meta, fs), s.checkLocation(ctx, entry, meta, fs), s.checkFiles(ctx, entry, meta, fs))
	rep.OK = true
	for _, c := range rep.Checks {
		rep.OK = rep.OK && c.OK
	}
	return rep, nil
}

// checkRetention: no live file of the current snapshot in a partition the
// policy's sweep has already dropped (its applied cutoff). A file there got
// in after the sweep, past the policy (or the sweep is failing).
func (s *Service) checkRetention(ctx context.Context, cat string, id catalog.Ident, meta table.Metadata, fs icebergio.IO) Check {
	c := Check{Name: CheckRetention}
	r, err := s.Catalog.Store().GetRetention(ctx, cat, id.Namespace, id.Name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		c.OK, c.Detail = true, "no retention policy"
		return c
	case err != nil:
		c.Detail = err.Error()
		return c
	case r.TableUUID != meta.TableUUID().String():
		c.Detail = "the policy was set on table uuid " + r.TableUUID + ", not this table: set it again"
		return c
	}
	spec := meta.PartitionSpec()
	tf, err := resolveTimeField(meta, spec, r.Field)
	if err != nil {
		c.Detail = "policy field: " + err.Error()
		return c
	}
	if r.AppliedCutoff == "" {
		c.OK, c.Detail = true, fmt.Sprintf("policy %s keep %s not applied by a sweep yet", r.Field, r.Keep)
		return c
	}
	cutoff, err := time.Parse(time.RFC3339, r.AppliedCutoff)
	if err != nil {
		c.Detail = "applied cutoff: " + err.Error()
		return c
	}
	c.Detail = fmt.Sprintf("policy %s keep %s, applied with cutoff %s at %s", r.Field, r.Keep, r.AppliedCutoff, r.AppliedAt)
	cur := meta.CurrentSnapshot()
	if cur == nil {
		c.OK = true
		return c
	}
	var mu sync.Mutex
	err = s.eachExpired(ctx, fs, cur, spec, tf, cutoff, func(df iceberg.DataFile, v norm) error {
		mu.Lock()
		defer mu.Unlock()
		c.Violations++
		if len(c.Examples) < maxExamples {
			c.Examples = append(c.Examples, fmt.Sprintf("%s (%s=%v)", df.FilePath(), tf.name, formatValue(v, tf.typ)))
		}
		return nil
	})
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	c.OK = c.Violations == 0
	sort.Strings(c.Examples)
	return c
}

// checkLocation: every file the metadata reaches (its own file, statistics,
// manifest lists, manifests and their entries of any status) lies under
// a location the table owns (its claims, old locations its snapshots
// reach included; its metadata's location when it has none).
func (s *Service) checkLocation(ctx context.Context, entry store.TableEntry, meta table.Metadata, fs icebergio.IO) Check {
	c := Check{Name: CheckLocation}
	owned := []string{meta.Location()}
	if hs := entry.Holds(); len(hs) > 0 {
		owned = owned[:0]
		for _, h := range hs {
			owned = append(owned, h.URI())
		}
	}
	var scopes []objects.Location
	for _, o := range owned {
		l, err := objects.Prefix(o)
		if err != nil {
			c.Detail = fmt.Sprintf("location %s: %v", o, err)
			return c
		}
		scopes = append(scopes, l)
	}
	c.Detail = "inside " + strings.Join(owned, "/, ") + "/"
	var mu sync.Mutex
	outside := func(p string) {
		l, err := objects.Parse(p)
		for _, scope := range scopes {
			if err == nil && scope.Contains(l) {
				return
			}
		}
		mu.Lock()
		defer mu.Unlock()
		c.Violations++
		if len(c.Examples) < maxExamples {
			c.Examples = append(c.Examples, p)
		}
	}
	// Not the metadata log: it is history no reader opens, and a moved
	// table holds no prefix for it (docs/design/store.md, Old locations).
	outside(entry.MetadataLocation)
	for st := range meta.Statistics() {
		outside(st.StatisticsPath)
	}
	for st := range meta.PartitionStatistics() {
		outside(st.StatisticsPath)
	}
	seen := map[string]bool{}
	var manifests []iceberg.ManifestFile
	for _, sn := range meta.Snapshots() {
		if sn.ManifestList == "" {
			continue
		}
		outside(sn.ManifestList)
		list, err := sn.Manifests(fs)
		if err != nil {
			c.Detail = fmt.Sprintf("manifest list %s: %v", sn.ManifestList, err)
			return c
		}
		for _, m := range list {
			if !seen[m.FilePath()] {
				seen[m.FilePath()] = true
				outside(m.FilePath())
				manifests = append(manifests, m)
			}
		}
	}
	if len(manifests) > MaxVerifyManifests {
		manifests, c.Incomplete = manifests[:MaxVerifyManifests], true
		c.Detail += fmt.Sprintf("; read the first %d of %d manifests", MaxVerifyManifests, len(seen))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.workers())
	for _, m := range manifests {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			for e, err := range m.Entries(fs, false) {
				if err != nil {
					return fmt.Errorf("manifest %s: %w", m.FilePath(), err)
				}
				outside(e.DataFile().FilePath())
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		c.Detail = err.Error()
		return c
	}
	c.OK = c.Violations == 0
	sort.Strings(c.Examples)
	return c
}
