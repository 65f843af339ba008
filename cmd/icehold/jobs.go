package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/router"
)

// job is a purge job as the API answers it.
type job = router.JobView

func jobsCmd(conn *connOpts) *cobra.Command {
	var state, kind, ns, tbl string
	list := &cobra.Command{
		Use:   "list",
		Short: "List purge jobs, oldest first (the newest last: jq '.jobs[-1]')",
		Args:  noArgs,
		RunE: conn.run(func(cmd *cobra.Command, c *client, _ []string) error {
			q := url.Values{}
			if state != "" {
				q.Set("state", state)
			}
			if kind != "" {
				q.Set("kind", kind)
			}
			if ns != "" {
				q.Set("namespace", strings.ReplaceAll(ns, ".", "\x1f"))
			}
			if tbl != "" {
				q.Set("table", tbl)
			}
			var all []job
			for token := ""; ; {
				if token != "" {
					q.Set("pageToken", token)
				}
				var page struct {
					Jobs []job  `json:"jobs"`
					Next string `json:"next-page-token"`
				}
				if err := c.do(cmd.Context(), "GET", jobsPath(c)+"?"+q.Encode(), nil, &page); err != nil {
					return err
				}
				all = append(all, page.Jobs...)
				if token = page.Next; token == "" {
					break
				}
			}
			return c.emit(cmd.OutOrStdout(), map[string]any{"jobs": all}, func(out io.Writer) error {
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "ID\tKIND\tTABLE\tSTATE\tBATCHES\tFILES DELETED\tCREATED")
				for _, j := range all {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d/%d\t%d\t%s\n", j.ID, j.Kind, tableOf(j), j.State,
						j.BatchesDone, j.BatchesTotal, j.FilesDeleted, j.CreatedAt)
				}
				return w.Flush()
			})
		}),
	}
	list.Flags().StringVar(&state, "state", "", "only jobs in this state")
	list.Flags().StringVar(&kind, "kind", "", "only jobs of this kind: purge (a table's), orphans (the orphan sweep's), expire (snapshot expiry's), view or sweep (the storage sweep's)")
	list.Flags().StringVar(&ns, "namespace", "", "only jobs of this namespace (levels joined by '.')")
	list.Flags().StringVar(&tbl, "table", "", "only jobs of this table")
	_ = list.RegisterFlagCompletionFunc("state", fixedValues(jobStates...))
	_ = list.RegisterFlagCompletionFunc("kind", fixedValues("purge", "orphans", "expire", "view", "sweep"))

	show := &cobra.Command{
		Use:               "show JOB_ID",
		Short:             "Show a purge job",
		Args:              exactArgs(1),
		ValidArgsFunction: completeJobs(conn),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			var j job
			if err := c.do(cmd.Context(), "GET", jobsPath(c)+"/"+url.PathEscape(args[0]), nil, &j); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), j, func(out io.Writer) error {
				showJob(out, j, deadNote(cmd.Context(), c, j))
				showClasses(out, j)
				return nil
			})
		}),
	}

	var every time.Duration
	watchCmd := &cobra.Command{
		Use:               "watch JOB_ID",
		Short:             "Draw a purge job's progress bar until the job ends",
		Args:              exactArgs(1),
		ValidArgsFunction: completeJobs(conn),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			return watchJob(cmd.Context(), c, cmd.OutOrStdout(), every, args[0])
		}),
	}
	watchCmd.Flags().DurationVar(&every, "every", time.Second, "refresh interval")
	return group("jobs", "Purge jobs: list, show, watch, retry, abandon, storage-sweep", list, show, watchCmd, retryJobCmd(conn), abandonJobCmd(conn), storageSweepCmd(conn))
}

var jobStates = []string{"PENDING", "RUNNING", "DEAD_LETTERED", "SUCCEEDED", "FAILED", "CANCELLED"}

func jobsPath(c *client) string {
	return "/lifecycle/v1/catalogs/" + url.PathEscape(c.catalog) + "/purge-jobs"
}

// watchJob follows a job's progress until it ends (or dead-letters).
func watchJob(ctx context.Context, c *client, out io.Writer, every time.Duration, id string) error {
	path := jobsPath(c) + "/" + url.PathEscape(id)
	return watch(ctx, out, every, c.output == "json", func() (job, error) {
		var j job
		return j, c.do(ctx, "GET", path, nil, &j)
	}, func(j job) string {
		if j.State == "DEAD_LETTERED" {
			if n := deadNote(ctx, c, j); n != "" {
				return n
			}
		}
		return "icehold jobs show " + j.ID + " names its last error"
	})
}

