package infra

import (
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/shared/lambdaenv"
)

// PartitionRoutes are the lifecycle routes the partition-drop function
// serves (SPEC §5).
var PartitionRoutes = []struct{ Path, Method string }{
	{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partitions/drop", "POST"},
	{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partition-retention", "PUT"},
	{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partition-retention", "GET"},
	{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partition-retention", "DELETE"},
	{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/verify", "GET"},
	{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/repair", "POST"},
}

// RetentionSchedule is how often the retention sweep runs (SPEC §5); the
// context value icehold:retention overrides it. Day partitions expire once
// a day; hourly keeps hour partitions and a failed run's retry close.
const RetentionSchedule = "rate(1 hour)"

// partitions is SPEC §5 in AWS: the partition-drop function behind the
// partition routes (drop, retention policies, verify), and the retention
// function on its schedule. It reads a table's metadata, manifest list and the
// manifests a drop may touch, and writes new manifests, a manifest list and
// a metadata file; it deletes nothing (the ended files go through snapshot
// expiry and the delete pipeline).
func (s *Stack) partitions(st awscdk.Stack, p Props, env map[string]*string) {
	env = withEnv(env, map[string]*string{lambdaenv.EnvEventBus: s.Bus.EventBusName()})
	// 1 GB like the catalog: a metadata file may take 64 MiB and its parse
	// a few times that; manifests are streamed, eight at a time. 29 s is
	// API Gateway's integration timeout.
	s.PartitionDropFn = goFunction(st, "PartitionDropFn", filepath.Join(p.AssetsDir, "partition-drop"), env, 1024, 29)
	for _, r := range PartitionRoutes {
		s.lambdaRoute(r.Path, r.Method, s.PartitionDropFn)
	}

	// The sweep: bounded runs (200 tables, stopping 10 s before its
	// deadline), each table's drop like the route's.
	s.RetentionFn = goFunction(st, "RetentionFn", filepath.Join(p.AssetsDir, "retention"), env, 1024, 300)
	schedule := RetentionSchedule
	if v, ok := st.Node().TryGetContext(jsii.String("icehold:retention")).(string); ok && v != "" {
		schedule = v
	}
	awsevents.NewRule(st, jsii.String("RetentionSchedule"), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Expression(jsii.String(schedule)),
		Targets:  &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.RetentionFn, nil)},
	})
	errs := s.RetentionFn.MetricErrors(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Hours(jsii.Number(1))})
	atLeastOne(st, "RetentionErrors", errs,
		"The partition retention sweep failed: expired partitions are not being dropped (its logs say why)").
		AddAlarmAction(awscloudwatchactions.NewSnsAction(s.AlarmTopic))
}
