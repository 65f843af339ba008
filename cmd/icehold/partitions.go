package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/partitions"
)

const partitionsDropHelp = `Ends every live file of the named partition tuples in one snapshot. Values
are JSON where they parse as JSON (42, true, null, "42") and strings otherwise
(2026-09-15). --key is the Idempotency-Key (default: a new one, printed): the
same key and tuples replay the first answer instead of dropping again.`

// tupleFlag collects --partition k=v,k=v flags.
type tupleFlag []map[string]json.RawMessage

func (f *tupleFlag) String() string { return fmt.Sprint(len(*f)) }

func (f *tupleFlag) Type() string { return "field=value,…" }

func (f *tupleFlag) Set(s string) error {
	t := map[string]json.RawMessage{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q: write a tuple as field=value,field=value", s)
		}
		raw := json.RawMessage(v)
		if !json.Valid(raw) {
			raw, _ = json.Marshal(v)
		}
		t[k] = raw
	}
	*f = append(*f, t)
	return nil
}

func partitionsCmd(conn *connOpts) *cobra.Command {
	var tuples tupleFlag
	var specID int
	var expect, key string
	var read int64
	var yes bool
	drop := &cobra.Command{
		Use:     "drop NAMESPACE.TABLE --partition field=value,… [--partition …]",
		Short:   "End partitions in one snapshot",
		Long:    partitionsDropHelp,
		Example: "  icehold partitions drop ops.events --partition team_id=42,ts_day=2026-09-15",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(tuples) == 0 {
				return usagef(cmd, "name at least one --partition")
			}
			if _, _, err := splitIdent(args[0]); err != nil {
				return usagef(cmd, "%v", err)
			}
			if err := confirm(cmd, yes, fmt.Sprintf("partitions drop ends every row of %d partition%s of %s in a new snapshot "+
				"(older snapshots keep them until they expire)", len(tuples), plural(int64(len(tuples))), args[0])); err != nil {
				return err
			}
			c, path, err := tableKind.connect(cmd, conn, args[0])
			if err != nil {
				return err
			}
			req := partitions.DropRequest{Partitions: tuples, ExpectedTableUUID: expect}
			if specID >= 0 {
				req.SpecID = &specID
			}
			if read != 0 {
				req.ReadSnapshotID = &read
			}
			if key == "" {
				key = uuid.NewString()
			}
			var res partitions.DropResult
			if err := withHeader(c, "Idempotency-Key", key).do(cmd.Context(), "POST", path+"/partitions/drop", req, &res); err != nil {
				if retryable(err) { // a refusal answers the same again: no hint
					return fmt.Errorf("%w (Idempotency-Key %s: the same command with --key %s retries safely)", err, key, key)
				}
				return err
			}
			return c.emit(cmd.OutOrStdout(), res, func(out io.Writer) error { return printDrop(out, key, res) })
		},
	}
	f := drop.Flags()
	f.Var(&tuples, "partition", "a tuple: field=value,field=value (repeat for more)")
	f.IntVar(&specID, "spec-id", -1, "the partition spec the tuples are of (default: the current one)")
	f.StringVar(&expect, "expect-uuid", "", "refuse (409) unless the table is this generation")
	f.Int64Var(&read, "read-snapshot", 0, "refuse (409) if a snapshot after this one removed data")
	f.StringVar(&key, "key", "", "Idempotency-Key (default: a new one)")
	yesFlag(drop, &yes)
	return group("partitions", "Partitions: drop", drop)
}

func printDrop(out io.Writer, key string, res partitions.DropResult) error {
	switch {
	case res.Committed:
		fmt.Fprintf(out, "snapshot %d: ended %d data files, %d delete files, %d records (Idempotency-Key %s)\n",
			*res.SnapshotID, res.DataFilesEnded, res.DeleteFilesEnded, res.RecordsEnded, key)
	case res.SnapshotID != nil:
		fmt.Fprintf(out, "nothing to drop: the tuples hold no live file at snapshot %d (nothing committed)\n", *res.SnapshotID)
	default:
		fmt.Fprintln(out, "nothing to drop: the table has no snapshot (nothing committed)")
	}
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "PARTITION\tDATA FILES\tDELETE FILES\tRECORDS")
	for _, p := range res.Partitions {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", tupleString(p.Partition), p.DataFiles, p.DeleteFiles, p.Records)
	}
	return w.Flush()
}

func tupleString(p map[string]any) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, p[k])
	}
	return strings.Join(parts, ",")
}

// withHeader returns a copy of the client that sends one more header on
// every request (after signing: SigV4 does not need to cover it).
func withHeader(c *client, k, v string) *client {
	cp := *c
	hc := *c.http
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = headerTransport{base: base, key: k, value: v}
	cp.http = &hc
	return &cp
}

type headerTransport struct {
	base       http.RoundTripper
	key, value string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(t.key, t.value)
	return t.base.RoundTrip(r)
}

