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

// HoldExpirySchedule is how often soft-deleted tables past their hold are
// deleted for good (SPEC §4); the context value icehold:holdExpiry overrides
// it (an EventBridge rate or cron expression).
const HoldExpirySchedule = "rate(15 minutes)"

// softDelete is SPEC §4 in AWS: the undrop function behind the soft-delete
// routes of the lifecycle API, and the hold-expiry function on its schedule.
// Neither deletes objects: expired tables go to the purge pipeline.
func (s *Stack) softDelete(st awscdk.Stack, p Props, env map[string]*string) {
	env = withEnv(env, map[string]*string{
		lambdaenv.EnvStateMachine: s.PurgeMachine.StateMachineArn(),
		lambdaenv.EnvEventBus:     s.Bus.EventBusName(),
	})
	s.UndropFn = goFunction(st, "UndropFn", filepath.Join(p.AssetsDir, "undrop"), env, 512, 29)
	s.HoldExpiryFn = goFunction(st, "HoldExpiryFn", filepath.Join(p.AssetsDir, "hold-expiry"), env, 512, 300)

	for _, r := range []struct{ path, method string }{
		{"lifecycle/v1/catalogs/{c}/soft-deleted-tables", "GET"},
		{"lifecycle/v1/catalogs/{c}/soft-deleted-tables/{uuid}/legal-hold", "POST"},
		{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/undrop", "POST"},
		{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/purge-now", "POST"},
	} {
		s.lambdaRoute(r.path, r.method, s.UndropFn)
	}

	schedule := HoldExpirySchedule
	if v, ok := st.Node().TryGetContext(jsii.String("icehold:holdExpiry")).(string); ok && v != "" {
		schedule = v
	}
	awsevents.NewRule(st, jsii.String("HoldExpirySchedule"), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Expression(jsii.String(schedule)),
		Targets:  &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.HoldExpiryFn, nil)},
	})
	errs := s.HoldExpiryFn.MetricErrors(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(15))})
	atLeastOne(st, "HoldExpiryErrors", errs,
		"The hold-expiry sweep failed: soft-deleted tables past their hold are not being deleted (its logs say why)").
		AddAlarmAction(awscloudwatchactions.NewSnsAction(s.AlarmTopic))
}
