package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/icehold/icehold/shared/router"
)

// job is a purge job as the API answers it.
type job = router.JobView

const jobsUsage = `usage:
  icehold jobs list  [--state S] [--kind purge|orphans] [--namespace a.b] [--table t]
  icehold jobs show  JOB_ID
  icehold jobs watch JOB_ID      (a progress bar until the job ends)
connection flags: --url --token --catalog --sigv4 --dir
`

func runJobs(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w\n%s", errUsage, jobsUsage)
	}
	fs := flag.NewFlagSet("jobs "+args[0], flag.ContinueOnError)
	connect := clientFlags(fs)
	state := fs.String("state", "", "filter: job state")
	kind := fs.String("kind", "", "filter: purge (a table's), orphans (the orphan sweep's) or expire (snapshot expiry's)")
	ns := fs.String("namespace", "", "filter: namespace (levels joined by '.')")
	tbl := fs.String("table", "", "filter: table")
	every := fs.Duration("every", time.Second, "watch: refresh interval")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	c, err := connect()
	if err != nil {
		return err
	}
	ctx := context.Background()
	base := "/lifecycle/v1/catalogs/" + url.PathEscape(c.catalog) + "/purge-jobs"
	switch args[0] {
	case "list":
		q := url.Values{}
		if *state != "" {
			q.Set("state", *state)
		}
		if *kind != "" {
			q.Set("kind", *kind)
		}
		if *ns != "" {
			q.Set("namespace", strings.ReplaceAll(*ns, ".", "\x1f"))
		}
		if *tbl != "" {
			q.Set("table", *tbl)
		}
		w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tKIND\tTABLE\tSTATE\tBATCHES\tFILES DELETED\tCREATED")
		token := ""
		for {
			if token != "" {
				q.Set("pageToken", token)
			}
			var page struct {
				Jobs []job  `json:"jobs"`
				Next string `json:"next-page-token"`
			}
			if err := c.do(ctx, "GET", base+"?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			for _, j := range page.Jobs {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\n", j.ID, j.Kind, tableOf(j), j.State,
					j.BatchesDone, j.BatchesTotal, j.FilesDeleted, j.CreatedAt)
			}
			if page.Next == "" {
				break
			}
			token = page.Next
		}
		return w.Flush()
	case "show", "watch":
		if fs.NArg() != 1 {
			return fmt.Errorf("%w\n%s", errUsage, jobsUsage)
		}
		path := base + "/" + url.PathEscape(fs.Arg(0))
		if args[0] == "show" {
			var j job
			if err := c.do(ctx, "GET", path, nil, &j); err != nil {
				return err
			}
			showJob(out, j)
			return nil
		}
		return watch(ctx, out, *every, func() (job, error) {
			var j job
			return j, c.do(ctx, "GET", path, nil, &j)
		})
	}
	return fmt.Errorf("%w\n%s", errUsage, jobsUsage)
}

// tableOf names a job's table ("-" for an orphans job, which has none).
func tableOf(j job) string {
	if j.Table == "" {
		return "-"
	}
	return strings.Join(j.Namespace, ".") + "." + j.Table
}

func showJob(out io.Writer, j job) {
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	lastErr := "-"
	if j.LastError != nil {
		lastErr = *j.LastError
	}
	for _, row := range [][2]string{
		{"id", j.ID}, {"kind", j.Kind}, {"table", tableOf(j)}, {"state", j.State},
		{"batches", fmt.Sprintf("%d done, %d dead, of %d", j.BatchesDone, j.BatchesDead, j.BatchesTotal)},
		{"files", fmt.Sprintf("%d deleted, %d missing, %d skipped", j.FilesDeleted, j.FilesMissing, j.FilesSkipped)},
		{"attempts", fmt.Sprint(j.Attempts)}, {"last error", lastErr}, {"created", j.CreatedAt + " by " + j.CreatedBy},
		{"updated", j.UpdatedAt},
	} {
		fmt.Fprintf(w, "%s\t%s\n", row[0], row[1])
	}
	_ = w.Flush()
}

// watch redraws a progress line until the job ends: batches and files done
// of the total, the rate, and an ETA.
func watch(ctx context.Context, out io.Writer, every time.Duration, get func() (job, error)) error {
	start := time.Now()
	var first *job
	for {
		j, err := get()
		if err != nil {
			return err
		}
		if first == nil {
			first = &j
		}
		fmt.Fprint(out, "\r"+progressLine(j, *first, time.Since(start)))
		switch j.State {
		case "SUCCEEDED", "FAILED", "CANCELLED":
			fmt.Fprintln(out)
			if j.State != "SUCCEEDED" {
				return fmt.Errorf("job %s ended %s", j.ID, j.State)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// progressLine renders one frame of the progress bar.
func progressLine(j, first job, elapsed time.Duration) string {
	const width = 30
	frac := 0.0
	if j.BatchesTotal > 0 {
		frac = float64(j.BatchesDone) / float64(j.BatchesTotal)
	}
	if j.State == "SUCCEEDED" {
		frac = 1
	}
	filled := int(frac * width)
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(j.FilesDeleted-first.FilesDeleted) / s
	}
	eta := "-"
	if frac > 0 && frac < 1 && elapsed > 0 {
		eta = (time.Duration(float64(elapsed)/frac*(1-frac)) / time.Second * time.Second).String()
	}
	return fmt.Sprintf("%s %3.0f%%  batches %d/%d  files %d  %.0f files/s  ETA %s  %s   ",
		bar, frac*100, j.BatchesDone, j.BatchesTotal, j.FilesDeleted, rate, eta, j.State)
}
