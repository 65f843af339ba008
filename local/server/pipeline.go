package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/store"
)

// Function names of the pipeline, as the state machine definition names them.
const (
	PlanFunction     = "icehold-purge-plan"
	ProgressFunction = "icehold-purge-progress"
	// FinalizeFunction: the finalize step runs in the delete function, the
	// only one allowed to delete objects.
	FinalizeFunction = "icehold-delete"
)

// lambdaOf adapts a typed handler to the engine's JSON invocation, as the
// Lambda runtime does.
func lambdaOf[In, Out any](fn func(context.Context, In) (Out, error)) emulators.LambdaFunc {
	return func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		var in In
		if err := json.Unmarshal(payload, &in); err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

// startPipeline builds the purge pipeline on the embedded SQS and workflow
// engine: queues with a redrive policy, the state machine from the one
// definition, the delete "event source mapping" and the reconcile schedule.
func (s *Server) startPipeline(ctx context.Context, o Options, cfg aws.Config, ep awsconfig.Endpoints, st *store.Store, sfnL net.Listener) error {
	if o.Visibility == 0 {
		o.Visibility = 30 * time.Second
	}
	if o.MaxReceives == 0 {
		o.MaxReceives = 5
	}
	if o.TimeScale == 0 {
		o.TimeScale = 0.1
	}
	if o.ReconcileEvery == 0 {
		o.ReconcileEvery = time.Minute
	}
	if o.DeleteWorkers == 0 {
		o.DeleteWorkers = 4
	}
	sq := awsconfig.SQS(cfg, ep)
	s.SQS = sq
	n := s.names
	dlq, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(n.dlq),
		Attributes: map[string]string{"MessageRetentionPeriod": queueRetentionSec}})
	if err != nil {
		return fmt.Errorf("create dlq: %w", err)
	}
	s.dlqURL = aws.ToString(dlq.QueueUrl)
	if s.dlqARN, err = queueARN(ctx, sq, s.dlqURL); err != nil {
		return err
	}
	redrive, _ := json.Marshal(map[string]any{
		"deadLetterTargetArn": s.dlqARN, "maxReceiveCount": o.MaxReceives,
	})
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(n.queue), Attributes: map[string]string{
		"VisibilityTimeout": fmt.Sprint(int(o.Visibility / time.Second)), "RedrivePolicy": string(redrive),
		"MessageRetentionPeriod": queueRetentionSec,
	}})
	if err != nil {
		return fmt.Errorf("create queue: %w", err)
	}
	queueURL := aws.ToString(q.QueueUrl)
	s.queueURL = queueURL
	if s.queueARN, err = queueARN(ctx, sq, queueURL); err != nil {
		return err
	}

	if o.DeleteTimeout == 0 {
		o.DeleteTimeout = 5 * time.Minute
	}
	if o.DeleteMargin == 0 {
		o.DeleteMargin = o.DeleteTimeout / 10
	}
	queue := purge.QueueConfig{URL: queueURL, Visibility: o.Visibility, MaxReceives: o.MaxReceives}
	svc := &purge.Service{
		Store: st, Catalog: s.Catalog, S3: awsconfig.S3(cfg, ep), Workflow: awsconfig.SFN(cfg, ep),
		Sender: sq, Queue: queue, DeadlineMargin: o.DeleteMargin,
		IOProps: map[string]string{
			"s3.endpoint": ep.S3, "s3.region": Region, "s3.access-key-id": AccessKey,
			"s3.secret-access-key": SecretKey, "s3.force-virtual-addressing": "false",
		},
		BatchManifests: o.BatchManifests, Now: o.Now,
	}
	var bus eventbus.PutEvents = eventbus.NewJSONLines(io.Discard, nil)
	if s.dir != "" {
		f, err := os.OpenFile(filepath.Join(s.dir, "metrics.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		svc.Metrics = f
		s.closers = append(s.closers, f)
	}
	switch {
	case ep.Events != "":
		// An external EventBridge: the bus the stack makes.
		eb := awsconfig.EventBridge(cfg, ep)
		if err := createBus(ctx, eb, n.bus); err != nil {
			return err
		}
		bus = eb
	case s.dir != "":
		// The local event bus: one JSON line per EventBridge entry. The ids
		// already in the log count as delivered (the relay is at least once).
		path := filepath.Join(s.dir, "events.log")
		past, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		ev, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		bus = eventbus.NewJSONLines(ev, bytes.NewReader(past))
		s.closers = append(s.closers, ev)
	}
	if o.WrapEvents != nil {
		bus = o.WrapEvents(bus)
	}
	s.Events = eventbus.New(bus, n.bus)
	s.Purge = svc
	s.SoftDelete = &softdelete.Service{Catalog: s.Catalog, Purge: svc, Now: o.Now}
	engine := emulators.NewStepFunctions(s.dir, map[string]emulators.LambdaFunc{
		PlanFunction:     lambdaOf(svc.Plan),
		ProgressFunction: lambdaOf(svc.AwaitBatches),
		FinalizeFunction: lambdaOf(svc.FinalizeStep),
	}, func(ctx context.Context, url, body string) (string, error) {
		out, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.MessageId), nil
	})
	engine.TimeScale = o.TimeScale
	if o.Clock != nil {
		engine.Clock = o.Clock
	}
	arn, err := engine.AddStateMachine(n.machine, purge.Substitute(purge.Definition, map[string]string{
		"PlanFunction": PlanFunction, "ProgressFunction": ProgressFunction, "FinalizeFunction": FinalizeFunction,
		"DeleteQueueUrl": queueURL,
	}))
	if err != nil {
		return err
	}
	svc.StateMachineARN = arn
	s.engine = engine
	s.serve(sfnL, engine)
	if err := engine.Resume(); err != nil {
		return fmt.Errorf("resume executions: %w", err)
	}

	bg, stop := context.WithCancel(context.Background())
	s.stop = stop
	poller := &emulators.Poller{
		Client: sq, QueueURL: queueURL, QueueARN: s.queueARN,
		Workers: o.DeleteWorkers, BatchSize: 1, Timeout: o.DeleteTimeout,
		Handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return svc.HandleSQS(ctx, sq, queue, ev)
		},
	}
	if o.HoldExpiryEvery == 0 {
		o.HoldExpiryEvery = 15 * time.Minute
	}
	if o.RelayEvery == 0 {
		o.RelayEvery = 100 * time.Millisecond
	}
	// The schedules (EventBridge rules and the stream in AWS).
	s.every(bg, o.RelayEvery, func(ctx context.Context) {
		// The outbox relay (the table's stream and the outbox function in
		// AWS): publishes committed events, oldest first.
		if _, err := outbox.Drain(ctx, st, s.Events); err != nil && ctx.Err() == nil {
			slog.Warn("outbox relay", "error", err)
		}
	})
	s.every(bg, o.HoldExpiryEvery, func(ctx context.Context) {
		if rep, err := s.SoftDelete.Expire(ctx, 0); err != nil {
			slog.Warn("hold expiry", "error", err)
		} else if rep.Expired > 0 {
			slog.Info("hold expiry", "report", rep)
		}
	})
	s.every(bg, o.ReconcileEvery, func(ctx context.Context) {
		if rep, err := svc.Reconcile(ctx); err != nil {
			slog.Warn("reconcile", "error", err)
		} else if rep.Started+rep.Restarted+rep.Failed+len(rep.Orphans.Jobs) > 0 {
			slog.Info("reconcile", "report", rep)
		}
	})
	if o.DeleteWorkers > 0 { // < 0: the delete function runs elsewhere (benchmarks)
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			poller.Run(bg)
		}()
	}
	return nil
}

