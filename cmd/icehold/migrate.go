package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// runMigrate runs a one-time store migration against a deployed stack's
// DynamoDB table with the operator's AWS credentials (make run runs them
// itself at start).
func runMigrate(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	table := fs.String("table", os.Getenv("ICEHOLD_TABLE"), "the stack's DynamoDB table (output TableName)")
	region := fs.String("region", os.Getenv("AWS_REGION"), "AWS region")
	endpoint := fs.String("endpoint-url", "", "DynamoDB and S3 endpoint (LocalStack); empty: AWS")
	dynamo := fs.String("dynamodb-endpoint", "", "DynamoDB endpoint, when it differs from --endpoint-url")
	s3 := fs.String("s3-endpoint", "", "S3 endpoint, when it differs from --endpoint-url")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: icehold migrate ownership|children --table TABLE [--region R]

ownership  claim the location of every catalog, table and unfinished purge
           job created before the ownership index (idempotent; prints what
           it claimed and what owns nothing because another owner holds it)
children   count every namespace's tables and child namespaces for the
           counter a namespace drop is conditioned on (run before traffic)
`)
		fs.PrintDefaults()
	}
	if len(args) == 0 || (args[0] != "ownership" && args[0] != "children") {
		fs.Usage()
		return errUsage
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *table == "" {
		return fmt.Errorf("--table (or ICEHOLD_TABLE) names the stack's DynamoDB table")
	}
	ctx := context.Background()
	ep := awsconfig.Endpoints{Region: *region, DynamoDB: *endpoint, S3: *endpoint}
	if *dynamo != "" {
		ep.DynamoDB = *dynamo
	}
	if *s3 != "" {
		ep.S3 = *s3
	}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		return err
	}
	st := store.New(awsconfig.DynamoDB(cfg, ep), *table)
	cat := catalog.New(st, objects.New(awsconfig.S3(cfg, ep)))
	if args[0] == "children" {
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
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
