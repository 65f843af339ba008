package catalog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/icehold/icehold/shared/store"
)

// TeardownReport is what deleting the stack would strand (docs/operations.md,
// Teardown): jobs that have not ended, whose queues and state machine go with
// the stack while their records and files stay, and soft-deleted tables and
// views, which the hold-expiry schedule (gone too) would never purge.
// Legal-held soft-deleted tables are listed apart: they must stay, and the
// retained table and bucket keep them, so they strand nothing.
type TeardownReport struct {
	Jobs        []string `json:"unfinished-jobs"`
	SoftDeleted []string `json:"soft-deleted"`
	Held        []string `json:"legal-held"`
}

// Empty: nothing would be stranded.
func (r TeardownReport) Empty() bool { return len(r.Jobs)+len(r.SoftDeleted) == 0 }

// Teardown reads, across catalogs, what a teardown would strand.
func (s *Service) Teardown(ctx context.Context) (TeardownReport, error) {
	rep := TeardownReport{Jobs: []string{}, SoftDeleted: []string{}, Held: []string{}}
	for token := ""; ; {
		page, next, err := s.store.ActiveJobs(ctx, token, 100)
		if err != nil {
			return rep, fmt.Errorf("list unfinished jobs: %w", err)
		}
		for _, a := range page {
			j, err := s.store.GetJob(ctx, a.Catalog, a.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue // an index item whose job is gone strands nothing
			}
			if err != nil {
				return rep, fmt.Errorf("job %s of catalog %s: %w", a.ID, a.Catalog, err)
			}
			rep.Jobs = append(rep.Jobs, fmt.Sprintf("%s: job %s (%s, %s) of %s", a.Catalog, j.ID, kindOf(j.Kind), j.State, strings.Join(append(j.Namespace, j.Table), ".")))
		}
		if token = next; token == "" {
			break
		}
	}
	cats, err := s.store.ListCatalogs(ctx)
	if err != nil {
		return rep, fmt.Errorf("list catalogs: %w", err)
	}
	for _, c := range cats {
		for token := ""; ; {
			page, next, err := s.store.ListSoftDeleted(ctx, c.Name, nil, token, 100)
			if err != nil {
				return rep, fmt.Errorf("soft-deleted tables of catalog %s: %w", c.Name, err)
			}
			for _, r := range page {
				kind := "table"
				if r.Entry.Kind != "" {
					kind = r.Entry.Kind
				}
				line := fmt.Sprintf("%s: %s %s (uuid %s), purge at %s", c.Name, kind,
					strings.Join(append(r.Entry.Namespace, r.Entry.Name), "."), r.Entry.TableUUID, r.PurgeAt)
				if r.LegalHold {
					rep.Held = append(rep.Held, line)
					continue
				}
				rep.SoftDeleted = append(rep.SoftDeleted, line)
			}
			if token = next; token == "" {
				break
			}
		}
	}
	return rep, nil
}

func kindOf(k string) string {
	if k == "" {
		return "purge"
	}
	return k
}
