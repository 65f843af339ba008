package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/icehold/icehold/shared/softdelete"
)

const tablesUsage = `usage:
  icehold tables soft-deleted [--namespace a.b]          soft-deleted tables of the catalog
  icehold tables undrop     NAMESPACE.TABLE [--uuid U] [--rename-to a.b.t]
  icehold tables purge-now  NAMESPACE.TABLE [--uuid U]   delete a soft-deleted table for good, now
  icehold tables legal-hold TABLE_UUID --on|--off        hold a soft-deleted table (no expiry, no purge)
connection flags: --url --token --catalog --sigv4 --dir
`

// splitIdent turns a.b.t into namespace [a b] and table t.
func splitIdent(s string) ([]string, string, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, "", fmt.Errorf("%q: name the table as NAMESPACE.TABLE", s)
	}
	return parts[:len(parts)-1], parts[len(parts)-1], nil
}

func runTables(args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w\n%s", errUsage, tablesUsage)
	}
	fs := flag.NewFlagSet("tables "+args[0], flag.ContinueOnError)
	connect := clientFlags(fs)
	ns := fs.String("namespace", "", "soft-deleted: only this namespace (levels joined by '.')")
	uuid := fs.String("uuid", "", "undrop, purge-now: the generation (table uuid)")
	rename := fs.String("rename-to", "", "undrop: restore under this NAMESPACE.TABLE")
	on := fs.Bool("on", false, "legal-hold: set it")
	off := fs.Bool("off", false, "legal-hold: clear it")
	// Flags may come after the positional argument too.
	var pos []string
	rest := args[1:]
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		rest = fs.Args()
		if len(rest) > 0 {
			pos, rest = append(pos, rest[0]), rest[1:]
		}
	}
	c, err := connect()
	if err != nil {
		return err
	}
	ctx := context.Background()
	base := "/lifecycle/v1/catalogs/" + url.PathEscape(c.catalog)
	tablePath := func() (string, error) {
		if len(pos) != 1 {
			return "", fmt.Errorf("%w\n%s", errUsage, tablesUsage)
		}
		levels, name, err := splitIdent(pos[0])
		if err != nil {
			return "", err
		}
		return base + "/namespaces/" + url.PathEscape(strings.Join(levels, "\x1f")) + "/tables/" + url.PathEscape(name), nil
	}
	switch args[0] {
	case "soft-deleted":
		q := url.Values{}
		if *ns != "" {
			q.Set("namespace", strings.ReplaceAll(*ns, ".", "\x1f"))
		}
		w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
		fmt.Fprintln(w, "TABLE\tTABLE UUID\tDROPPED\tBY\tPURGE AT\tLEGAL HOLD")
		token := ""
		for {
			if token != "" {
				q.Set("pageToken", token)
			}
			var page struct {
				Tables []softdelete.View `json:"tables"`
				Next   string            `json:"next-page-token"`
			}
			if err := c.do(ctx, "GET", base+"/soft-deleted-tables?"+q.Encode(), nil, &page); err != nil {
				return err
			}
			for _, t := range page.Tables {
				fmt.Fprintf(w, "%s.%s\t%s\t%s\t%s\t%s\t%v\n", strings.Join(t.Namespace, "."), t.Name, t.TableUUID, t.DroppedAt, t.DroppedBy, t.PurgeAt, t.LegalHold)
			}
			if page.Next == "" {
				break
			}
			token = page.Next
		}
		return w.Flush()
	case "undrop":
		path, err := tablePath()
		if err != nil {
			return err
		}
		body := map[string]any{}
		if *uuid != "" {
			body["table-uuid"] = *uuid
		}
		if *rename != "" {
			levels, name, err := splitIdent(*rename)
			if err != nil {
				return err
			}
			body["rename-to"] = map[string]any{"namespace": levels, "name": name}
		}
		var res struct {
			Namespace []string `json:"namespace"`
			Name      string   `json:"name"`
			TableUUID string   `json:"table-uuid"`
		}
		if err := c.do(ctx, "POST", path+"/undrop", body, &res); err != nil {
			return err
		}
		fmt.Fprintf(out, "undropped %s.%s (table uuid %s)\n", strings.Join(res.Namespace, "."), res.Name, res.TableUUID)
		return nil
	case "purge-now":
		path, err := tablePath()
		if err != nil {
			return err
		}
		body := map[string]any{}
		if *uuid != "" {
			body["table-uuid"] = *uuid
		}
		var j job
		if err := c.do(ctx, "POST", path+"/purge-now", body, &j); err != nil {
			return err
		}
		fmt.Fprintf(out, "purge job %s started (icehold jobs watch %s)\n", j.ID, j.ID)
		return nil
	case "legal-hold":
		if len(pos) != 1 || *on == *off {
			return fmt.Errorf("%w: name the table uuid and one of --on or --off\n%s", errUsage, tablesUsage)
		}
		var v softdelete.View
		if err := c.do(ctx, "POST", base+"/soft-deleted-tables/"+url.PathEscape(pos[0])+"/legal-hold", map[string]any{"enabled": *on}, &v); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s.%s (%s): legal hold %v\n", strings.Join(v.Namespace, "."), v.Name, v.TableUUID, v.LegalHold)
		return nil
	}
	return fmt.Errorf("%w\n%s", errUsage, tablesUsage)
}