// completeJobs completes a job id from the server's unfinished jobs, then
// the rest; nothing when the server cannot be reached.
func completeJobs(conn *connOpts) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := conn.connect(cmd.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var page struct {
			Jobs []job `json:"jobs"`
		}
		if c.do(cmd.Context(), "GET", jobsPath(c), nil, &page) != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ids := make([]string, 0, len(page.Jobs))
		for _, j := range page.Jobs {
			ids = append(ids, j.ID+"\t"+j.State+" "+tableOf(j))
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

// tableOf names a job's table ("-" for an orphans job, which has none).
func tableOf(j job) string {
	if j.Table == "" {
		return "-"
	}
	return strings.Join(j.Namespace, ".") + "." + j.Table
}

func showJob(out io.Writer, j job, note string) {
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	lastErr := "-"
	switch {
	case j.LastError != nil:
		lastErr = *j.LastError
	case j.RecoveredError != nil:
		lastErr = "- (recovered from: " + *j.RecoveredError + ")"
	}
	for _, row := range [][2]string{
		{"id", j.ID}, {"kind", j.Kind}, {"table", tableOf(j)}, {"state", j.State}, {"metadata", cmp.Or(j.MetadataLocation, "-")},
		{"batches", fmt.Sprintf("%d done, %d dead, of %d", j.BatchesDone, j.BatchesDead, j.BatchesTotal)},
		{"files", fmt.Sprintf("%d deleted (%d data, %d delete, %d metadata), %d missing, %d skipped, %d unreferenced deleted",
			j.FilesDeleted, j.DataFilesDeleted, j.DeleteFilesDeleted, j.MetadataFilesDeleted, j.FilesMissing, j.FilesSkipped, j.FilesUnreferenced)},
		{"size deleted", fmt.Sprintf("%s (%d bytes)", humanBytes(j.Bytes), j.Bytes)},
		{"attempts", fmt.Sprint(j.Attempts)}, {"last error", lastErr}, {"created", j.CreatedAt + " by " + j.CreatedBy},
		{"updated", j.UpdatedAt},
	} {
		fmt.Fprintf(w, "%s\t%s\n", row[0], row[1])
	}
	if note != "" {
		fmt.Fprintf(w, "note\t%s\n", note)
	}
	_ = w.Flush()
}

// watch follows a job until it ends: on a terminal it redraws one
// progress line (batches and files done of the total, the rate, an ETA);
// to a pipe or file it prints a line when what it shows changes, and with
// asJSON the job as one JSON object when it changes (updated-at aside).
// Each shows why a batch is being retried. DEAD_LETTERED waits on an
// operator, so it ends the watch as FAILED does: an error with the cause
// and the next steps, in order (next: how to redrive).
func watch(ctx context.Context, out io.Writer, every time.Duration, asJSON bool, get func() (job, error), next func(job) string) error {
	start := time.Now()
	redraw := !asJSON && isTerminal(out)
	var first *job
	last := "" // what was last printed: the line, or the job without updated-at
	for {
		j, err := get()
		if err != nil {
			return err
		}
		if first == nil {
			first = &j
		}
		switch {
		case redraw:
			// \x1b[K clears what a longer line before left (a retry reason gone).
			fmt.Fprint(out, "\r"+progressLine(j, *first, time.Since(start))+retrying(j, 80)+"\x1b[K")
		case asJSON:
			seen := j
			seen.UpdatedAt = ""
			key, _ := json.Marshal(seen)
			if string(key) != last {
				cur, _ := json.Marshal(nonNull(reflect.ValueOf(j)).Interface())
				fmt.Fprintf(out, "%s\n", cur)
			}
			last = string(key)
		default:
			if line := pipeLine(j); line != last {
				fmt.Fprintln(out, line)
				last = line
			}
		}
		switch j.State {
		case "SUCCEEDED", "FAILED", "CANCELLED", "DEAD_LETTERED":
			if redraw {
				fmt.Fprintln(out)
			}
			cause := ""
			if j.LastError != nil {
				cause = " (last error: " + *j.LastError + ")"
			}
			switch j.State {
			case "SUCCEEDED":
				return nil
			case "CANCELLED":
				return fmt.Errorf("job %s ended %s", j.ID, j.State)
			case "DEAD_LETTERED":
				return fmt.Errorf("job %s is DEAD_LETTERED%s: fix the cause first (a redrive before the fix dead-letters the batches again), then redrive: %s", j.ID, cause, next(j))
			}
			return fmt.Errorf("job %s is %s%s: %s", j.ID, j.State, cause, next(j))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// pipeLine is a job's line in a pipe or file: what a reader compares from
// one line to the next (no rate or ETA, which change at every poll).
func pipeLine(j job) string {
	dead := ""
	if j.BatchesDead > 0 {
		dead = fmt.Sprintf(" (%d dead)", j.BatchesDead)
	}
	return fmt.Sprintf("%s %3.0f%%  batches %d/%d%s  files %d  %s%s", bar(j), 100*done(j), j.BatchesDone, j.BatchesTotal, dead, j.FilesDeleted, j.State, retrying(j, 0))
}

// retrying names why a running job's batch is being retried (SQS delivers
// it again until its receives run out), cut to width runes (0: whole).
func retrying(j job, width int) string {
	if j.LastError == nil || (j.State != "RUNNING" && j.State != "PENDING") {
		return ""
	}
	s := "  retry reason: " + *j.LastError
	if r := []rune(s); width > 0 && len(r) > width {
		s = string(r[:width-1]) + "…"
	}
	return s
}

// isTerminal: out is a character device (a terminal), where redrawing a
// line in place reads as progress; a pipe or file would keep every frame.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressLine renders one frame of the progress bar.
func progressLine(j, first job, elapsed time.Duration) string {
	frac := done(j)
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(j.FilesDeleted-first.FilesDeleted) / s
	}
	eta := "-"
	if frac > 0 && frac < 1 && elapsed > 0 {
		eta = (time.Duration(float64(elapsed)/frac*(1-frac)) / time.Second * time.Second).String()
	}
	return fmt.Sprintf("%s %3.0f%%  batches %d/%d  files %d  %.0f files/s  ETA %s  %s   ",
		bar(j), frac*100, j.BatchesDone, j.BatchesTotal, j.FilesDeleted, rate, eta, j.State)
}

// done is the part of a job's batches done (all of them once it succeeded).
func done(j job) float64 {
	if j.State == "SUCCEEDED" {
		return 1
	}
	if j.BatchesTotal > 0 {
		return float64(j.BatchesDone) / float64(j.BatchesTotal)
	}
	return 0
}

// bar draws done(j) in 30 cells.
func bar(j job) string {
	const width = 30
	filled := int(done(j) * width)
	return strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
}

// humanBytes writes a byte count in binary units (1.5 GiB), as ls -h does.
func humanBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, 0
	for v >= 1024 && unit < 5 {
		v /= 1024
		unit++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[unit])
}
