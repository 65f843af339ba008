package main

import (
	"cmp"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

// propsFlag collects --property k=v flags.
type propsFlag map[string]string

func (f propsFlag) String() string { return fmt.Sprint(len(f)) }

func (f propsFlag) Type() string { return "key=value" }

func (f propsFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: write a property as key=value", s)
	}
	f[k] = v
	return nil
}

func catalogsCmd(conn *connOpts) *cobra.Command {
	printCatalog := func(cmd *cobra.Command, c *client, info catalog.CatalogInfo) error {
		return c.emit(cmd.OutOrStdout(), info, func(out io.Writer) error {
			w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
			fmt.Fprintf(w, "name\t%s\nwarehouse\t%s\ncreated\t%s by %s\n", info.Name, info.Warehouse, info.CreatedAt, info.CreatedBy)
			keys := make([]string, 0, len(info.Properties))
			for k := range info.Properties {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(w, "property\t%s=%s\n", k, info.Properties[k])
			}
			return w.Flush()
		})
	}
	var warehouse string
	// call sends a catalog request and prints the catalog it answers.
	call := func(method string, path func(c *client, args []string) string, body func(args []string) any) func(*cobra.Command, []string) error {
		return conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			var info catalog.CatalogInfo
			if err := c.do(cmd.Context(), method, path(c, args), body(args), &info); err != nil {
				return err
			}
			return printCatalog(cmd, c, info)
		})
	}
	// named is the catalog NAME names, default --catalog's.
	named := func(c *client, args []string) string {
		name := c.catalog
		if len(args) == 1 {
			name = args[0]
		}
		return "/lifecycle/v1/catalogs/" + url.PathEscape(name)
	}

	props := propsFlag{}
	create := &cobra.Command{
		Use:   "create NAME --warehouse s3://bucket/prefix",
		Short: "Create a catalog (needs CATALOG_MANAGE on the system scope)",
		Args:  exactArgs(1),
		RunE: call("POST", func(*client, []string) string { return "/lifecycle/v1/catalogs" }, func(args []string) any {
			return map[string]any{"name": args[0], "warehouse": warehouse, "properties": props}
		}),
	}
	create.Flags().StringVar(&warehouse, "warehouse", "", "the catalog's warehouse location")
	create.Flags().Var(props, "property", "a catalog property key=value (repeat for more)")

	show := &cobra.Command{
		Use:   "show [NAME]",
		Short: "Show a catalog (default: --catalog's)",
		Args:  cobra.MaximumNArgs(1),
		RunE:  call("GET", named, func([]string) any { return nil }),
	}

	set := propsFlag{}
	var unset []string
	update := &cobra.Command{
		Use:   "set-properties [NAME] [--set k=v …] [--unset k …]",
		Short: "Change a catalog's properties (default: --catalog's)",
		Args:  cobra.MaximumNArgs(1),
		RunE: call("POST", func(c *client, args []string) string { return named(c, args) + "/properties" }, func([]string) any {
			body := map[string]any{"updates": set}
			if unset != nil { // the lifecycle API refuses null for a list
				body["removals"] = unset
			}
			return body
		}),
	}
	update.Flags().Var(set, "set", "a property to set, key=value (repeat for more)")
	update.Flags().StringSliceVar(&unset, "unset", nil, "a property to remove (repeat for more)")
	return group("catalogs", "Catalogs: list, create, show, set-properties", catalogsListCmd(conn), create, show, update)
}

