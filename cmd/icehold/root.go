package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/softdelete"
)

// errUsage marks a command line that does not parse: the error says what
// is wrong and where the help is, and the exit status is 2.
var errUsage = errors.New("usage")

// usageError wraps a flag parse error with the way to the command's help.
func usageError(cmd *cobra.Command, err error) error { return usagef(cmd, "%v", err) }

// usagef is a usage error of cmd, pointing at its help.
func usagef(cmd *cobra.Command, format string, a ...any) error {
	return fmt.Errorf("%w: %s (see '%s --help')", errUsage, fmt.Sprintf(format, a...), cmd.CommandPath())
}

// execute runs one command line on a fresh command tree (tests run many in
// one process; flags keep no state between them). A question (confirm) is
// asked only when both stdin and stderr are a terminal.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return executeIn(ctx, args, os.Stdin, isTerminal(os.Stdin) && isTerminal(stderr), stdout, stderr)
}

// executeIn is execute with the input a question reads and whether it is a
// terminal (tests stand in for one).
func executeIn(ctx context.Context, args []string, stdin io.Reader, terminal bool, stdout, stderr io.Writer) error {
	root := newRoot(stdout, stderr)
	root.SetIn(stdin)
	root.SetArgs(goFlags(args))
	ctx = context.WithValue(ctx, terminalKey{}, terminal)
	return explain(root.ExecuteContext(ctx))
}

// goFlags spells Go's single-dash long flags (-dir X, from before cobra) as
// --dir X; one letter after the dash stays a shorthand (-o json, -h), and
// nothing after "--" changes.
func goFlags(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "--" {
			copy(out[i:], args[i:])
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && unicode.IsLetter(rune(a[1])) {
			a = "-" + a
		}
		out[i] = a
	}
	return out
}

// newRoot builds the command tree. The connection flags are persistent on
// the root, so every verb takes them in the same spelling, before or after
// its arguments.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	conn := &connOpts{}
	root := &cobra.Command{
		Use:   "icehold",
		Short: "The table-lifecycle Iceberg REST catalog: operator CLI and local server",
		Long: `icehold: the table-lifecycle Iceberg REST catalog.

Every verb that talks to the API finds its server and credentials the same way:
  --url / ICEHOLD_URL      the API; default: the local server of --dir /
                           ICEHOLD_DIR, else of the nearest .icehold folder here
                           or in a parent folder (its local.json, which make run
                           writes)
  --token / ICEHOLD_TOKEN  a bearer token; default: the local server's admin
                           token, when --url is that server
  --profile P, --sigv4, ICEHOLD_AUTH=sigv4
                           sign with SigV4 for API Gateway's IAM auth (AWS), with
                           profile P or the default credential chain; an
                           execute-api URL without a token is signed too
  --region                 the SigV4 region; default: the execute-api URL's,
                           else the AWS config's
  --catalog / ICEHOLD_CATALOG  the catalog; default: the local server's, else demo
  --output table|json      how answers print

Exit status: 0 done, 1 failed, 2 the command line does not parse.
Shell completion: icehold completion bash|zsh|fish --help.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Alone it shows its help; an unknown verb is a usage error.
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(usageError)
	conn.register(root)
	root.CompletionOptions.HiddenDefaultCmd = false

	root.AddCommand(
		localCmd(conn),
		jobsCmd(conn),
		namespacesCmd(conn),
		tablesCmd(conn),
		viewsCmd(conn),
		partitionsCmd(conn),
		retentionCmd(conn),
		catalogsCmd(conn),
		grantsCmd(conn),
		invokeCmd(conn),
		migrateCmd(conn),
		preflightCmd(conn),
	)
	addCompletions(root, conn)
	return root
}

// addCompletions gives every argument that names a namespace, table, view
// or soft-deleted one its completion from the server (job ids: jobs.go).
func addCompletions(root *cobra.Command, conn *connOpts) {
	ns, tbl, view := completeIdent(conn, completeNamespace), completeIdent(conn, completeTable), completeIdent(conn, completeView)
	softTable, softView := completeSoftDeleted(conn, softdelete.KindTable), completeSoftDeleted(conn, softdelete.KindView)
	by := map[string]cobra.CompletionFunc{
		"namespaces list": ns, "namespaces create": ns, "tables list": ns, "views list": ns,
		"tables create": tbl, "tables show": tbl, "tables drop": tbl, "tables verify": tbl, "tables repair": tbl,
		"partitions drop": tbl, "retention set": tbl, "retention show": tbl, "retention clear": tbl, "local fault deny-deletes": tbl,
		"jobs storage-sweep": tbl,
		"tables undrop":      softTable, "tables purge-now": softTable, "tables legal-hold": either(tbl, softTable),
		"views drop": view, "views undrop": softView, "views purge-now": softView,
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f, ok := by[strings.TrimPrefix(c.CommandPath(), root.Name()+" ")]; ok {
			c.ValidArgsFunction = f
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// group is a command that only holds verbs: alone it fails with its usage
// (a script that forgot the verb should not pass), with an unknown verb it
// says so; -h prints its help.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			return usagef(cmd, "%s needs a verb: %s", cmd.CommandPath(), strings.Join(names, ", "))
		},
	}
	g.AddCommand(subs...)
	return g
}

// noArgs refuses arguments naming no verb of the command.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef(cmd, "unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return nil
}

// exactArgs wants n positional arguments, named in the command's Use.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef(cmd, "%s takes %d argument(s), got %d: %s", cmd.CommandPath(), n, len(args), cmd.UseLine())
		}
		return nil
	}
}

// fixedValues completes a flag from a fixed list.
func fixedValues(vals ...string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return vals, cobra.ShellCompDirectiveNoFileComp
	}
}
