package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/shared/localserver"
)

func localCmd(conn *connOpts) *cobra.Command {
	var o localserver.Options
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run the whole product on this machine (make run); redrive its DLQ; manage its tokens",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Dir = conn.dir
			return serveLocal(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", localserver.DefaultAddr, "REST API listen address")
	f.StringVar(&o.S3Addr, "s3-addr", localserver.DefaultS3Addr, "embedded S3 listen address")
	f.StringVar(&o.DynamoAddr, "dynamodb-addr", localserver.DefaultDynamoAddr, "embedded DynamoDB listen address")
	f.StringVar(&o.SQSAddr, "sqs-addr", localserver.DefaultSQSAddr, "embedded SQS listen address")
	f.StringVar(&o.SFNAddr, "stepfunctions-addr", localserver.DefaultSFNAddr, "embedded Step Functions listen address")
	cmd.AddCommand(redriveCmd(conn), tokenCmd(conn))
	return cmd
}

// serveLocal runs the local server, state in o.Dir, until ctx ends.
func serveLocal(ctx context.Context, o localserver.Options, out io.Writer) error {
	dir := &o.Dir // the banner below names it
	srv, err := localserver.Start(ctx, o)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprint(out, srv.Info.HowTo(*dir))
	<-ctx.Done()
	return nil
}
