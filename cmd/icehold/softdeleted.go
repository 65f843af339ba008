package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/softdelete"
)

// kind is what the commands a table and a view share act on (list,
// soft-deleted, undrop, purge-now): one command each, parameterised by
// kind; the routes differ only in the path's segment and the uuid's name.
type kind struct {
	noun   string // "table" or "view"
	upper  string // "TABLE" or "VIEW", in usage lines
	plural string // "tables" or "views": the routes' segment
}

var (
	tableKind = kind{noun: "table", upper: "TABLE", plural: "tables"}
	viewKind  = kind{noun: "view", upper: "VIEW", plural: "views"}
)

// connect connects and resolves a NAMESPACE.NAME argument's lifecycle path
// (the REST path's /v1/{prefix} is /lifecycle/v1/catalogs/{c}).
func (k kind) connect(cmd *cobra.Command, conn *connOpts, ident string) (*client, string, error) {
	c, path, err := k.rest(cmd, conn, ident)
	return c, "/lifecycle/v1/catalogs/" + strings.TrimPrefix(path, "/v1/"), err
}

// rest connects and resolves a NAMESPACE.NAME argument's Iceberg REST path.
func (k kind) rest(cmd *cobra.Command, conn *connOpts, ident string) (*client, string, error) {
	levels, name, err := splitIdent(ident)
	if err != nil {
		return nil, "", usagef(cmd, "%v", err)
	}
	c, err := conn.connect(cmd.Context())
	if err != nil {
		return nil, "", err
	}
	return c, k.restPath(c, levels, name), nil
}

// restPath is one table's or view's Iceberg REST route (the catalog is the
// prefix).
func (k kind) restPath(c *client, levels []string, name string) string {
	return nsPath(c, strings.Join(levels, ".")) + "/" + k.plural + "/" + url.PathEscape(name)
}

// listCmd is `icehold tables|views list NAMESPACE`.
func listCmd(conn *connOpts, k kind) *cobra.Command {
	return &cobra.Command{
		Use:   "list NAMESPACE",
		Short: "List a namespace's " + k.plural + " (levels joined by '.')",
		Args:  exactArgs(1),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			all, err := identifiers(cmd.Context(), c, nsPath(c, args[0])+"/"+k.plural)
			if err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), map[string]any{"identifiers": all}, func(out io.Writer) error {
				for _, t := range all {
					fmt.Fprintf(out, "%s.%s\n", strings.Join(t.Namespace, "."), t.Name)
				}
				return nil
			})
		}),
	}
}

type tableIdent struct {
	Namespace []string `json:"namespace"`
	Name      string   `json:"name"`
}

// identifiers pages through a listing of identifiers (tables or views).
func identifiers(ctx context.Context, c *client, path string) ([]tableIdent, error) {
	var all []tableIdent
	err := pages(ctx, c, path, url.Values{}, func(raw json.RawMessage) (string, error) {
		var page struct {
			Identifiers []tableIdent `json:"identifiers"`
			Next        string       `json:"next-page-token"`
		}
		err := json.Unmarshal(raw, &page)
		all = append(all, page.Identifiers...)
		return page.Next, err
	})
	return all, err
}

// softDeletedCmd is `icehold tables|views soft-deleted`.
func softDeletedCmd(conn *connOpts, k kind) *cobra.Command {
	var ns string
	c := &cobra.Command{
		Use:   "soft-deleted",
		Short: "List the catalog's soft-deleted " + k.plural,
		Args:  noArgs,
		RunE: conn.run(func(cmd *cobra.Command, c *client, _ []string) error {
			all, err := softDeleted(cmd.Context(), c, ns, k)
			if err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), map[string]any{k.plural: all}, func(out io.Writer) error {
				w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
				fmt.Fprintf(w, "%s\t%s UUID\tDROPPED\tBY\tPURGE AT\tLEGAL HOLD\n", k.upper, k.upper)
				for _, t := range all {
					fmt.Fprintf(w, "%s.%s\t%s\t%s\t%s\t%s\t%v\n", strings.Join(t.Namespace, "."), t.Name, cmp.Or(t.TableUUID, t.ViewUUID), t.DroppedAt, t.DroppedBy, t.PurgeAt, t.LegalHold)
				}
				return w.Flush()
			})
		}),
	}
	c.Flags().StringVar(&ns, "namespace", "", "only this namespace (levels joined by '.')")
	return c
}

