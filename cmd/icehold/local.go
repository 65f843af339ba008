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
	var awsEP string
	var ext localserver.External
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run the whole product on this machine (make run); redrive its DLQ; manage its tokens",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Dir = conn.dir
			o.External = localserver.ExternalAt(awsEP)
			for _, e := range []struct{ val, dst *string }{
				{&ext.DynamoDB, &o.External.DynamoDB}, {&ext.S3, &o.External.S3}, {&ext.SQS, &o.External.SQS}, {&ext.Events, &o.External.Events},
			} {
				if *e.val != "" {
					*e.dst = *e.val
				}
			}
			return serveLocal(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", localserver.DefaultAddr, "REST API listen address")
	f.StringVar(&o.S3Addr, "s3-addr", localserver.DefaultS3Addr, "embedded S3 listen address")
	f.StringVar(&o.DynamoAddr, "dynamodb-addr", localserver.DefaultDynamoAddr, "embedded DynamoDB listen address")
	f.StringVar(&o.SQSAddr, "sqs-addr", localserver.DefaultSQSAddr, "embedded SQS listen address")
	f.StringVar(&o.SFNAddr, "stepfunctions-addr", localserver.DefaultSFNAddr, "embedded Step Functions listen address")
	f.StringVar(&awsEP, "aws-endpoint", "", "put DynamoDB, S3, SQS and EventBridge on this endpoint (moto_server, LocalStack) instead of the embedded emulators; Step Functions stays embedded")
	f.StringVar(&ext.DynamoDB, "dynamodb-endpoint", "", "DynamoDB endpoint (overrides --aws-endpoint)")
	f.StringVar(&ext.S3, "s3-endpoint", "", "S3 endpoint (overrides --aws-endpoint)")
	f.StringVar(&ext.SQS, "sqs-endpoint", "", "SQS endpoint (overrides --aws-endpoint)")
	f.StringVar(&ext.Events, "events-endpoint", "", "EventBridge endpoint (overrides --aws-endpoint)")
	cmd.AddCommand(redriveCmd(conn), tokenCmd(conn), iamCmd(conn))
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
