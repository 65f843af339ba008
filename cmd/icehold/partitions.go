package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/partitions"
)

const partitionsUsage = `usage:
  icehold partitions drop NAMESPACE.TABLE --partition team_id=42,ts_day=2026-09-15 [--partition …]
        [--spec-id N] [--expect-uuid U] [--read-snapshot ID] [--key K]
    ends every live file of the named partition tuples in one snapshot. Values are
    JSON where they parse as JSON (42, true, null, "42") and strings otherwise
    (2026-09-15). --key is the Idempotency-Key (default: a new one, printed):
    the same key and tuples replay the first answer instead of dropping again.
connection flags: --url --token --catalog --sigv4 --dir
`

// tupleFlag collects --partition k=v,k=v flags.
type tupleFlag []map[string]json.RawMessage

func (f *tupleFlag) String() string { return fmt.Sprint(len(*f)) }

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

func runPartitions(args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "drop" {
		return fmt.Errorf("%w\n%s", errUsage, partitionsUsage)
	}
	fs := flag.NewFlagSet("partitions drop", flag.ContinueOnError)
	var tuples tupleFlag
	fs.Var(&tuples, "partition", "a tuple: field=value,field=value (repeat for more)")
	specID := fs.Int("spec-id", -1, "the partition spec the tuples are of (default: the current one)")
	expect := fs.String("expect-uuid", "", "refuse (409) unless the table is this generation")
	read := fs.Int64("read-snapshot", 0, "refuse (409) if a snapshot after this one removed data")
	key := fs.String("key", "", "Idempotency-Key (default: a new one)")
	c, path, err := tableCommand(fs, args[1:], partitionsUsage)
	if err != nil {
		return err
	}
	if len(tuples) == 0 {
		return fmt.Errorf("%w: name at least one --partition\n%s", errUsage, partitionsUsage)
	}
	req := partitions.DropRequest{Partitions: tuples, ExpectedTableUUID: *expect}
	if *specID >= 0 {
		req.SpecID = specID
	}
	if *read != 0 {
		req.ReadSnapshotID = read
	}
	if *key == "" {
		*key = uuid.NewString()
	}
	var res partitions.DropResult
	if err := withHeader(c, "Idempotency-Key", *key).do(context.Background(), "POST", path+"/partitions/drop", req, &res); err != nil {
		return fmt.Errorf("%w (Idempotency-Key %s: the same command with --key %s retries safely)", err, *key, *key)
	}
	return printDrop(out, *key, res)
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

// parseInterleaved parses flags that may come before or after positional
// arguments, and returns the positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			pos, args = append(pos, args[0]), args[1:]
		}
	}
	return pos, nil
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

const retentionUsage = `usage:
  icehold retention set   NAMESPACE.TABLE --field ts_day --keep P7D   drop partitions older than keep, hourly
  icehold retention show  NAMESPACE.TABLE
  icehold retention clear NAMESPACE.TABLE
connection flags: --url --token --catalog --sigv4 --dir
`

// tableCommand parses a table command: connection flags, the table and the
// path of its lifecycle routes.
func tableCommand(fs *flag.FlagSet, args []string, usage string) (*client, string, error) {
	connect := clientFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, "", err
	}
	if len(pos) != 1 {
		return nil, "", fmt.Errorf("%w: name one table\n%s", errUsage, usage)
	}
	levels, name, err := splitIdent(pos[0])
	if err != nil {
		return nil, "", err
	}
	c, err := connect()
	if err != nil {
		return nil, "", err
	}
	return c, "/lifecycle/v1/catalogs/" + url.PathEscape(c.catalog) + "/namespaces/" + url.PathEscape(strings.Join(levels, "\x1f")) +
		"/tables/" + url.PathEscape(name), nil
}

func runRetention(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w\n%s", errUsage, retentionUsage)
	}
	fs := flag.NewFlagSet("retention "+args[0], flag.ContinueOnError)
	field := fs.String("field", "", "set: the partition field (a day, hour, month or year transform, or an identity date/timestamp)")
	keep := fs.String("keep", "", "set: how long to keep (ISO-8601, P7D, or 7d)")
	c, path, err := tableCommand(fs, args[1:], retentionUsage)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var p partitions.RetentionPolicy
	switch args[0] {
	case "set":
		if *field == "" || *keep == "" {
			return fmt.Errorf("%w: set needs --field and --keep\n%s", errUsage, retentionUsage)
		}
		if err := c.do(ctx, "PUT", path+"/partition-retention", map[string]string{"field": *field, "keep": *keep}, &p); err != nil {
			return err
		}
	case "show":
		if err := c.do(ctx, "GET", path+"/partition-retention", nil, &p); err != nil {
			return err
		}
	case "clear":
		if err := c.do(ctx, "DELETE", path+"/partition-retention", nil, nil); err != nil {
			return err
		}
		fmt.Fprintln(out, "retention policy cleared")
		return nil
	default:
		return fmt.Errorf("%w\n%s", errUsage, retentionUsage)
	}
	applied := "not applied yet"
	if p.AppliedCutoff != "" {
		applied = "last applied at " + p.AppliedAt + ", cutoff " + p.AppliedCutoff
	}
	fmt.Fprintf(out, "field %s, keep %s (table uuid %s): %s\n", p.Field, p.Keep, p.TableUUID, applied)
	return nil
}

// runVerify is `icehold tables verify NAMESPACE.TABLE`: it exits non-zero
// when a check fails.
func runVerify(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("tables verify", flag.ContinueOnError)
	c, path, err := tableCommand(fs, args, "usage: icehold tables verify NAMESPACE.TABLE\n")
	if err != nil {
		return err
	}
	var rep partitions.Report
	if err := c.do(context.Background(), "GET", path+"/verify", nil, &rep); err != nil {
		return err
	}
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
	if err := w.Flush(); err != nil {
		return err
	}
	if !rep.OK {
		return fmt.Errorf("table %s fails verification", args[0])
	}
	return nil
}
