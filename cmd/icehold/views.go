package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// viewsCmd is `icehold views`: a view's lifecycle, as tables' (a view's
// legal hold is `icehold tables legal-hold VIEW_UUID`: that route takes
// any soft-deleted uuid).
func viewsCmd(conn *connOpts) *cobra.Command {
	drop := &cobra.Command{
		Use:   "drop NAMESPACE.VIEW",
		Short: "Drop a view (soft delete on a catalog with soft delete)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, path, err := viewKind.rest(cmd, conn, args[0])
			if err != nil {
				return err
			}
			if err := c.do(cmd.Context(), "DELETE", path, nil, nil); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "dropped view %s\n", args[0])
			return err
		},
	}

	return group("views", "Views: list, drop, soft-deleted, undrop, purge-now (legal hold: icehold tables legal-hold VIEW_UUID)",
		listCmd(conn, viewKind), drop, softDeletedCmd(conn, viewKind), undropCmd(conn, viewKind), purgeNowCmd(conn, viewKind, "Delete a soft-deleted view's metadata files for good, now"))
}
