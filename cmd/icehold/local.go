package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/icehold/icehold/shared/awsconfig"
	"os"
	"os/signal"
	"syscall"

	"github.com/icehold/icehold/shared/localserver"
)

func runLocal(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serveLocal(ctx, args, os.Stdout)
}

// serveLocal runs the local server until ctx ends.
func serveLocal(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	dir := fs.String("dir", ".icehold", "state directory (survives restarts)")
	addr := fs.String("addr", localserver.DefaultAddr, "REST API listen address")
	s3Addr := fs.String("s3-addr", localserver.DefaultS3Addr, "embedded S3 listen address")
	dynAddr := fs.String("dynamodb-addr", localserver.DefaultDynamoAddr, "embedded DynamoDB listen address")
	sqsAddr := fs.String("sqs-addr", localserver.DefaultSQSAddr, "embedded SQS listen address")
	sfnAddr := fs.String("stepfunctions-addr", localserver.DefaultSFNAddr, "embedded Step Functions listen address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srv, err := localserver.Start(ctx, localserver.Options{
		Dir: *dir, Addr: *addr, S3Addr: *s3Addr, DynamoAddr: *dynAddr, SQSAddr: *sqsAddr, SFNAddr: *sfnAddr,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprint(out, srv.Info.HowTo(*dir))
	<-ctx.Done()
	return nil
}

// runRedrive plays the SQS console's "start DLQ redrive" on the local server.
func runRedrive(args []string) error {
	fs := flag.NewFlagSet("local redrive", flag.ContinueOnError)
	dir := fs.String("dir", ".icehold", "state directory of the running local server")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(*dir, "local.json"))
	if err != nil {
		return fmt.Errorf("start the local server first (make run): %w", err)
	}
	var info localserver.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return err
	}
	ctx := context.Background()
	ep := awsconfig.Endpoints{SQS: info.SQS, Region: info.Region, AccessKey: info.AccessKey, SecretKey: info.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		return err
	}
	_, err = awsconfig.SQS(cfg, ep).StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{
		SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:" + localserver.DeleteDLQ),
	})
	if err == nil {
		fmt.Println("redrive started: the dead-lettered batches are back on", localserver.DeleteQueue)
	}
	return err
}
