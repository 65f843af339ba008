package infra_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/infra"
	"github.com/icehold/icehold/shared/purge"
)

var template assertions.Template

// TestMain synthesizes the stack once: the jsii kernel starts once per binary.
func TestMain(m *testing.M) {
	assets, err := os.MkdirTemp("", "icehold-assets-")
	if err != nil {
		panic(err)
	}
	// The assertions check wiring, not binaries: a stand-in bootstrap per function.
	fns, _ := filepath.Glob("../functions/*")
	for _, fn := range fns {
		dir := filepath.Join(assets, filepath.Base(fn))
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("stand-in"), 0o755)
	}
	app := awscdk.NewApp(nil)
	s := infra.NewStack(app, "Test", infra.Props{AssetsDir: assets, Admins: []string{"arn:aws:iam::111122223333:role/Admin"}})
	template = assertions.Template_FromStack(s.Stack, nil)
	code := m.Run()
	jsii.Close()
	os.RemoveAll(assets)
	os.Exit(code)
}

func TestCatalogTable(t *testing.T) {
	template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
		"KeySchema": []any{
			map[string]any{"AttributeName": "pk", "KeyType": "HASH"},
			map[string]any{"AttributeName": "sk", "KeyType": "RANGE"},
		},
		"BillingMode":                      "PAY_PER_REQUEST",
		"TimeToLiveSpecification":          map[string]any{"AttributeName": "expires_at", "Enabled": true},
		"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
	})
}

func TestAPIIsIAMAuthenticatedProxyToGoLambda(t *testing.T) {
	template.HasResourceProperties(jsii.String("AWS::ApiGateway::Method"), map[string]any{
		"HttpMethod": "ANY", "AuthorizationType": "AWS_IAM",
	})
	template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
		"Runtime": "provided.al2023", "Architectures": []any{"arm64"}, "Handler": "bootstrap",
		"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
			"ICEHOLD_ADMINS": "arn:aws:iam::111122223333:role/Admin",
		})},
	})
	template.HasResourceProperties(jsii.String("AWS::ApiGateway::RestApi"), map[string]any{
		"BinaryMediaTypes": []any{"*/*"},
	})
}

// Only the delete function may delete objects: no other role's policy holds
// s3:DeleteObject, and the engines' policy denies it.
func TestOnlyDeleteFunctionDeletes(t *testing.T) {
	policies := *template.FindResources(jsii.String("AWS::IAM::Policy"), nil)
	holders := []string{}
	for id, p := range policies {
		raw, _ := json.Marshal(p)
		if strings.Contains(string(raw), "s3:DeleteObject") {
			roles, _ := json.Marshal((*p)["Properties"].(map[string]any)["Roles"])
			holders = append(holders, id+" "+string(roles))
		}
	}
	if len(holders) != 1 || !strings.Contains(holders[0], "DeleteFn") {
		t.Errorf("s3:DeleteObject is held by %v, want only the delete function's role", holders)
	}
	template.HasResourceProperties(jsii.String("AWS::IAM::ManagedPolicy"), map[string]any{
		"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
			assertions.Match_ObjectLike(&map[string]any{"Effect": "Deny", "Action": []any{"s3:DeleteObject", "s3:DeleteObjectVersion"}}),
		})},
	})
}

func TestDeleteQueueDLQAndMapping(t *testing.T) {
	template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
		"VisibilityTimeout": 360,
		"RedrivePolicy":     assertions.Match_ObjectLike(&map[string]any{"maxReceiveCount": 5}),
	})
	template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
		"BatchSize":             1,
		"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		"EventSourceArn":        assertions.Match_AnyValue(),
	})
}

// The state machine deployed is the definition the local engine runs.
func TestStateMachineIsTheSharedDefinition(t *testing.T) {
	machines := *template.FindResources(jsii.String("AWS::StepFunctions::StateMachine"), nil)
	if len(machines) != 1 {
		t.Fatalf("%d state machines", len(machines))
	}
	for _, m := range machines {
		props := (*m)["Properties"].(map[string]any)
		if def, ok := props["DefinitionString"].(string); !ok || def != purge.Definition {
			t.Errorf("the deployed definition is not shared/purge's workflow.asl.json byte for byte")
		}
		raw, _ := json.Marshal(props["DefinitionString"])
		for _, state := range []string{"Plan", "FanOut", "sqs:sendMessage", "WaitForBatches", "Finalize", "MarkFailed"} {
			if !strings.Contains(string(raw), state) {
				t.Errorf("deployed definition lacks %s", state)
			}
		}
		if _, ok := props["DefinitionSubstitutions"]; !ok {
			t.Errorf("no substitutions of the function ARNs and queue URL")
		}
	}
}

func TestAlarmsScheduleAndDropRoute(t *testing.T) {
	template.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(2))
	template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
		"MetricName": "ApproximateNumberOfMessagesVisible", "Threshold": 1,
	})
	template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
		"MetricName": "ExecutionsFailed", "Threshold": 1,
	})
	template.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1))
	template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{"ScheduleExpression": "rate(5 minutes)"})
	template.HasResourceProperties(jsii.String("AWS::ApiGateway::Method"), map[string]any{
		"HttpMethod": "DELETE", "AuthorizationType": "AWS_IAM",
	})
}

func TestLifecycleEventBus(t *testing.T) {
	template.ResourceCountIs(jsii.String("AWS::Events::EventBus"), jsii.Number(1))
	template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
		"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
			"ICEHOLD_EVENT_BUS": assertions.Match_AnyValue(),
		})},
	})
	template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
		"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
			assertions.Match_ObjectLike(&map[string]any{"Action": "events:PutEvents", "Effect": "Allow"}),
		})},
	})
}