// catalogsListCmd is `icehold catalogs list`. The API has no listing of
// catalogs (they have no index of their own), so it reads the stack's
// DynamoDB table itself, as the migrate commands do: the local server's
// from local.json, a deployed stack's with --table and AWS credentials.
func catalogsListCmd(conn *connOpts) *cobra.Command {
	var table, endpoint string
	cmd := &cobra.Command{
		Use:   "list [--table TABLE]",
		Short: "List every catalog: the local server's, or a stack's (--table, AWS credentials: a scan of its table)",
		Long: `Lists every catalog: name, warehouse, soft delete, who created it and when.
The API has no listing of catalogs, so this reads the stack's DynamoDB table:
the local server's (local.json), or a deployed stack's named by --table
(ICEHOLD_TABLE, the output TableName) with your AWS credentials (--profile,
--region): dynamodb:Scan on the table. A scan reads every item, so it costs
in proportion to the table's size: an operator's command, not an engine's.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := conn.localInfo()
			if err != nil {
				return err
			}
			ep := awsconfig.Endpoints{Region: cmp.Or(conn.region, os.Getenv("AWS_REGION")), Profile: conn.profile, DynamoDB: endpoint}
			local := info != nil && table == "" && (conn.url == "" || sameServer(conn.url, info.RESTURL))
			switch {
			case local:
				table = info.Table
				ep = awsconfig.Endpoints{DynamoDB: info.DynamoDB, Region: info.Region, AccessKey: info.AccessKey, SecretKey: info.SecretKey}
			case table == "":
				return usagef(cmd, "name the stack's DynamoDB table: --table (or ICEHOLD_TABLE), its output TableName")
			}
			cfg, err := awsconfig.Load(cmd.Context(), ep)
			if err != nil {
				return err
			}
			all, err := store.New(awsconfig.DynamoDB(cfg, ep), table).ListCatalogs(cmd.Context())
			if err != nil {
				return fmt.Errorf("list the catalogs of table %s: %w", table, err)
			}
			sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
			infos := make([]catalog.CatalogInfo, len(all))
			for i, c := range all {
				infos[i] = catalog.CatalogInfo{Name: c.Name, Warehouse: c.Warehouse, Properties: c.Properties, CreatedAt: c.CreatedAt, CreatedBy: c.CreatedBy}
			}
			if conn.output == "json" {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"catalogs": infos})
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tWAREHOUSE\tSOFT DELETE\tCREATED\tBY")
			for _, c := range infos {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Warehouse, cmp.Or(c.Properties[catalog.PropSoftDeleteEnabled], "false"), c.CreatedAt, c.CreatedBy)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&table, "table", os.Getenv("ICEHOLD_TABLE"), "a deployed stack's DynamoDB table (output TableName; env ICEHOLD_TABLE)")
	cmd.Flags().StringVar(&endpoint, "endpoint-url", "", "DynamoDB endpoint (LocalStack); empty: AWS")
	return cmd
}

// grantPath is a principal's grant on the catalog (or "*", the system
// scope); pattern: the principal is an IAM pattern.
func grantPath(c *client, principal string, pattern bool) string {
	p := "/lifecycle/v1/catalogs/" + url.PathEscape(c.catalog) + "/grants/" + url.PathEscape(principal)
	if pattern {
		p += "?pattern=true"
	}
	return p
}

func grantsCmd(conn *connOpts) *cobra.Command {
	type grant struct {
		Principal  string   `json:"principal,omitempty"`
		Privileges []string `json:"privileges"`
		Pattern    bool     `json:"pattern,omitempty"`
	}
	var pattern bool
	print := func(cmd *cobra.Command, c *client, g grant) error {
		return c.emit(cmd.OutOrStdout(), g, func(out io.Writer) error {
			what := g.Principal
			if g.Pattern {
				what = "the pattern " + what
			}
			_, err := fmt.Fprintf(out, "%s on %s: %s\n", what, c.catalog, strings.Join(g.Privileges, ", "))
			return err
		})
	}
	privileges := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		var out []string
		for _, p := range authz.All {
			out = append(out, string(p))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	show := &cobra.Command{
		Use:   "show PRINCIPAL",
		Short: "Show what a principal is granted on the catalog (--catalog '*': the system scope)",
		Args:  exactArgs(1),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			var g grant
			if err := c.do(cmd.Context(), "GET", grantPath(c, args[0], pattern), nil, &g); err != nil {
				return err
			}
			return print(cmd, c, g)
		}),
	}
	set := &cobra.Command{
		Use:   "set PRINCIPAL PRIVILEGE…",
		Short: "Grant a principal exactly these privileges on the catalog (replaces its grant)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef(cmd, "%s", cmd.UseLine())
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return privileges(cmd, args, s)
		},
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			var g grant
			if err := c.do(cmd.Context(), "PUT", grantPath(c, args[0], pattern), grant{Privileges: args[1:]}, &g); err != nil {
				return err
			}
			if g.Principal == "" {
				g = grant{Principal: args[0], Privileges: args[1:], Pattern: pattern}
			}
			return print(cmd, c, g)
		}),
	}
	revoke := &cobra.Command{
		Use:   "revoke PRINCIPAL",
		Short: "Remove a principal's grant on the catalog",
		Args:  exactArgs(1),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			if err := c.do(cmd.Context(), "DELETE", grantPath(c, args[0], pattern), nil, nil); err != nil {
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "revoked the grant of %s on %s\n", args[0], c.catalog)
			return err
		}),
	}
	for _, c := range []*cobra.Command{show, set, revoke} {
		c.Flags().BoolVar(&pattern, "pattern", false, "PRINCIPAL is an IAM pattern ('*', '?'; 'arn:aws:sts::123456789012:assumed-role/etl-*'); without it a principal's own name")
	}
	return group("grants", "Grants: show, set, revoke (a principal's privileges on a catalog)", show, set, revoke)
}
