package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// kind is what the soft-delete commands act on: tables or views, which
// share their lifecycle routes but for the uuid's name and the path.
type kind struct {
	noun    string // "table" or "view"
	upper   string // "TABLE" or "VIEW", in usage lines
	connect func(cmd *cobra.Command, conn *connOpts, ident string) (*client, string, error)
}

var (
	tableKind = kind{noun: "table", upper: "TABLE", connect: tableClient}
	viewKind  = kind{noun: "view", upper: "VIEW", connect: viewClient}
)

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