func retentionCmd(conn *connOpts) *cobra.Command {
	var field, keep string
	var yes bool
	policy := func(method string, body any) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, path, err := tableKind.connect(cmd, conn, args[0])
			if err != nil {
				return err
			}
			var p partitions.RetentionPolicy
			if err := c.do(cmd.Context(), method, path+"/partition-retention", body, &p); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), p, func(out io.Writer) error {
				applied := "not applied yet"
				if p.AppliedCutoff != "" {
					applied = "last applied at " + p.AppliedAt + ", cutoff " + p.AppliedCutoff
				}
				_, err := fmt.Fprintf(out, "field %s, keep %s (table uuid %s): %s\n", p.Field, p.Keep, p.TableUUID, applied)
				return err
			})
		}
	}
	body := map[string]*string{"field": &field, "keep": &keep}
	set := &cobra.Command{
		Use:   "set NAMESPACE.TABLE --field F --keep P7D",
		Short: "Drop the partitions older than --keep, hourly",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if field == "" || keep == "" {
				return usagef(cmd, "set needs --field and --keep")
			}
			if _, _, err := splitIdent(args[0]); err != nil {
				return usagef(cmd, "%v", err)
			}
			if err := confirm(cmd, yes, fmt.Sprintf("retention set drops the partitions of %s whose %s is older than %s, at the next hourly run and every hour after", args[0], field, keep)); err != nil {
				return err
			}
			return policy("PUT", body)(cmd, args)
		},
	}
	set.Flags().StringVar(&field, "field", "", "the partition field (a day, hour, month or year transform, or an identity date/timestamp)")
	set.Flags().StringVar(&keep, "keep", "", "how long to keep (ISO-8601, P7D, or 7d)")
	yesFlag(set, &yes)
	show := &cobra.Command{
		Use:   "show NAMESPACE.TABLE",
		Short: "Show a table's retention policy",
		Args:  exactArgs(1),
		RunE:  policy("GET", nil),
	}
	clear := &cobra.Command{
		Use:   "clear NAMESPACE.TABLE",
		Short: "Remove a table's retention policy",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, path, err := tableKind.connect(cmd, conn, args[0])
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", path+"/partition-retention", nil, nil); err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), "retention policy cleared")
			return err
		},
	}
	return group("retention", "Partition retention: set, show, clear", set, show, clear)
}

// verifyCmd is `icehold tables verify NAMESPACE.TABLE`: it exits non-zero
// when a check fails.
func verifyCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "verify NAMESPACE.TABLE",
		Short: "Check a table's lifecycle invariants (exit status 1 when one fails)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, path, err := tableKind.connect(cmd, conn, args[0])
			if err != nil {
				return err
			}
			var rep partitions.Report
			if err := c.do(cmd.Context(), "GET", path+"/verify", nil, &rep); err != nil {
				return err
			}
			if err := c.emit(cmd.OutOrStdout(), rep, func(out io.Writer) error { return printReport(out, rep) }); err != nil {
				return err
			}
			if !rep.OK {
				return fmt.Errorf("table %s fails verification", args[0])
			}
			return nil
		},
	}
}

// repairCmd is `icehold tables repair NAMESPACE.TABLE`: what verify's
// files-intact check finds changed or missing comes back from its prior
// version (TABLE_WRITE).
func repairCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "repair NAMESPACE.TABLE",
		Short: "Restore the table's files an engine overwrote or deleted from their prior versions (TABLE_WRITE; nothing when nothing is wrong)",
		Long: `Every file a retained snapshot references whose current object is missing or
differs from the metadata (tables verify, check files-intact) is restored from its
newest prior version that matches: the version is copied back as the current
object. Nothing wrong: nothing changes. A file without such a version fails the
command (409) by name, and nothing of its round is restored.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, path, err := tableKind.connect(cmd, conn, args[0])
			if err != nil {
				return err
			}
			var rep partitions.RepairReport
			if err := c.do(cmd.Context(), "POST", path+"/repair", nil, &rep); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), rep, func(out io.Writer) error {
				if len(rep.Restored) == 0 {
					_, err := fmt.Fprintln(out, "nothing to repair: every referenced file is intact")
					return err
				}
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "RESTORED\tKIND\tVERSION\tSIZE")
				for _, r := range rep.Restored {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\n", r.Path, r.What, r.VersionID, r.Size)
				}
				return w.Flush()
			})
		},
	}
}

func printReport(out io.Writer, rep partitions.Report) error {
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tOK\tDETAIL")
	for _, ch := range rep.Checks {
		detail := ch.Detail
		if ch.Violations > 0 {
			detail += fmt.Sprintf(" (%d offending files)", ch.Violations)
		}
		if ch.Incomplete {
			detail += " (incomplete)"
		}
		fmt.Fprintf(w, "%s\t%v\t%s\n", ch.Name, ch.OK, detail)
		for _, e := range ch.Examples {
			fmt.Fprintf(w, "\t\t  %s\n", e)
		}
	}
	return w.Flush()
}
