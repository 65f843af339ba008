package infra

import (
	"fmt"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// Pipeline settings: the delete queue's lease and dead-lettering.
const (
	deleteTimeoutSec    = 300
	deleteVisibilitySec = 360 // at least the function's timeout, as an event source mapping requires
	maxReceiveCount     = 5
)

// purgeMachineName is the purge state machine's name: <stack>-purge.
func purgeMachineName(st awscdk.Stack) string { return *st.StackName() + "-purge" }

func withEnv(base map[string]*string, extra map[string]*string) map[string]*string {
	out := map[string]*string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// purgePipeline is SPEC §3 in AWS: the drop route, the state machine (the
// one definition in shared/purge), the delete queue with its DLQ and event
// source mapping, the reconcile schedule, alarms and a dashboard.
func (s *Stack) purgePipeline(st awscdk.Stack, p Props, env map[string]*string) {
	s.Bus = awsevents.NewEventBus(st, jsii.String("LifecycleBus"), &awsevents.EventBusProps{
		EventBusName: jsii.String(*st.StackName() + "-lifecycle"),
	})
	env = withEnv(env, map[string]*string{lambdaenv.EnvEventBus: s.Bus.EventBusName()})
	// The queues: SQS-managed encryption, or the customer managed key.
	encrypt := func(q *awssqs.QueueProps) *awssqs.QueueProps {
		q.Encryption = awssqs.QueueEncryption_SQS_MANAGED
		if s.Key != nil {
			q.Encryption, q.EncryptionMasterKey = awssqs.QueueEncryption_KMS, s.Key
		}
		return q
	}
	s.DeleteDLQ = awssqs.NewQueue(st, jsii.String("DeleteDLQ"), encrypt(&awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	}))
	s.DeleteQueue = awssqs.NewQueue(st, jsii.String("DeleteQueue"), encrypt(&awssqs.QueueProps{
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(deleteVisibilitySec)),
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(14)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: s.DeleteDLQ, MaxReceiveCount: jsii.Number(maxReceiveCount)},
	}))

	queueEnv := map[string]*string{
		lambdaenv.EnvDeleteQueue: s.DeleteQueue.QueueUrl(),
		lambdaenv.EnvVisibility:  jsii.String(fmt.Sprint(deleteVisibilitySec)),
		lambdaenv.EnvMaxReceives: jsii.String(fmt.Sprint(maxReceiveCount)),
	}
	// The plan function enqueues the batches itself (SendMessageBatch), so
	// the workflow's history does not grow per batch.
	s.PlanFn = goFunction(st, "PurgePlanFn", filepath.Join(p.AssetsDir, "purge-plan"), withEnv(env, queueEnv), 1024, 900)
	s.ProgressFn = goFunction(st, "PurgeProgressFn", filepath.Join(p.AssetsDir, "purge-progress"), env, 256, 30)
	reserved, mapping := deleteConcurrency(p.DeleteReservedConcurrency)
	s.DeleteFn = goFunction(st, "DeleteFn", filepath.Join(p.AssetsDir, "delete"), withEnv(env, queueEnv), 1024, deleteTimeoutSec, func(p *awslambda.FunctionProps) {
		if reserved > 0 {
			p.ReservedConcurrentExecutions = jsii.Number(reserved)
		}
	})
	// The mapping keeps the construct id SqsEventSource gave it (no
	// replacement on upgrade); unlike SqsEventSource it grants nothing by
	// itself: the role's queue actions are in grantAccess.
	s.DeleteFn.AddEventSourceMapping(jsii.String("SqsEventSource:"+*awscdk.Names_NodeUniqueId(s.DeleteQueue.Node())), &awslambda.EventSourceMappingOptions{
		EventSourceArn:          s.DeleteQueue.QueueArn(),
		BatchSize:               jsii.Number(1),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(mapping),
	})

	s.PurgeMachine = awsstepfunctions.NewStateMachine(st, jsii.String("PurgeMachine"), &awsstepfunctions.StateMachineProps{
		DefinitionBody: awsstepfunctions.DefinitionBody_FromString(jsii.String(purge.Definition)),
		DefinitionSubstitutions: &map[string]*string{
			"PlanFunction":     s.PlanFn.FunctionArn(),
			"ProgressFunction": s.ProgressFn.FunctionArn(),
			"FinalizeFunction": s.DeleteFn.FunctionArn(),
		},
		// A fixed name: the delete function's grant to answer the machine's
		// tasks names it by ARN, since a reference would be a cycle (the
		// definition references the delete function).
		StateMachineName: jsii.String(purgeMachineName(st)),
		StateMachineType: awsstepfunctions.StateMachineType_STANDARD,
		TracingEnabled:   jsii.Bool(true),
	})

	machineEnv := withEnv(env, map[string]*string{lambdaenv.EnvStateMachine: s.PurgeMachine.StateMachineArn()})
	s.DropFn = goFunction(st, "DropFn", filepath.Join(p.AssetsDir, "drop"), machineEnv, 512, 29)
	// Reconcile knows the queue's maxReceiveCount: a batch whose last receive
	// ended without an answer is dead, whatever killed its invocation.
	s.ReconcileFn = goFunction(st, "ReconcileFn", filepath.Join(p.AssetsDir, "reconcile"), withEnv(machineEnv, queueEnv), 256, 300)
	awsevents.NewRule(st, jsii.String("ReconcileSchedule"), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(5))),
		Targets:  &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.ReconcileFn, nil)},
	})

	// The event outbox's relay: the table's stream, filtered to inserted
	// OUTBOX items, wakes it. It retries a failed run a few times; the
	// reconcile schedule relays whatever is left.
	s.OutboxFn = goFunction(st, "OutboxFn", filepath.Join(p.AssetsDir, "outbox"), env, 256, 60)
	s.OutboxFn.AddEventSourceMapping(jsii.String("OutboxStream"), &awslambda.EventSourceMappingOptions{
		EventSourceArn:   s.Table.TableStreamArn(),
		StartingPosition: awslambda.StartingPosition_LATEST,
		BatchSize:        jsii.Number(100),
		RetryAttempts:    jsii.Number(3),
		Filters: &[]*map[string]any{awslambda.FilterCriteria_Filter(&map[string]any{
			"eventName": awslambda.FilterRule_IsEqual(jsii.String("INSERT")),
			"dynamodb":  map[string]any{"Keys": map[string]any{"pk": map[string]any{"S": awslambda.FilterRule_IsEqual(jsii.String(store.OutboxPK))}}},
		})},
	})

	// DELETE …/tables/{table} goes to the drop function.
	tables := s.API.Root().ResourceForPath(jsii.String("v1/{prefix}/namespaces/{namespace}/tables/{table}"))
	tables.AddMethod(jsii.String("ANY"), nil, nil) // the other methods stay with the catalog function
	tables.AddMethod(jsii.String("DELETE"), awsapigateway.NewLambdaIntegration(s.DropFn, nil), &awsapigateway.MethodOptions{
		AuthorizationType: awsapigateway.AuthorizationType_IAM,
	})

	s.alarmsAndDashboard(st)
}

