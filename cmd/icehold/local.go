package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/local/server"
)

func localCmd(conn *connOpts) *cobra.Command {
	var o server.Options
	var awsEP string
	var ports int
	var ext server.External
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run the whole product on this machine (make run); its AWS environment, schedules, faults, DLQ redrive and tokens",
		Long: `Runs the whole product on this machine (make run): the REST catalog and the
AWS services it uses, state in --dir (.icehold). It listens on six ports from
--ports BASE up (make run PORTS=BASE):

  BASE     every AWS service, routed by the service a request is signed for
           (AWS_ENDPOINT_URL / --endpoint-url: icehold local env)
  BASE+1   the REST catalog and the lifecycle API
  BASE+2   S3, BASE+3 DynamoDB, BASE+4 SQS, BASE+5 Step Functions

--ports 0 picks free ports (local.json names them).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ports < 0 || ports > 65535-5 {
				return usagef(cmd, "--ports %d: want a base port from 1 to 65530 (it and the 5 after it), or 0 for free ports", ports)
			}
			o.Dir = conn.dir
			o.AtPorts("", ports)
			o.External = server.ExternalAt(awsEP)
			for _, e := range []struct{ val, dst *string }{
				{&ext.DynamoDB, &o.External.DynamoDB}, {&ext.S3, &o.External.S3}, {&ext.SQS, &o.External.SQS}, {&ext.Events, &o.External.Events},
			} {
				if *e.val != "" {
					*e.dst = *e.val
				}
			}
			return portHint(serveLocal(cmd.Context(), o, cmd.OutOrStdout()), ports)
		},
	}
	f := cmd.Flags()
	f.IntVar(&ports, "ports", server.DefaultPorts, "the first of the six ports it listens on (make run PORTS=…); 0 picks free ports")
	f.StringVar(&awsEP, "aws-endpoint", "", "put DynamoDB, S3, SQS and EventBridge on this endpoint (moto_server, LocalStack) instead of the embedded emulators; Step Functions stays embedded")
	f.StringVar(&ext.DynamoDB, "dynamodb-endpoint", "", "DynamoDB endpoint (overrides --aws-endpoint)")
	f.StringVar(&ext.S3, "s3-endpoint", "", "S3 endpoint (overrides --aws-endpoint)")
	f.StringVar(&ext.SQS, "sqs-endpoint", "", "SQS endpoint (overrides --aws-endpoint)")
	f.StringVar(&ext.Events, "events-endpoint", "", "EventBridge endpoint (overrides --aws-endpoint)")
	cmd.AddCommand(envCmd(conn), runScheduleCmd(conn), faultCmd(conn), redriveCmd(conn), tokenCmd(conn), iamCmd(conn))
	return cmd
}

// portHint names the flag that moves a port another program holds.
func portHint(err error, base int) error {
	var be *server.BindError
	if !errors.As(err, &be) || !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	free := freeBase(base)
	if free == 0 {
		return fmt.Errorf("%w: another program holds that port (--ports %d uses %d to %d); start with --ports 0, which picks free ports", err, base, base, base+5)
	}
	return fmt.Errorf("%w: another program holds that port (--ports %d uses %d to %d); start on other ports with --ports BASE, or make run PORTS=BASE "+
		"(%d to %d are free now: --ports %d, make run PORTS=%d; --ports 0 picks free ports itself)", err, base, base, base+5, free, free+5, free, free)
}

// freeBase is a base port after busy whose six ports are free now (a
// suggestion: another program may take one before make run does), 0 if
// none is found soon.
func freeBase(busy int) int {
	base := busy
	for try := 0; try < 500; try++ {
		base += 10
		if base > 65535-5 {
			base = 10000
		}
		ok := true
		for p := base; p < base+6 && ok; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if ok = err == nil; ok {
				l.Close()
			}
		}
		if ok {
			return base
		}
	}
	return 0
}

// serveLocal runs the local server, state in o.Dir, until ctx ends.
func serveLocal(ctx context.Context, o server.Options, out io.Writer) error {
	dir := &o.Dir // the banner below names it
	srv, err := server.Start(ctx, o)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprint(out, srv.Info.HowTo(*dir))
	<-ctx.Done()
	return nil
}