// softDeleted lists the catalog's soft-deleted tables or views (of
// namespace ns, levels joined by '.', when set).
func softDeleted(ctx context.Context, c *client, ns string, k kind) ([]softdelete.View, error) {
	q := url.Values{"kind": {k.noun}}
	if ns != "" {
		q.Set("namespace", strings.ReplaceAll(ns, ".", "\x1f"))
	}
	var all []softdelete.View
	err := pages(ctx, c, "/lifecycle/v1/catalogs/"+url.PathEscape(c.catalog)+"/soft-deleted-tables", q, func(raw json.RawMessage) (string, error) {
		var page struct {
			Tables []softdelete.View `json:"tables"`
			Next   string            `json:"next-page-token"`
		}
		err := json.Unmarshal(raw, &page)
		all = append(all, page.Tables...)
		return page.Next, err
	})
	return all, err
}

// pick is the body naming the soft-deleted generation an undrop or
// purge-now means (none: the only one).
func (k kind) pick(uuid, gen string) map[string]any {
	body := map[string]any{}
	if uuid != "" {
		body[k.noun+"-uuid"] = uuid
	}
	if gen != "" {
		body["generation"] = gen
	}
	return body
}

// undropCmd is `icehold tables|views undrop`.
func undropCmd(conn *connOpts, k kind) *cobra.Command {
	var uuid, gen, rename string
	c := &cobra.Command{
		Use:   "undrop NAMESPACE." + k.upper,
		Short: "Restore a soft-deleted " + k.noun,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, path, err := k.connect(cmd, conn, args[0])
			if err != nil {
				return err
			}
			body := k.pick(uuid, gen)
			if rename != "" {
				levels, name, err := splitIdent(rename)
				if err != nil {
					return usagef(cmd, "--rename-to %v", err)
				}
				body["rename-to"] = map[string]any{"namespace": levels, "name": name}
			}
			var res struct {
				Namespace []string `json:"namespace"`
				Name      string   `json:"name"`
				TableUUID string   `json:"table-uuid,omitempty"`
				ViewUUID  string   `json:"view-uuid,omitempty"`
			}
			if err := c.do(cmd.Context(), "POST", path+"/undrop", body, &res); err != nil {
				return err
			}
			what := "" // "undropped a.t", "undropped view a.v"
			if k.noun != "table" {
				what = k.noun + " "
			}
			return c.emit(cmd.OutOrStdout(), res, func(out io.Writer) error {
				_, err := fmt.Fprintf(out, "undropped %s%s.%s (%s uuid %s)\n", what, strings.Join(res.Namespace, "."), res.Name, k.noun, cmp.Or(res.TableUUID, res.ViewUUID))
				return err
			})
		},
	}
	c.Flags().StringVar(&uuid, "uuid", "", "the generation ("+k.noun+" uuid) to restore")
	c.Flags().StringVar(&gen, "generation", "", "the generation to restore (several of one uuid)")
	c.Flags().StringVar(&rename, "rename-to", "", "restore under this NAMESPACE."+k.upper)
	return c
}

// purgeNowCmd is `icehold tables|views purge-now`.
func purgeNowCmd(conn *connOpts, k kind, short string) *cobra.Command {
	var uuid, gen string
	var watch, yes bool
	var every time.Duration
	c := &cobra.Command{
		Use:   "purge-now NAMESPACE." + k.upper,
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, _, err := splitIdent(args[0]); err != nil {
				return usagef(cmd, "%v", err)
			}
			if err := confirm(cmd, yes, k.noun+"s purge-now deletes the soft-deleted "+args[0]+"'s files for good, skipping its hold period (no undrop)"); err != nil {
				return err
			}
			c, path, err := k.connect(cmd, conn, args[0])
			if err != nil {
				return err
			}
			var j job
			if err := c.do(cmd.Context(), "POST", path+"/purge-now", k.pick(uuid, gen), &j); err != nil {
				return err
			}
			return startedJob(cmd.Context(), c, cmd.OutOrStdout(), j.ID, watch, every)
		},
	}
	c.Flags().StringVar(&uuid, "uuid", "", "the generation ("+k.noun+" uuid) to purge")
	c.Flags().StringVar(&gen, "generation", "", "the generation to purge (several of one uuid)")
	c.Flags().BoolVar(&watch, "watch", false, "follow the purge job until it ends")
	c.Flags().DurationVar(&every, "every", time.Second, "--watch: refresh interval")
	yesFlag(c, &yes)
	return c
}