func (s *Stack) alarmsAndDashboard(st awscdk.Stack) {
	// The alarms notify one topic (output AlarmTopicArn); who listens is the
	// operator's choice (an email, a chat integration, an incident tool).
	s.AlarmTopic = awssns.NewTopic(st, jsii.String("AlarmTopic"), &awssns.TopicProps{DisplayName: jsii.String("icehold alarms")})
	notify := awscloudwatchactions.NewSnsAction(s.AlarmTopic)
	dlqDepth := s.DeleteDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1))})
	atLeastOne(st, "DeleteDLQNotEmpty", dlqDepth,
		"Purge batches are dead-lettered: fix the cause, then redrive the DLQ from the SQS console").AddAlarmAction(notify)
	failed := s.PurgeMachine.MetricFailed(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5))})
	atLeastOne(st, "PurgeJobsFailed", failed, "A purge job failed; its last-error says why (icehold jobs show)").AddAlarmAction(notify)
	jobs := func(name string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String("icehold"), MetricName: jsii.String(name), Statistic: jsii.String("Maximum")})
	}
	dash := awscloudwatch.NewDashboard(st, jsii.String("PurgeDashboard"), &awscloudwatch.DashboardProps{DashboardName: jsii.String(*st.StackName() + "-purge")})
	dash.AddWidgets(
		awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String("Purge backlog"),
			Left: &[]awscloudwatch.IMetric{s.DeleteQueue.MetricApproximateNumberOfMessagesVisible(nil), s.DeleteQueue.MetricApproximateNumberOfMessagesNotVisible(nil), dlqDepth}}),
		awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String("Jobs by state"),
			Left: &[]awscloudwatch.IMetric{jobs("JobsPending"), jobs("JobsRunning"), jobs("JobsDeadLettered"), jobs("JobsFailed")}}),
		awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String("Oldest pending job (s) and files deleted"),
			Left: &[]awscloudwatch.IMetric{jobs("OldestPendingAgeSeconds")}, Right: &[]awscloudwatch.IMetric{jobs("FilesDeleted"), jobs("FilesUnreferenced")}}),
	)
}

// atLeastOne alarms when a metric reaches 1 in one period.
func atLeastOne(st awscdk.Stack, id string, metric awscloudwatch.IMetric, why string) awscloudwatch.Alarm {
	return awscloudwatch.NewAlarm(st, jsii.String(id), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String(why),
		Metric:             metric,
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
}
