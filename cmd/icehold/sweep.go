package main

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/storagesweep"
)

// storageSweepCmd is `icehold jobs storage-sweep [NAMESPACE.TABLE]`: it
// starts a storage sweep (of the catalog, or of one table) on the newest
// inventory report, or the one named, and waits for its job to end when
// asked to.
func storageSweepCmd(conn *connOpts) *cobra.Command {
	var dryRun, follow bool
	var report string
	var every time.Duration
	c := &cobra.Command{
		Use:   "storage-sweep [NAMESPACE.TABLE]",
		Short: "Delete orphan files and expired versions found in the warehouse's S3 Inventory report (--dry-run: count only)",
		Long: `Starts a storage sweep: a job of kind sweep that reads the newest S3
Inventory report of the warehouse's bucket (or --report), classifies every
object version against the tables' reachable files, and deletes orphans
older than storage-sweep.orphan-window and noncurrent versions past
storage.version-window. --dry-run counts what it would delete and deletes
nothing. icehold jobs show JOB_ID shows its classes.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef(cmd, "%s takes at most one table: %s", cmd.CommandPath(), cmd.UseLine())
			}
			return nil
		},
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			path := "/lifecycle/v1/catalogs/" + url.PathEscape(c.catalog)
			if len(args) == 1 {
				levels, name, err := splitIdent(args[0])
				if err != nil {
					return usagef(cmd, "%v", err)
				}
				path += "/namespaces/" + url.PathEscape(strings.Join(levels, "\x1f")) + "/tables/" + url.PathEscape(name)
			}
			body := map[string]any{}
			if dryRun {
				body["dry-run"] = true
			}
			if report != "" {
				body["report"] = report
			}
			var j job
			if err := c.do(cmd.Context(), "POST", path+"/storage-sweep", body, &j); err != nil {
				return err
			}
			if !follow {
				return c.emit(cmd.OutOrStdout(), j, func(out io.Writer) error {
					_, err := fmt.Fprintf(out, "storage sweep %s started on %s (icehold jobs watch %s)\n", j.ID, j.StorageSweep.Report, j.ID)
					return err
				})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "storage sweep %s started on %s\n", j.ID, j.StorageSweep.Report)
			if err := watchJob(cmd.Context(), c, cmd.OutOrStdout(), every, j.ID); err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "GET", jobsPath(c)+"/"+url.PathEscape(j.ID), nil, &j); err != nil {
				return err
			}
			showClasses(cmd.OutOrStdout(), j)
			return nil
		}),
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "classify and count; delete nothing")
	c.Flags().StringVar(&report, "report", "", "s3:// URI of the report's manifest.json (default: the newest recorded)")
	c.Flags().BoolVar(&follow, "watch", false, "follow the job until it ends, then print its classes")
	c.Flags().DurationVar(&every, "every", time.Second, "--watch: refresh interval")
	return c
}

// showClasses prints a sweep job's objects and bytes per class.
func showClasses(out io.Writer, j job) {
	if j.StorageSweep == nil {
		return
	}
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "CLASS\tOBJECTS\tBYTES")
	for _, cl := range storagesweep.Classes {
		v := j.StorageSweep.Classes[cl]
		fmt.Fprintf(w, "%s\t%d\t%d\n", cl, v.Objects, v.Bytes)
	}
	if len(j.StorageSweep.Unowned) > 0 {
		fmt.Fprintf(w, "unowned under\t%s\t\n", strings.Join(j.StorageSweep.Unowned, ", "))
	}
	_ = w.Flush()
}