// every runs fn every d until ctx ends (d < 0: never), as a schedule does.
func (s *Server) every(ctx context.Context, d time.Duration, fn func(context.Context)) {
	if d < 0 {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				fn(ctx)
			}
		}
	}()
}

// Redrive moves every message of the delete DLQ back to the delete queue:
// what an operator does from the SQS console.
func (s *Server) Redrive(ctx context.Context) error {
	_, err := s.SQS.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(s.dlqARN)})
	return err
}

// QueueDepth is the number of messages in the delete queue (or its DLQ).
func (s *Server) QueueDepth(ctx context.Context, dlq bool) (int, error) {
	url := s.Info.DeleteQueue
	if dlq {
		url = s.Info.DeleteDLQ
	}
	out, err := s.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return 0, err
	}
	a, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	b, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return a + b, nil
}

// FunctionEnv is a Lambda function's environment aimed at this local server
// (make invoke, benchmarks): the same composition as in AWS.
func (i Info) FunctionEnv() lambdaenv.Env {
	bus := ""
	if i.Events != "" { // the embedded bus is a log only the local server writes
		bus = i.EventBus
	}
	return lambdaenv.Env{
		EventBus: bus,
		Table:    cmp.Or(i.Table, TableName), DefaultCatalog: i.Catalog,
		Admins: []string{AdminPrincipal, LocalAccountAdmins}, WarehouseBuckets: []string{i.Bucket},
		// No keys for clients: in AWS engines bring their own, and the
		// emulators' own key is the admin identity.
		ClientDefaults: map[string]string{"s3.endpoint": i.S3Endpoint, "s3.region": i.Region, "s3.path-style-access": "true"},
		Endpoints: awsconfig.Endpoints{DynamoDB: i.DynamoDB, S3: i.S3Endpoint, SQS: i.SQS, SFN: i.StepFns, Events: i.Events,
			Region: i.Region, AccessKey: i.AccessKey, SecretKey: i.SecretKey},
		StateMachineARN: cmp.Or(i.Machine, "arn:aws:states:us-east-1:000000000000:stateMachine:"+PurgeMachine),
		Queue:           lambdaenv.Queue{URL: i.DeleteQueue, Visibility: 30 * time.Second, MaxReceives: 5},
		IOProps: map[string]string{"s3.endpoint": i.S3Endpoint, "s3.region": i.Region, "s3.access-key-id": i.AccessKey,
			"s3.secret-access-key": i.SecretKey, "s3.force-virtual-addressing": "false"},
	}
}
