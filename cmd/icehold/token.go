package main

import (
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/icehold/icehold/shared/localserver"
)

const tokenUsage = `usage:
  icehold local token add PRINCIPAL            make a bearer token for PRINCIPAL; prints only the token
  icehold local token list                     principals and their tokens, masked
  icehold local token revoke TOKEN|PRINCIPAL   remove a token, or every token of a principal

They edit <dir>/tokens.json (--dir, default .icehold), whether or not the
local server runs; a running server sees the change from its next request on.
A new principal holds no privilege until granted one:
  curl -X PUT -H "Authorization: Bearer $ADMIN" -d '{"privileges":["TABLE_READ"]}' \
    http://127.0.0.1:8181/lifecycle/v1/catalogs/demo/grants/PRINCIPAL
`

// runToken runs `icehold local token ...`: only the token (add) or the
// listing goes to stdout, notes go to stderr.
func runToken(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w\n%s", errUsage, tokenUsage)
	}
	sub := args[0]
	fs := flag.NewFlagSet("local token "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tokenUsage, "\nflags:\n"); fs.PrintDefaults() }
	dir := fs.String("dir", ".icehold", "state directory of the local server (holds tokens.json)")
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	want := map[string]int{"add": 1, "list": 0, "revoke": 1}
	n, ok := want[sub]
	if !ok {
		return fmt.Errorf("unknown command %q of local token\n%s", sub, tokenUsage)
	}
	if len(pos) != n {
		return fmt.Errorf("%w\n%s", errUsage, tokenUsage)
	}
	switch sub {
	case "add":
		tok, err := localserver.AddTokenTo(*dir, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, tok)
		fmt.Fprintf(stderr, "added a token for %s to %s (it holds what %s is granted)\n", pos[0], *dir, pos[0])
	case "list":
		toks, err := localserver.ListTokens(*dir)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PRINCIPAL\tTOKEN")
		for _, t := range toks {
			fmt.Fprintf(tw, "%s\t%s\n", t.Principal, localserver.MaskToken(t.Token))
		}
		return tw.Flush()
	case "revoke":
		revoked, err := localserver.RevokeTokens(*dir, pos[0])
		if err != nil {
			return err
		}
		for _, t := range revoked {
			fmt.Fprintf(stdout, "revoked %s (%s)\n", localserver.MaskToken(t.Token), t.Principal)
		}
	}
	return nil
}

// parseInterspersed parses flags wherever they stand among the positional
// arguments (`token add user:alice --dir d` as well as `token add --dir d
// user:alice`); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
