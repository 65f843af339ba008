package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/router"
)

// A FAILED purge job keeps its claims until an operator retries it to
// SUCCEEDED or abandons it (docs/operations.md, A FAILED job).

func retryJobCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:               "retry JOB_ID",
		Short:             "Run a FAILED purge job again (it kept its claims); icehold jobs watch follows it",
		Args:              exactArgs(1),
		ValidArgsFunction: completeJobs(conn),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			var j job
			if err := c.do(cmd.Context(), "POST", jobsPath(c)+"/"+url.PathEscape(args[0])+"/retry", nil, &j); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), j, func(out io.Writer) error {
				_, err := fmt.Fprintf(out, "job %s of %s is %s again (retry %d); icehold jobs watch %s follows it\n", j.ID, tableOf(j), j.State, j.Retries, j.ID)
				return err
			})
		}),
	}
}

func abandonJobCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "abandon JOB_ID",
		Short: "Let a FAILED purge job's claims go; its files stay in the bucket, owned by nobody (it prints where)",
		Long: `Ends a FAILED purge job for good: the locations it kept (its table's
prefix, and old locations its snapshots reached) are let go, and whatever
files it had not deleted stay in the bucket, owned by no table. Another
table may then take those prefixes, and a purge under the warehouse scope
may reach them. It prints each location: remove what is there with
aws s3 rm --recursive, or register the table's metadata again to own it.
To delete the files instead, retry the job (icehold jobs retry).`,
		Args:              exactArgs(1),
		ValidArgsFunction: completeJobs(conn),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			var a router.AbandonView
			if err := c.do(cmd.Context(), "POST", jobsPath(c)+"/"+url.PathEscape(args[0])+"/abandon", nil, &a); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), a, func(out io.Writer) error {
				fmt.Fprintf(out, "abandoned job %s of %s: its claims are let go. Its files stay in the bucket, owned by nobody, under:\n", a.Job.ID, tableOf(a.Job))
				for _, k := range a.FilesKept {
					fmt.Fprintf(out, "  %s/\n", k)
				}
				_, err := fmt.Fprintln(out, "Remove them (aws s3 rm --recursive <location>/) or register the table's metadata again to own them.")
				return err
			})
		}),
	}
}

func unregisteredCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "unregistered",
		Short: "List the catalog's unregistered tables and the locations each keeps",
		Args:  noArgs,
		RunE: conn.run(func(cmd *cobra.Command, c *client, _ []string) error {
			var all []router.UnregisteredView
			err := pages(cmd.Context(), c, "/lifecycle/v1/catalogs/"+url.PathEscape(c.catalog)+"/unregistered-tables", url.Values{}, func(raw json.RawMessage) (string, error) {
				var page struct {
					Tables []router.UnregisteredView `json:"tables"`
					Next   string                    `json:"next-page-token"`
				}
				err := json.Unmarshal(raw, &page)
				all = append(all, page.Tables...)
				return page.Next, err
			})
			if err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), map[string]any{"tables": all}, func(out io.Writer) error {
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "TABLE\tTABLE UUID\tUNREGISTERED\tBY\tLEGAL HOLD\tKEEPS")
				for _, t := range all {
					fmt.Fprintf(w, "%s.%s\t%s\t%s\t%s\t%v\t%s\n", strings.Join(t.Namespace, "."), t.Name, t.TableUUID, t.UnregisteredAt, t.UnregisteredBy, t.LegalHold, strings.Join(t.Claims, " "))
				}
				return w.Flush()
			})
		}),
	}
}
