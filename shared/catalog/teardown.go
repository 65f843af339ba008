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
// the stack while their records and files stay; FAILED jobs that keep their
// claims, which nobody could retry or abandon any more; and soft-deleted
// tables and views, which the hold-expiry schedule (gone too) would never
// purge. Legal-held soft-deleted tables and unregistered tables (whose
// files are meant to stay, kept by their claims) are listed apart: the
// retained table and bucket keep them, so they strand nothing.
type TeardownReport struct {
	Jobs         []string `json:"unfinished-jobs"`
	Failed       []string `json:"failed-jobs"`
	SoftDeleted  []string `json:"soft-deleted"`
	Held         []string `json:"legal-held"`
	Unregistered []string `json:"unregistered"`
}

// Empty: nothing would be stranded.
func (r TeardownReport) Empty() bool { return len(r.Jobs)+len(r.Failed)+len(r.SoftDeleted) == 0 }

// jobLine names a job in the report.
func jobLine(cat string, j store.Job) string {
	return fmt.Sprintf("%s: job %s (%s, %s) of %s", cat, j.ID, kindOf(j.Kind), j.State, strings.Join(append(j.Namespace, j.Table), "."))
}

// eachJob reads the jobs of an index (active or failed markers), skipping
// markers whose job is gone.
func (s *Service) eachJob(ctx context.Context, list func(context.Context, string, int) ([]store.ActiveJob, string, error), fn func(string, store.Job)) error {
	for token := ""; ; {
		page, next, err := list(ctx, token, 100)
		if err != nil {
			return err
		}
		for _, a := range page {
			j, err := s.store.GetJob(ctx, a.Catalog, a.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue // an index item whose job is gone strands nothing
			}
			if err != nil {
				return fmt.Errorf("job %s of catalog %s: %w", a.ID, a.Catalog, err)
			}
			fn(a.Catalog, j)
		}
		if token = next; token == "" {
			return nil
		}
	}
}

// Teardown reads, across catalogs, what a teardown would strand.
func (s *Service) Teardown(ctx context.Context) (TeardownReport, error) {
	rep := TeardownReport{Jobs: []string{}, Failed: []string{}, SoftDeleted: []string{}, Held: []string{}, Unregistered: []string{}}
	err := s.eachJob(ctx, s.store.ActiveJobs, func(cat string, j store.Job) { rep.Jobs = append(rep.Jobs, jobLine(cat, j)) })
	if err != nil {
		return rep, fmt.Errorf("list unfinished jobs: %w", err)
	}
	err = s.eachJob(ctx, s.store.FailedJobs, func(cat string, j store.Job) {
		if j.Holding() {
			rep.Failed = append(rep.Failed, jobLine(cat, j)+": retry or abandon it")
		}
	})
	if err != nil {
		return rep, fmt.Errorf("list failed jobs: %w", err)
	}
	cats, err := s.store.ListCatalogs(ctx)
	if err != nil {
		return rep, fmt.Errorf("list catalogs: %w", err)
	}
	holds := s.Holds()
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
				held, err := holds.Held(ctx, c.Name, r.Entry.Namespace, r.LegalHold)
				if err != nil {
					return rep, err
				}
				if held {
					rep.Held = append(rep.Held, line)
					continue
				}
				rep.SoftDeleted = append(rep.SoftDeleted, line)
			}
			if token = next; token == "" {
				break
			}
		}
		for token := ""; ; {
			page, next, err := s.store.ListUnregistered(ctx, c.Name, token, 100)
			if err != nil {
				return rep, fmt.Errorf("unregistered tables of catalog %s: %w", c.Name, err)
			}
			for _, u := range page {
				held := ""
				if u.Entry.LegalHold {
					held = ", legal hold"
				}
				claims := make([]string, 0, len(u.Entry.Holds()))
				for _, h := range u.Entry.Holds() {
					claims = append(claims, h.URI())
				}
				rep.Unregistered = append(rep.Unregistered, fmt.Sprintf("%s: table %s (uuid %s%s), unregistered at %s, keeps %s",
					c.Name, strings.Join(append(u.Entry.Namespace, u.Entry.Name), "."), u.Entry.TableUUID, held, u.UnregisteredAt, strings.Join(claims, ", ")))
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
