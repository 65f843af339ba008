package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/local/server"
)

const iamHelp = `Local IAM users, whose keys sign requests with SigV4 as clients of the
deployed stack do (service execute-api; the embedded S3 and STS check them too):
  icehold local iam add-user NAME   make user NAME; prints its key pair as shell exports
  icehold local iam list            users, their principals and access key ids

  eval "$(icehold local iam add-user alice)"   # then any AWS SDK client signs as alice

They edit <dir>/iam.json (--dir, default .icehold), whether or not the local
server runs. The principal is arn:aws:iam::000000000000:user/NAME; the local
account's principals are admins locally (grants narrow other principals).
`

// iamCmd is `icehold local iam ...`: the key pair (add-user) or the listing
// goes to stdout, notes go to stderr.
func iamCmd(conn *connOpts) *cobra.Command {
	add := &cobra.Command{
		Use:   "add-user NAME",
		Short: "Make a local IAM user; prints its access key pair as shell exports",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := conn.stateDir()
			u, err := server.AddUser(dir, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "export AWS_ACCESS_KEY_ID=%s\n", u.AccessKeyID)
			fmt.Fprintf(out, "export AWS_SECRET_ACCESS_KEY=%s\n", u.SecretAccessKey)
			fmt.Fprintf(out, "export AWS_REGION=%s\n", server.Region)
			fmt.Fprintf(cmd.ErrOrStderr(), "added user %s (%s) to %s\n", u.Name, u.Principal(), dir)
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "Local IAM users",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			us, err := server.ListUsers(conn.stateDir())
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "USER\tPRINCIPAL\tACCESS KEY ID")
			for _, u := range us {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", u.Name, u.Principal(), u.AccessKeyID)
			}
			return tw.Flush()
		},
	}
	g := group("iam", "Local IAM users that sign with SigV4", add, list)
	g.Long = iamHelp
	return g
}
