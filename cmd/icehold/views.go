package main

import (
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/softdelete"
)

// viewsCmd is `icehold views`: a view's lifecycle, as tables' (a view's
// legal hold is `icehold tables legal-hold VIEW_UUID`: that route takes
// any soft-deleted uuid).
func viewsCmd(conn *connOpts) *cobra.Command {
	list := &cobra.Command{
		Use:   "list NAMESPACE",
		Short: "List a namespace's views (levels joined by '.')",
		Args:  exactArgs(1),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			path := "/v1/" + url.PathEscape(c.catalog) + "/namespaces/" + url.PathEscape(strings.ReplaceAll(args[0], ".", "\x1f")) + "/views"
			type ident struct {
				Namespace []string `json:"namespace"`
				Name      string   `json:"name"`
			}
			var all []ident
			for token := ""; ; {
				var page struct {
					Identifiers []ident `json:"identifiers"`
					Next        string  `json:"next-page-token"`
				}
				q := ""
				if token != "" {
					q = "?pageToken=" + url.QueryEscape(token)
				}
				if err := c.do(cmd.Context(), "GET", path+q, nil, &page); err != nil {
					return err
				}
				all = append(all, page.Identifiers...)
				if token = page.Next; token == "" {
					break
				}
			}
			return c.emit(cmd.OutOrStdout(), map[string]any{"identifiers": all}, func(out io.Writer) error {
				for _, v := range all {
					if _, err := fmt.Fprintf(out, "%s.%s\n", strings.Join(v.Namespace, "."), v.Name); err != nil {
						return err
					}
				}
				return nil
			})
		}),
	}

	drop := &cobra.Command{
		Use:   "drop NAMESPACE.VIEW",
		Short: "Drop a view (soft delete on a catalog with soft delete)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			levels, name, err := splitIdent(args[0])
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			c, err := conn.connect(cmd.Context())
			if err != nil {
				return err
			}
			path := "/v1/" + url.PathEscape(c.catalog) + "/namespaces/" + url.PathEscape(strings.Join(levels, "\x1f")) + "/views/" + url.PathEscape(name)
			if err := c.do(cmd.Context(), "DELETE", path, nil, nil); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "dropped view %s\n", args[0])
			return err
		},
	}

	var ns string
	softDeleted := &cobra.Command{
		Use:   "soft-deleted",
		Short: "List the catalog's soft-deleted views",
		Args:  noArgs,
		RunE: conn.run(func(cmd *cobra.Command, c *client, _ []string) error {
			q := url.Values{"kind": {softdelete.KindView}}
			if ns != "" {
				q.Set("namespace", strings.ReplaceAll(ns, ".", "\x1f"))
			}
			var all []softdelete.View
			for token := ""; ; {
				if token != "" {
					q.Set("pageToken", token)
				}
				var page struct {
					Tables []softdelete.View `json:"tables"`
					Next   string            `json:"next-page-token"`
				}
				if err := c.do(cmd.Context(), "GET", "/lifecycle/v1/catalogs/"+url.PathEscape(c.catalog)+"/soft-deleted-tables?"+q.Encode(), nil, &page); err != nil {
					return err
				}
				all = append(all, page.Tables...)
				if token = page.Next; token == "" {
					break
				}
			}
			return c.emit(cmd.OutOrStdout(), map[string]any{"views": all}, func(out io.Writer) error {
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintln(w, "VIEW\tVIEW UUID\tDROPPED\tBY\tPURGE AT\tLEGAL HOLD")
				for _, v := range all {
					fmt.Fprintf(w, "%s.%s\t%s\t%s\t%s\t%s\t%v\n", strings.Join(v.Namespace, "."), v.Name, v.ViewUUID, v.DroppedAt, v.DroppedBy, v.PurgeAt, v.LegalHold)
				}
				return w.Flush()
			})
		}),
	}
	softDeleted.Flags().StringVar(&ns, "namespace", "", "only this namespace (levels joined by '.')")

	return group("views", "Views: list, drop, soft-deleted, undrop, purge-now (legal hold: icehold tables legal-hold VIEW_UUID)",
		list, drop, softDeleted, undropCmd(conn, viewKind), purgeNowCmd(conn, viewKind, "Delete a soft-deleted view's metadata files for good, now"))
}

// viewClient connects and resolves a NAMESPACE.VIEW argument's lifecycle
// path.
func viewClient(cmd *cobra.Command, conn *connOpts, ident string) (*client, string, error) {
	levels, name, err := splitIdent(ident)
	if err != nil {
		return nil, "", usagef(cmd, "%v", err)
	}
	c, err := conn.connect(cmd.Context())
	if err != nil {
		return nil, "", err
	}
	return c, "/lifecycle/v1/catalogs/" + url.PathEscape(c.catalog) + "/namespaces/" + url.PathEscape(strings.Join(levels, "\x1f")) +
		"/views/" + url.PathEscape(name), nil
}
