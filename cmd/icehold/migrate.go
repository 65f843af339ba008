package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

func migrateCmd(conn *connOpts) *cobra.Command {
	var table, endpoint, dynamo, s3 string
	mk := func(use, short string) *cobra.Command {
		c := &cobra.Command{
			Use:   use + " --table TABLE",
			Short: short,
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if table == "" {
					return usagef(cmd, "--table (or ICEHOLD_TABLE) names the stack's DynamoDB table")
				}
				return runMigrate(cmd.Context(), use, migrateTarget{table: table, region: cmp.Or(conn.region, os.Getenv("AWS_REGION")),
					profile: conn.profile, endpoint: endpoint, dynamo: dynamo, s3: s3}, cmd.OutOrStdout())
			},
		}
		f := c.Flags()
		f.StringVar(&table, "table", os.Getenv("ICEHOLD_TABLE"), "the stack's DynamoDB table (output TableName; env ICEHOLD_TABLE)")
		f.StringVar(&endpoint, "endpoint-url", "", "DynamoDB and S3 endpoint (LocalStack); empty: AWS")
		f.StringVar(&dynamo, "dynamodb-endpoint", "", "DynamoDB endpoint, when it differs from --endpoint-url")
		f.StringVar(&s3, "s3-endpoint", "", "S3 endpoint, when it differs from --endpoint-url")
		return c
	}
	return group("migrate", "One-time store migrations and checks of a deployed stack (AWS credentials; --profile, --region)",
		mk("status", "Which one-time migrations the stack's store has had (done) and which it still needs (pending)"),
		mk("teardown-check", "Before cdk destroy: exits 1 naming the unfinished jobs, FAILED jobs keeping claims and soft-deleted tables a teardown would strand; lists legal-held and unregistered tables apart"),
		mk("ownership", "Claim the location of every catalog, table and unfinished purge job created before the ownership index (idempotent)"),
		mk("children", "Count every namespace's tables and child namespaces for the counter a namespace drop is conditioned on (run before traffic)"))
}

type migrateTarget struct {
	table, region, profile, endpoint, dynamo, s3 string
}

// runMigrate runs a one-time store migration against a deployed stack's
// DynamoDB table with the operator's AWS credentials (make run runs them
// itself at start).
func runMigrate(ctx context.Context, which string, t migrateTarget, out io.Writer) error {
	ep := awsconfig.Endpoints{Region: t.region, DynamoDB: t.endpoint, S3: t.endpoint, Profile: t.profile}
	if t.dynamo != "" {
		ep.DynamoDB = t.dynamo
	}
	if t.s3 != "" {
		ep.S3 = t.s3
	}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		return err
	}
	st := store.New(awsconfig.DynamoDB(cfg, ep), t.table)
	cat := catalog.New(st, objects.New(awsconfig.S3(cfg, ep)))
	if which == "teardown-check" {
		rep, err := cat.Teardown(ctx)
		if err != nil {
			return err
		}
		if err := writeJSON(out, rep); err != nil {
			return err
		}
		if !rep.Empty() {
			return fmt.Errorf("a teardown now would strand %d unfinished jobs (their queues go, their files stay), %d FAILED jobs that keep their claims (nobody could retry or abandon them) and %d soft-deleted tables or views (nothing would purge them): let the jobs end, retry or abandon the FAILED ones (icehold jobs retry|abandon ID), purge-now or undrop the soft-deleted ones (docs/operations.md, Teardown)", len(rep.Jobs), len(rep.Failed), len(rep.SoftDeleted))
		}
		return nil
	}
	if which == "status" {
		// The marker each migration writes when it has run.
		rep := struct {
			Done    []string `json:"done"`
			Pending []string `json:"pending"`
		}{[]string{}, []string{}}
		for _, m := range []struct{ marker, command string }{
			{catalog.OwnershipMigration, "icehold migrate ownership"},
			{catalog.ChildrenMigration, "icehold migrate children"},
		} {
			ok, err := st.Marked(ctx, m.marker)
			if err != nil {
				return fmt.Errorf("read migration marker %s: %w", m.marker, err)
			}
			if ok {
				rep.Done = append(rep.Done, m.marker)
			} else {
				rep.Pending = append(rep.Pending, m.marker+": run "+m.command)
			}
		}
		return writeJSON(out, rep)
	}
	if which == "children" {
		n, err := cat.BackfillChildren(ctx)
		if err != nil {
			return err
		}
		if err := st.Mark(ctx, catalog.ChildrenMigration); err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "{\n  \"namespaces\": %d\n}\n", n)
		return err
	}
	rep, err := cat.BackfillOwnership(ctx)
	if err != nil {
		return err
	}
	if err := st.Mark(ctx, catalog.OwnershipMigration); err != nil {
		return err
	}
	return writeJSON(out, rep)
}
