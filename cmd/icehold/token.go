package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/local/server"
)

const tokenHelp = `Local bearer tokens:
  icehold local token add PRINCIPAL            make a bearer token for PRINCIPAL; prints only the token
  icehold local token list                     principals and their tokens, masked
  icehold local token revoke TOKEN|PRINCIPAL   remove a token, or every token of a principal

They edit <dir>/tokens.json (--dir, default .icehold), whether or not the
local server runs; a running server sees the change from its next request on.
A new principal holds no privilege until granted one:
  icehold grants set PRINCIPAL TABLE_READ
`

// tokenCmd is `icehold local token ...`: only the token (add) or the
// listing goes to stdout, notes go to stderr.
func tokenCmd(conn *connOpts) *cobra.Command {
	add := &cobra.Command{
		Use:   "add PRINCIPAL",
		Short: "Make a bearer token for PRINCIPAL; prints only the token",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := conn.stateDir()
			tok, err := server.AddTokenTo(dir, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			fmt.Fprintf(cmd.ErrOrStderr(), "added a token for %s to %s (it holds what %s is granted)\n", args[0], dir, args[0])
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "Principals and their tokens, masked",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			toks, err := server.ListTokens(conn.stateDir())
			if err != nil {
				return err
			}
			if conn.output == "json" {
				type row struct {
					Principal string `json:"principal"`
					Token     string `json:"token"` // masked
				}
				rows := []row{}
				for _, t := range toks {
					rows = append(rows, row{t.Principal, server.MaskToken(t.Token)})
				}
				return writeJSON(cmd.OutOrStdout(), map[string]any{"tokens": rows})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PRINCIPAL\tTOKEN")
			for _, t := range toks {
				fmt.Fprintf(tw, "%s\t%s\n", t.Principal, server.MaskToken(t.Token))
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke TOKEN|PRINCIPAL",
		Short: "Remove a token, or every token of a principal",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			revoked, err := server.RevokeTokens(conn.stateDir(), args[0])
			if err != nil {
				return err
			}
			for _, t := range revoked {
				fmt.Fprintf(cmd.OutOrStdout(), "revoked %s (%s)\n", server.MaskToken(t.Token), t.Principal)
			}
			return nil
		},
	}
	g := group("token", "Local bearer tokens (a running server sees changes at once)", add, list, revoke)
	g.Long = tokenHelp
	return g
}
