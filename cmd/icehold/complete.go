package main

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/softdelete"
)

// What an argument names, for shell completion against the server.
const (
	completeNamespace = ""       // a namespace
	completeTable     = "tables" // NAMESPACE.TABLE
	completeView      = "views"  // NAMESPACE.VIEW
)

// completeIdent completes a NAMESPACE[.NAME] argument from the server: the
// namespaces under what is typed so far (with a trailing '.', to go on),
// then the tables or views (leaf) of the namespace typed. Nothing, and no
// file names, when the server cannot be reached.
func completeIdent(conn *connOpts, leaf string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, typed string) ([]string, cobra.ShellCompDirective) {
		none := cobra.ShellCompDirectiveNoFileComp
		if len(args) > 0 {
			return nil, none
		}
		c, err := conn.connect(cmd.Context())
		if err != nil {
			return nil, none
		}
		parent := ""
		if i := strings.LastIndexByte(typed, '.'); i >= 0 {
			parent = typed[:i]
		}
		var out []string
		q := url.Values{}
		if parent != "" {
			q.Set("parent", strings.ReplaceAll(parent, ".", "\x1f"))
		}
		_ = pages(cmd.Context(), c, "/v1/"+url.PathEscape(c.catalog)+"/namespaces", q, func(raw json.RawMessage) (string, error) {
			var page struct {
				Namespaces [][]string `json:"namespaces"`
				Next       string     `json:"next-page-token"`
			}
			err := json.Unmarshal(raw, &page)
			for _, ns := range page.Namespaces {
				out = append(out, strings.Join(ns, ".")+".")
			}
			return page.Next, err
		})
		if leaf == completeNamespace {
			for i := range out {
				out[i] = strings.TrimSuffix(out[i], ".")
			}
		} else if parent != "" {
			ids, _ := identifiers(cmd.Context(), c, nsPath(c, parent)+"/"+leaf)
			for _, t := range ids {
				out = append(out, parent+"."+t.Name)
			}
		}
		out = withPrefix(out, typed)
		for _, o := range out {
			if strings.HasSuffix(o, ".") {
				return out, none | cobra.ShellCompDirectiveNoSpace // a namespace goes on
			}
		}
		return out, none
	}
}

// completeSoftDeleted completes the names of soft-deleted tables or views
// (kind), each with its purge deadline as the description.
func completeSoftDeleted(conn *connOpts, kind string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, typed string) ([]string, cobra.ShellCompDirective) {
		none := cobra.ShellCompDirectiveNoFileComp
		if len(args) > 0 {
			return nil, none
		}
		c, err := conn.connect(cmd.Context())
		if err != nil {
			return nil, none
		}
		var out []string
		_ = pages(cmd.Context(), c, "/lifecycle/v1/catalogs/"+url.PathEscape(c.catalog)+"/soft-deleted-tables", url.Values{"kind": {kind}}, func(raw json.RawMessage) (string, error) {
			var page struct {
				Tables []softdelete.View `json:"tables"`
				Next   string            `json:"next-page-token"`
			}
			err := json.Unmarshal(raw, &page)
			for _, v := range page.Tables {
				if name := strings.Join(v.Namespace, ".") + "." + v.Name; strings.HasPrefix(name, typed) {
					out = append(out, name+"\tsoft-deleted, purge at "+v.PurgeAt)
				}
			}
			return page.Next, err
		})
		return out, none
	}
}

// withPrefix keeps the candidates that start with what is typed.
func withPrefix(cands []string, typed string) []string {
	out := cands[:0]
	for _, c := range cands {
		if strings.HasPrefix(c, typed) {
			out = append(out, c)
		}
	}
	return out
}

// either completes from both functions (a legal hold names a live table
// or a soft-deleted one).
func either(a, b cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, typed string) ([]string, cobra.ShellCompDirective) {
		x, dx := a(cmd, args, typed)
		y, dy := b(cmd, args, typed)
		return append(x, y...), dx | dy
	}
}
