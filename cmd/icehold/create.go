package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/catalog"
)

// primitives are the Iceberg types --schema takes (no nested or
// parameterized ones: an engine makes those).
var primitives = []string{"boolean", "int", "long", "float", "double", "date", "time", "timestamp", "timestamptz", "string", "uuid", "binary"}

type field struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
}

// parseSchema reads --schema name:type,name:type (every field optional).
func parseSchema(s string) ([]field, error) {
	var out []field
	for i, part := range strings.Split(s, ",") {
		name, typ, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("--schema %q: write each field as name:type (id:long,note:string)", part)
		}
		if !slices.Contains(primitives, typ) {
			return nil, fmt.Errorf("--schema field %s: type %q, want one of %s", name, typ, strings.Join(primitives, ", "))
		}
		if slices.ContainsFunc(out, func(f field) bool { return f.Name == name }) {
			return nil, fmt.Errorf("--schema names field %s twice", name)
		}
		out = append(out, field{ID: i + 1, Name: name, Type: typ})
	}
	return out, nil
}

// nsPath is a namespace's Iceberg REST route (levels joined by '.' on the
// command line, by the unit separator in the path).
func nsPath(c *client, ns string) string {
	return "/v1/" + url.PathEscape(c.catalog) + "/namespaces/" + url.PathEscape(strings.ReplaceAll(ns, ".", "\x1f"))
}

// namespaceCreateCmd is `icehold namespaces create NS`.
func namespaceCreateCmd(conn *connOpts) *cobra.Command {
	props := propsFlag{}
	cmd := &cobra.Command{
		Use:   "create NAMESPACE [--property k=v …]",
		Short: "Create a namespace (levels joined by '.': sales.eu is eu inside sales)",
		Args:  exactArgs(1),
		RunE: conn.run(func(cmd *cobra.Command, c *client, args []string) error {
			var res struct {
				Namespace  []string          `json:"namespace"`
				Properties map[string]string `json:"properties"`
			}
			body := map[string]any{"namespace": strings.Split(args[0], "."), "properties": props}
			if err := c.do(cmd.Context(), "POST", "/v1/"+url.PathEscape(c.catalog)+"/namespaces", body, &res); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), res, func(out io.Writer) error {
				_, err := fmt.Fprintf(out, "created namespace %s in catalog %s\n", args[0], c.catalog)
				return err
			})
		}),
	}
	cmd.Flags().Var(props, "property", "a namespace property key=value (repeat for more; soft-delete.hold-period=P30D holds its tables' drops 30 days)")
	return cmd
}

// tableCreateCmd is `icehold tables create NS.T --schema …`: an
// unpartitioned table, for trying things out (engines create real ones).
func tableCreateCmd(conn *connOpts) *cobra.Command {
	props := propsFlag{}
	var schema string
	cmd := &cobra.Command{
		Use:     "create NAMESPACE.TABLE --schema name:type,… [--property k=v …]",
		Short:   "Create an unpartitioned table with a simple schema (engines create the real ones)",
		Example: "  icehold tables create sales.orders --schema id:long,amount:double,day:date",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			levels, name, err := splitIdent(args[0])
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			if schema == "" {
				return usagef(cmd, "name the columns: --schema name:type,… (types: %s)", strings.Join(primitives, ", "))
			}
			fields, err := parseSchema(schema)
			if err != nil {
				return usagef(cmd, "%v", err)
			}
			c, err := conn.connect(cmd.Context())
			if err != nil {
				return err
			}
			body := map[string]any{"name": name, "properties": props,
				"schema": map[string]any{"type": "struct", "schema-id": 0, "fields": fields}}
			var res loaded
			if err := c.do(cmd.Context(), "POST", nsPath(c, strings.Join(levels, "."))+"/tables", body, &res); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), res, func(out io.Writer) error {
				_, err := fmt.Fprintf(out, "created %s (table uuid %s) at %s\n", args[0], res.Metadata.TableUUID, res.Metadata.Location)
				return err
			})
		},
	}
	cmd.Flags().StringVar(&schema, "schema", "", "the columns, name:type comma-separated (types: "+strings.Join(primitives, ", ")+")")
	cmd.Flags().Var(props, "property", "a table property key=value (repeat for more)")
	return cmd
}

// loaded is a load or create answer of the Iceberg REST API, in the parts
// the CLI shows.
type loaded struct {
	MetadataLocation string `json:"metadata-location"`
	Metadata         struct {
		FormatVersion     int               `json:"format-version"`
		TableUUID         string            `json:"table-uuid"`
		Location          string            `json:"location"`
		CurrentSchemaID   int               `json:"current-schema-id"`
		Properties        map[string]string `json:"properties"`
		CurrentSnapshotID *int64            `json:"current-snapshot-id"`
		Snapshots         []json.RawMessage `json:"snapshots"`
		Schemas           []struct {
			SchemaID int `json:"schema-id"`
			Fields   []struct {
				Name string          `json:"name"`
				Type json.RawMessage `json:"type"`
			} `json:"fields"`
		} `json:"schemas"`
	} `json:"metadata"`
}

// tableShowCmd is `icehold tables show NS.T`.
func tableShowCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAMESPACE.TABLE",
		Short: "Show a table: uuid, location, schema, snapshots, properties, legal hold",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, path, err := tableKind.rest(cmd, conn, args[0])
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.do(cmd.Context(), "GET", path, nil, &raw); err != nil {
				return err
			}
			var t loaded
			if err := json.Unmarshal(raw, &t); err != nil {
				return err
			}
			return c.emit(cmd.OutOrStdout(), raw, func(out io.Writer) error { return printTable(out, args[0], t) })
		},
	}
}

func printTable(out io.Writer, ident string, t loaded) error {
	m := t.Metadata
	var cols []string
	for _, s := range m.Schemas {
		if s.SchemaID == m.CurrentSchemaID {
			for _, f := range s.Fields {
				cols = append(cols, f.Name+" "+typeName(f.Type))
			}
		}
	}
	current := "none"
	if m.CurrentSnapshotID != nil && *m.CurrentSnapshotID >= 0 {
		current = fmt.Sprint(*m.CurrentSnapshotID)
	}
	w := tabwriter.NewWriter(out, 0, 2, 2, ' ', 0)
	fmt.Fprintf(w, "table\t%s\nuuid\t%s\nlocation\t%s\nmetadata\t%s\nformat version\t%d\nschema\t%s\nsnapshots\t%d (current: %s)\nlegal hold\t%v\n",
		ident, m.TableUUID, m.Location, t.MetadataLocation, m.FormatVersion, strings.Join(cols, ", "), len(m.Snapshots), current,
		m.Properties[catalog.PropLegalHold] == "true")
	keys := make([]string, 0, len(m.Properties))
	for k := range m.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "property\t%s=%s\n", k, m.Properties[k])
	}
	return w.Flush()
}

// typeName is a field's type as a schema writes it: a primitive's name, a
// nested type's kind (struct, list, map).
func typeName(raw json.RawMessage) string {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return name
	}
	var nested struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &nested)
	return nested.Type
}
