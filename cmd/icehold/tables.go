package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/softdelete"
)

// splitIdent turns a.b.t into namespace [a b] and table t.
func splitIdent(s string) ([]string, string, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return nil, "", fmt.Errorf("%q: name the table as NAMESPACE.TABLE", s)
	}
	return parts[:len(parts)-1], parts[len(parts)-1], nil
}

func tablesCmd(conn *connOpts) *cobra.Command {
	var on, off bool
	var holdUUID, holdGen string
	legalHold := &cobra.Command{
		Use:   "legal-hold NAMESPACE.TABLE --on|--off",
		Short: "Hold a table (no purge, no expiry, no deletion of its files) or release it: a live table or a soft-deleted one (a view: --uuid VIEW_UUID)",
		Long: `Holds a table, or releases it (TABLE_LEGAL_HOLD). A live table gets the
property icehold.legal-hold=true (a commit: TABLE_WRITE too), which a drop
keeps on its soft-deleted record; a soft-deleted table's record is held or
released directly. The name means the live table when there is one; a
soft-deleted generation under a live name, or among several: --uuid.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if on == off {
				return usagef(cmd, "name one of --on or --off")
			}
			levels, name, err := splitIdent(args[0])
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			c, err := conn.connect(cmd.Context())
			if err != nil {
				return err
			}
			uuid := holdUUID
			if uuid == "" {
				live, err := liveLegalHold(cmd.Context(), c, cmd.OutOrStdout(), args[0], levels, name, on)
				if live || err != nil {
					return err
				}
				if uuid, err = softDeletedUUID(cmd.Context(), c, levels, name); err != nil {
					return err
				}
			}
			body := map[string]any{"enabled": on}
			if holdGen != "" {
				body["generation"] = holdGen
			}
			var v softdelete.View
			if err := c.do(cmd.Context(), "POST", "/lifecycle/v1/catalogs/"+url.PathEscape(c.catalog)+"/soft-deleted-tables/"+url.PathEscape(uuid)+"/legal-hold", body, &v); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), v, func(out io.Writer) error {
				_, err := fmt.Fprintf(out, "%s.%s (soft-deleted, %s): legal hold %s\n", strings.Join(v.Namespace, "."), v.Name, cmp.Or(v.TableUUID, v.ViewUUID), onOff(v.LegalHold))
				return err
			})
		},
	}
	legalHold.Flags().BoolVar(&on, "on", false, "set the hold")
	legalHold.Flags().BoolVar(&off, "off", false, "clear the hold")
	legalHold.Flags().StringVar(&holdUUID, "uuid", "", "the soft-deleted generation (table or view uuid) to hold, when several lie under the name or a live table has it")
	legalHold.Flags().StringVar(&holdGen, "generation", "", "the generation (several of one uuid)")

	return group("tables", "Tables: list, create, show, drop, soft-deleted, unregistered, undrop, purge-now, legal-hold, verify, repair",
		listCmd(conn, tableKind), tableCreateCmd(conn), tableShowCmd(conn), dropCmd(conn), softDeletedCmd(conn, tableKind), unregisteredCmd(conn), undropCmd(conn, tableKind), purgeNowCmd(conn, tableKind, "Delete a soft-deleted table for good, now"), legalHold, verifyCmd(conn), repairCmd(conn))
}

// namespacesCmd lists namespaces: the top level, or a namespace's children.
func namespacesCmd(conn *connOpts) *cobra.Command {
	list := &cobra.Command{
		Use:   "list [PARENT]",
		Short: "List the top-level namespaces, or PARENT's children",
		Args:  cobra.MaximumNArgs(1),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			q := url.Values{}
			if len(args) == 1 {
				q.Set("parent", strings.ReplaceAll(args[0], ".", "\x1f"))
			}
			var all [][]string
			err := pages(cmd.Context(), c, "/v1/"+url.PathEscape(c.catalog)+"/namespaces", q, func(raw json.RawMessage) (string, error) {
				var page struct {
					Namespaces [][]string `json:"namespaces"`
					Next       string     `json:"next-page-token"`
				}
				err := json.Unmarshal(raw, &page)
				all = append(all, page.Namespaces...)
				return page.Next, err
			})
			if err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), map[string]any{"namespaces": all}, func(out io.Writer) error {
				for _, ns := range all {
					fmt.Fprintln(out, strings.Join(ns, "."))
				}
				return nil
			})
		}),
	}
	return group("namespaces", "Namespaces: list, create", list, namespaceCreateCmd(conn))
}

// pages GETs every page of a listing: each answer goes to page, which
// returns the next page token ("" at the end).
func pages(ctx context.Context, c *client, path string, q url.Values, page func(json.RawMessage) (string, error)) error {
	for token := ""; ; {
		if token != "" {
			q.Set("pageToken", token)
		}
		var raw json.RawMessage
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		if err := c.do(ctx, "GET", path+sep+q.Encode(), nil, &raw); err != nil {
			return err
		}
		next, err := page(raw)
		if err != nil {
			return err
		}
		if token = next; token == "" {
			return nil
		}
	}
}

// liveLegalHold sets or clears a live table's icehold.legal-hold property
// (one commit, no requirement: setting it twice is harmless); false when
// no live table has the name.
func liveLegalHold(ctx context.Context, c *client, out io.Writer, ident string, levels []string, name string, on bool) (bool, error) {
	update := map[string]any{"action": "set-properties", "updates": map[string]string{catalog.PropLegalHold: "true"}}
	if !on {
		update = map[string]any{"action": "remove-properties", "removals": []string{catalog.PropLegalHold}}
	}
	var res loaded
	err := c.do(ctx, "POST", tableKind.restPath(c, levels, name), map[string]any{"requirements": []any{}, "updates": []any{update}}, &res)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound && strings.Contains(ae.typ, "NoSuchTable") {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	state := "icehold.legal-hold=true"
	if !on {
		state = "icehold.legal-hold removed"
	}
	return true, c.emit(out, res, func(out io.Writer) error {
		_, err := fmt.Fprintf(out, "%s (live, %s): legal hold %s (%s)\n", ident, res.Metadata.TableUUID, onOff(on), state)
		return err
	})
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// softDeletedUUID is the uuid of the one soft-deleted generation under a
// name; several (dropped, recreated, dropped again) need --uuid.
func softDeletedUUID(ctx context.Context, c *client, levels []string, name string) (string, error) {
	ident := strings.Join(levels, ".") + "." + name
	all, err := softDeleted(ctx, c, strings.Join(levels, "."), tableKind)
	if err != nil {
		return "", err
	}
	var uuids []string
	for _, v := range all {
		if v.Name == name && !slices.Contains(uuids, v.TableUUID) {
			uuids = append(uuids, v.TableUUID)
		}
	}
	switch len(uuids) {
	case 0:
		return "", fmt.Errorf("no soft-deleted table %s in catalog %s (icehold tables soft-deleted lists them)", ident, c.catalog)
	case 1:
		return uuids[0], nil
	}
	return "", fmt.Errorf("%d soft-deleted generations of %s (table uuids %s): name one with --uuid", len(uuids), ident, strings.Join(uuids, ", "))
}

// dropCmd drops a table through the Iceberg REST route, as clients do; with
// --purge the answer's Icehold-Purge-Job header names the purge job, which
// --watch follows.
func dropCmd(conn *connOpts) *cobra.Command {
	var purge, watchIt, yes bool
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "drop NAMESPACE.TABLE",
		Short: "Drop a table (--purge: delete its files too; --watch: follow the purge job)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if watchIt && !purge {
				return usagef(cmd, "--watch follows a purge: add --purge")
			}
			levels, name, err := splitIdent(args[0])
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			if purge {
				if err := confirm(cmd, yes, "tables drop --purge deletes "+args[0]+" and every file its metadata reaches, for good (no undrop)"); err != nil {
					return err
				}
			}
			c, err := conn.connect(cmd.Context())
			if err != nil {
				return err
			}
			path := tableKind.restPath(c, levels, name)
			if purge {
				path += "?purgeRequested=true"
			}
			h, err := c.send(cmd.Context(), "DELETE", path, nil, nil)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			id := h.Get(router.PurgeJobHeader)
			if !purge {
				if kept := h.Values(router.FilesKeptHeader); len(kept) > 0 {
					fmt.Fprintf(out, "dropped %s\n", args[0])
					fmt.Fprintf(out, "its files stay under %s: catalog %s has no soft delete, so nothing records them and no purge will delete them "+
						"(delete them with aws s3 rm --recursive, or register the table's metadata again)\n", strings.Join(kept, ", "), c.catalog)
					return nil
				}
				return softDropped(cmd.Context(), c, out, args[0], levels, name)
			}
			if id == "" { // a server from before the header
				_, err := fmt.Fprintf(out, "dropped %s; its purge job: icehold jobs list --table %s\n", args[0], name)
				return err
			}
			fmt.Fprintf(out, "dropped %s; ", args[0])
			return startedJob(cmd.Context(), c, out, id, watchIt, every)
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "delete the table's files too (a purge job)")
	cmd.Flags().BoolVar(&watchIt, "watch", false, "with --purge: follow the purge job until it ends")
	cmd.Flags().DurationVar(&every, "every", time.Second, "--watch: refresh interval")
	yesFlag(cmd, &yes)
	return cmd
}

// softDropped says what a drop on a catalog with soft delete kept: until
// when the table is recoverable and how (the drop answers 204 without a
// body, as the Iceberg spec says, so the record is read back: the newest
// under the name).
func softDropped(ctx context.Context, c *client, out io.Writer, ident string, levels []string, name string) error {
	all, err := softDeleted(ctx, c, strings.Join(levels, "."), tableKind)
	if err != nil {
		_, err := fmt.Fprintf(out, "dropped %s (its soft-deleted record could not be read: %v)\n", ident, err)
		return err
	}
	var r *softdelete.View
	gens := 0
	for i, v := range all {
		if v.Name != name {
			continue
		}
		gens++
		if r == nil || v.DroppedAt >= r.DroppedAt {
			r = &all[i]
		}
	}
	if r == nil {
		_, err := fmt.Fprintf(out, "dropped %s\n", ident)
		return err
	}
	undo := "icehold tables undrop " + ident
	if gens > 1 {
		undo += " --uuid " + r.TableUUID
	}
	fmt.Fprintf(out, "soft-deleted %s (table uuid %s): recoverable until %s (hold period %s); undo: %s\n", ident, r.TableUUID, r.PurgeAt, r.HoldPeriod, undo)
	if r.LegalHold {
		fmt.Fprintf(out, "under legal hold: kept past %s until the hold is released (icehold tables legal-hold %s --off)\n", r.PurgeAt, ident)
	}
	return nil
}

// startedJob reports a purge job a request started, and follows it with
// --watch.
func startedJob(ctx context.Context, c *client, out io.Writer, id string, follow bool, every time.Duration) error {
	if !follow {
		_, err := fmt.Fprintf(out, "purge job %s started (icehold jobs watch %s)\n", id, id)
		return err
	}
	fmt.Fprintf(out, "purge job %s started\n", id)
	return watchJob(ctx, c, out, every, id)
}
