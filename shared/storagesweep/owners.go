package storagesweep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/icehold/icehold/shared/store"
)

// ownerIndex is the ownership index of a bucket in memory (one query
// reads it): which claim owns an object key, the deepest claimed prefix
// above it, as store.OwnerAt answers, without a read per key.
type ownerIndex struct {
	at map[string]store.Owner
	// The last directory looked up and its answer: a report lists keys in
	// order, so consecutive rows mostly share their directory.
	dir   string
	owner store.Owner
	found bool
}

func newOwnerIndex(claims []store.Claimed) *ownerIndex {
	x := &ownerIndex{at: make(map[string]store.Owner, len(claims)), dir: "\x00"}
	for _, c := range claims {
		x.at[c.Prefix] = c.Owner
	}
	return x
}

// of returns the owner of an object key; false when no claim covers it.
func (x *ownerIndex) of(key string) (store.Owner, bool) {
	dir := key[:max(strings.LastIndexByte(key, '/'), 0)]
	if dir == x.dir {
		return x.owner, x.found
	}
	x.dir, x.found = dir, false
	for p := dir; ; {
		if o, ok := x.at[p]; ok {
			x.owner, x.found = o, true
			break
		}
		if p == "" {
			break
		}
		p = p[:max(strings.LastIndexByte(p, '/'), 0)]
	}
	return x.owner, x.found
}

// tablePage is how many tables one record of a sweep's list holds (well
// under DynamoDB's 400 KB item).
const tablePage = 500

// Why a table's files are kept whatever the sweep finds (SPEC §3).
const (
	protectLegalHold   = "legal hold"
	protectSoftDeleted = "soft-deleted"
	protectJob         = "a job in flight"
	protectUnreadable  = "metadata unreadable"
)

// listTables finds every table and view the ownership index of buckets
// names, with its claims, its current metadata file and why its files
// must be kept: legal-held (the table, a namespace above it or its
// catalog), soft-deleted, or with a job in flight (other than skip).
// Tables being purged, and forgotten ones (unregistered), own their
// claims as such: the join keeps their files from the index alone.
func (s *Service) listTables(ctx context.Context, buckets []string, skip string) ([]store.SweepTable, error) {
	st := s.Catalog.Store()
	busy, err := tablesWithJobs(ctx, st, skip)
	if err != nil {
		return nil, err
	}
	held := s.Catalog.Holds()
	seen := map[string]bool{}
	var out []store.SweepTable
	for _, b := range buckets {
		claims, err := st.ClaimsIn(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("ownership index of %s: %w", b, err)
		}
		for _, c := range claims {
			o := c.Owner
			if o.Kind == store.OwnerWarehouse || o.JobID != "" || o.Unregistered {
				continue
			}
			name := tableName(o.Catalog, o.Namespace, o.Name)
			k := name + "\x00" + strconv.FormatBool(o.SoftDeleted)
			if seen[k] {
				continue // another claim of the same table (an old location)
			}
			seen[k] = true
			if o.SoftDeleted {
				recs, err := st.SoftDeletedByName(ctx, o.Catalog, o.Namespace, o.Name)
				if err != nil {
					return nil, err
				}
				for _, r := range recs {
					out = append(out, sweepTable(o.Catalog, r.Entry, protectSoftDeleted))
				}
				continue
			}
			e, err := st.GetEntry(ctx, o.Catalog, o.Namespace, o.Name)
			if errors.Is(err, store.ErrNotFound) {
				continue // dropped since: its claim went with it
			}
			if err != nil {
				return nil, err
			}
			why := ""
			switch on, err := held.Held(ctx, o.Catalog, e.Namespace, e.LegalHold); {
			case err != nil:
				return nil, err
			case on:
				why = protectLegalHold
			case busy[name]:
				why = protectJob
			}
			out = append(out, sweepTable(o.Catalog, e, why))
		}
	}
	return out, nil
}

func sweepTable(cat string, e store.TableEntry, protected string) store.SweepTable {
	t := store.SweepTable{Catalog: cat, Namespace: e.Namespace, Name: e.Name, View: e.IsView(), Metadata: e.MetadataLocation, Protected: protected}
	for _, h := range e.Holds() {
		t.Holds = append(t.Holds, h.ID)
	}
	return t
}

func tableName(cat string, ns []string, name string) string {
	return cat + "\x00" + strings.Join(ns, "\x1f") + "\x00" + name
}

// tablesWithJobs names the tables an unfinished job works on (an expiry,
// say), but the job skip (the sweep itself).
func tablesWithJobs(ctx context.Context, st *store.Store, skip string) (map[string]bool, error) {
	out := map[string]bool{}
	token := ""
	for {
		page, next, err := st.ActiveJobs(ctx, token, 100)
		if err != nil {
			return nil, err
		}
		for _, a := range page {
			if a.ID == skip {
				continue
			}
			j, err := st.GetJob(ctx, a.Catalog, a.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if j.Table != "" && j.Kind != store.KindSweep && !store.Terminal(j.State) {
				out[tableName(j.Catalog, j.Namespace, j.Table)] = true
			}
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}

// isMetadataFile: metadata files (and Hadoop tables' version hints) are
// always kept: icehold writes them, its own orphan sweep removes the
// ones a lost commit left, and every other belongs to a metadata log.
func isMetadataFile(key string) bool {
	base := key[strings.LastIndexByte(key, '/')+1:]
	return strings.HasSuffix(base, ".metadata.json") || strings.HasSuffix(base, ".metadata.json.gz") ||
		strings.HasSuffix(base, ".gz.metadata.json") || base == "version-hint.text"
}

// sortTables orders a sweep's tables for its records (deterministic, so a
// retried step writes the same pages).
func sortTables(ts []store.SweepTable) {
	slices.SortFunc(ts, func(a, b store.SweepTable) int {
		return strings.Compare(tableName(a.Catalog, a.Namespace, a.Name)+a.Metadata, tableName(b.Catalog, b.Namespace, b.Name)+b.Metadata)
	})
}
