package infra_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/infra"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/bucketguard"
	"github.com/icehold/icehold/shared/purge"
)

// template is the stack as `make synth` makes it with no context values
// (the HTTP API); restTemplate the one with the REST API instead
// (icehold:api=rest); byoTemplate the one with every context value set:
// existing buckets (the local server's, so the IAM oracle runs against it,
// and another), a customer managed key, a reservation, throttling, log
// retention and both APIs (the switch from one to the other).
var template, restTemplate, byoTemplate assertions.Template

// byoKey is the customer managed key of byoTemplate.
const byoKey = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// byoContext are byoTemplate's context values, as -c key=value gives them
// (strings) or cdk.json may (numbers).
var byoContext = map[string]any{
	infra.CtxWarehouseBuckets: server.DefaultBucket + ", arn:aws:s3:::team-lake",
	infra.CtxKMSKey:           byoKey,
	infra.CtxDeleteReserved:   "30",
	infra.CtxAPIRate:          float64(50),
	infra.CtxAPIBurst:         "80",
	infra.CtxAccessLogDays:    "30",
	infra.CtxArch:             "x86_64",
	infra.CtxAPI:              infra.APIBoth,
}

// TestMain synthesizes the stacks once: the jsii kernel starts once per binary.
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

	synth := func(name string, values map[string]any) assertions.Template {
		ctx := map[string]any{infra.CtxAssets: assets, infra.CtxAdmins: "arn:aws:iam::111122223333:role/Admin"}
		maps.Copy(ctx, values)
		app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx})
		props, err := infra.FromContext(app.Node())
		if err != nil {
			panic(err)
		}
		return assertions.Template_FromStack(infra.NewStack(app, name, props).Stack, nil)
	}
	restTemplate = synth("Rest", map[string]any{infra.CtxAPI: infra.APIREST})
	byoTemplate = synth("Byo", byoContext)
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
	template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{
		"RouteKey": "$default", "AuthorizationType": "AWS_IAM",
	})
	template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Integration"), map[string]any{
		"IntegrationType": "AWS_PROXY", "PayloadFormatVersion": "2.0",
	})
	template.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
		"Runtime": "provided.al2023", "Architectures": []any{"arm64"}, "Handler": "bootstrap",
		"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
			"ICEHOLD_ADMINS": "arn:aws:iam::111122223333:role/Admin",
		})},
	})
	restTemplate.HasResourceProperties(jsii.String("AWS::ApiGateway::Method"), map[string]any{
		"HttpMethod": "ANY", "AuthorizationType": "AWS_IAM",
	})
	restTemplate.HasResourceProperties(jsii.String("AWS::ApiGateway::RestApi"), map[string]any{
		"BinaryMediaTypes": []any{"*/*"},
	})
}

// The default synth has the HTTP API and no REST API; -c icehold:api=rest
// the REST API and no HTTP API; both during a switch.
func TestFrontDoorFromContext(t *testing.T) {
	for name, c := range map[string]struct {
		of         func(string) map[string]map[string]any
		rest, http int
	}{"default": {resources, 0, 1}, "icehold:api=rest": {restResources, 1, 0}, "icehold:api=both": {byoResources, 1, 1}} {
		if n := len(c.of("AWS::ApiGateway::RestApi")); n != c.rest {
			t.Errorf("%s: %d REST APIs, want %d", name, n, c.rest)
		}
		if n := len(c.of("AWS::ApiGatewayV2::Api")); n != c.http {
			t.Errorf("%s: %d HTTP APIs, want %d", name, n, c.http)
		}
	}
}

// -c icehold:arch=x86_64 builds every function for x86_64 (LocalStack on
// an x86 host), arm64 otherwise.
func TestFunctionArchitecture(t *testing.T) {
	for name, c := range map[string]struct {
		of   func(string) map[string]map[string]any
		want string
	}{"default": {resources, "arm64"}, "icehold:arch=x86_64": {byoResources, "x86_64"}} {
		fns := c.of("AWS::Lambda::Function")
		for id, fn := range fns {
			props, _ := fn["Properties"].(map[string]any)
			if props["Runtime"] != "provided.al2023" {
				continue // the CDK's own helper functions
			}
			if got := strs(props["Architectures"]); len(got) != 1 || got[0] != c.want {
				t.Errorf("%s: %s runs on %v, want %s", name, id, got, c.want)
			}
		}
	}
}

// Only the delete function may delete objects: no other role's policy
// allows s3:DeleteObject, and the engines' policy (and the vending role's,
// which holds its storage statements) denies it.
func TestOnlyDeleteFunctionDeletes(t *testing.T) {
	policies := *template.FindResources(jsii.String("AWS::IAM::Policy"), nil)
	holders := []string{}
	for id, p := range policies {
		for _, st := range (*p)["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			raw, _ := json.Marshal(st.(map[string]any)["Action"])
			if st.(map[string]any)["Effect"] != "Deny" && strings.Contains(string(raw), "s3:DeleteObject") {
				roles, _ := json.Marshal((*p)["Properties"].(map[string]any)["Roles"])
				holders = append(holders, id+" "+string(roles))
			}
		}
	}
	for _, h := range holders {
		if !strings.HasPrefix(h, "DeleteFnServiceRole") {
			t.Errorf("s3:DeleteObject or s3:DeleteObjectVersion is held by %v, want only the delete function's role", holders)
		}
	}
	if len(holders) == 0 {
		t.Error("no role may delete")
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
		for _, state := range []string{"Plan", "WaitForBatches", "lambda:invoke.waitForTaskToken", "$$.Task.Token", "HeartbeatSeconds", "BatchesDone", "Finalize", "MarkFailed"} {
			if !strings.Contains(string(raw), state) {
				t.Errorf("deployed definition lacks %s", state)
			}
		}
		if _, ok := props["DefinitionSubstitutions"]; !ok {
			t.Errorf("no substitutions of the function ARNs")
		}
		if strings.Contains(string(raw), "sqs:sendMessage") || strings.Contains(string(raw), `"Type": "Map"`) || strings.Contains(string(raw), `"Type": "Wait"`) {
			t.Errorf("the deployed definition fans out per batch or polls")
		}
		if name, _ := props["StateMachineName"].(string); name != "Test-purge" {
			t.Errorf("state machine name %v: the task-response grants name it", props["StateMachineName"])
		}
	}
}

func TestAlarmsScheduleAndDropRoute(t *testing.T) {
	template.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(4)) // DLQ, executions, hold expiry, retention
	template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
		"MetricName": "ApproximateNumberOfMessagesVisible", "Threshold": 1,
	})
	template.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
		"MetricName": "ExecutionsFailed", "Threshold": 1,
	})
	template.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1))
	template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{"ScheduleExpression": "rate(5 minutes)"})
	restTemplate.HasResourceProperties(jsii.String("AWS::ApiGateway::Method"), map[string]any{
		"HttpMethod": "DELETE", "AuthorizationType": "AWS_IAM",
	})
	template.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{
		"RouteKey": "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}", "AuthorizationType": "AWS_IAM",
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

// resources returns the template's resources of one type, by logical id.
func resources(typ string) map[string]map[string]any { return resourcesIn(template, typ) }

// byoResources are byoTemplate's, restResources restTemplate's.
func byoResources(typ string) map[string]map[string]any  { return resourcesIn(byoTemplate, typ) }
func restResources(typ string) map[string]map[string]any { return resourcesIn(restTemplate, typ) }

func resourcesIn(tmpl assertions.Template, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range *tmpl.FindResources(jsii.String(typ), nil) {
		out[id] = *r
	}
	return out
}

// logicalID is the one resource of a type whose logical id starts with prefix.
func logicalID(t *testing.T, typ, prefix string) string {
	return logicalIDIn(t, resources, typ, prefix)
}

func logicalIDIn(t *testing.T, of func(string) map[string]map[string]any, typ, prefix string) string {
	t.Helper()
	var found []string
	for id := range of(typ) {
		if strings.HasPrefix(id, prefix) {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s %s*: found %v", typ, prefix, found)
	}
	return found[0]
}

// render writes a CloudFormation value as text: a logical id loses its
// hash ("Catalog742F25FD" → "Catalog"), pseudo parameters read ${Region}.
func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = render(e)
		}
		return strings.Join(parts, ",")
	case map[string]any:
		if ref, ok := x["Ref"].(string); ok {
			if p, ok := strings.CutPrefix(ref, "AWS::"); ok {
				return "${" + p + "}"
			}
			return "${" + unhash(ref) + "}"
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok {
			return "${" + unhash(ga[0].(string)) + "." + ga[1].(string) + "}"
		}
		if j, ok := x["Fn::Join"].([]any); ok {
			parts := []string{}
			for _, e := range j[1].([]any) {
				parts = append(parts, render(e))
			}
			return strings.Join(parts, j[0].(string))
		}
		if sel, ok := x["Fn::Select"].([]any); ok {
			if sp, ok := sel[1].(map[string]any)["Fn::Split"].([]any); ok {
				return fmt.Sprintf("${Select %v of %s split by %s}", sel[0], render(sp[1]), sp[0])
			}
		}
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

func unhash(id string) string {
	if len(id) > 8 {
		if _, err := strconv.ParseUint(id[len(id)-8:], 16, 64); err == nil {
			return id[:len(id)-8]
		}
	}
	return id
}

func strs(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		out := []string{}
		for _, e := range x {
			out = append(out, strs(e)...)
		}
		return out
	}
	return nil
}

// roleStatements are the statements of the inline policies on the role of
// the function whose logical id starts with fn.
func roleStatements(t *testing.T, fn string) []map[string]any {
	return roleStatementsIn(t, resources, fn)
}

func roleStatementsIn(t *testing.T, of func(string) map[string]map[string]any, fn string) []map[string]any {
	t.Helper()
	fnID := logicalIDIn(t, of, "AWS::Lambda::Function", fn)
	role := of("AWS::Lambda::Function")[fnID]["Properties"].(map[string]any)["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	var out []map[string]any
	for _, p := range of("AWS::IAM::Policy") {
		props := p["Properties"].(map[string]any)
		for _, r := range props["Roles"].([]any) {
			if r.(map[string]any)["Ref"] == role {
				for _, st := range props["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					out = append(out, st.(map[string]any))
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no policy on the role of %s", fn)
	}
	return out
}

// grants is a role's allowed actions: action → "resource" (plus " if
// LeadingKeys ⊆ [...]" where a condition holds it to some partition keys,
// " if ViaService ∈ [...]" where it holds a KMS action to some services).
func grants(t *testing.T, fn string) map[string][]string {
	return grantsOf(t, fn, roleStatements(t, fn))
}

func grantsOf(t *testing.T, fn string, statements []map[string]any) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, st := range statements {
		if st["Effect"] != "Allow" {
			t.Errorf("%s: a %v statement", fn, st["Effect"])
			continue
		}
		cond := ""
		if c, ok := st["Condition"].(map[string]any); ok {
			like, _ := c["ForAllValues:StringLike"].(map[string]any)
			eq, _ := c["StringEquals"].(map[string]any)
			null, _ := c["Null"].(map[string]any)
			if null["s3:x-amz-copy-source"] == "false" && len(c) == 1 && len(null) == 1 {
				cond = " if a copy"
			} else if lk, ok := like["dynamodb:LeadingKeys"]; ok && len(c) == 1 {
				cond = " if LeadingKeys ⊆ [" + strings.Join(strs(lk), " ") + "]"
			} else if vs, ok := eq["kms:ViaService"]; ok && len(c) == 1 {
				var services []string
				for _, v := range asList(vs) {
					services = append(services, render(v))
				}
				cond = " if ViaService ∈ [" + strings.Join(services, " ") + "]"
			} else {
				t.Errorf("%s: unexpected condition %v", fn, c)
			}
		}
		res := []string{}
		if list, ok := st["Resource"].([]any); ok {
			for _, r := range list {
				res = append(res, render(r))
			}
		} else {
			res = append(res, render(st["Resource"]))
		}
		for _, a := range strs(st["Action"]) {
			for _, r := range res {
				out[a] = append(out[a], r+cond)
			}
		}
	}
	for a := range out {
		sort.Strings(out[a])
	}
	return out
}

const (
	tableArn   = "${Catalog.Arn}"
	objectsArn = "${Warehouse.Arn}/*"
	bucketArn  = "${Warehouse.Arn}"
	busArn     = "${LifecycleBus.Arn}"
	streamArn  = "${Catalog.StreamArn}"
	machineArn = "${PurgeMachine}"
	queueArn   = "${DeleteQueue.Arn}"
)

func tableGrants(keys string, acts ...string) map[string][]string {
	out := map[string][]string{}
	for _, a := range acts {
		r := tableArn
		if keys != "" {
			r += " if LeadingKeys ⊆ [" + keys + "]"
		}
		out["dynamodb:"+a] = []string{r}
	}
	return out
}

func merge(ms ...map[string][]string) map[string][]string {
	out := map[string][]string{"xray:PutTelemetryRecords": {"*"}, "xray:PutTraceSegments": {"*"}} // Tracing: ACTIVE
	for _, m := range ms {
		for k, v := range m {
			out[k] = append(out[k], v...)
		}
	}
	return out
}

// variant is one synthesized stack as the grants see it: its warehouse
// buckets' ARNs, its key (none: ""), its name.
type variant struct {
	name    string
	of      func(string) map[string]map[string]any
	buckets []string
	key     string
}

var variants = []variant{
	{"Test", resources, []string{bucketArn}, ""},
	{"Byo", byoResources, []string{"arn:${Partition}:s3:::" + server.DefaultBucket, "arn:${Partition}:s3:::team-lake"}, byoKey},
}

// objects are the variant's object ARNs matching pattern, one per bucket.
func (v variant) objects(pattern string) []string {
	out := []string{}
	for _, b := range v.buckets {
		out = append(out, b+"/"+pattern)
	}
	return out
}

// kms are the KMS grants of a role whose calls go through the decrypt
// services (kms:Decrypt) and the generate ones (kms:GenerateDataKey):
// none without a key.
func (v variant) kms(decrypt, generate []string) map[string][]string {
	out := map[string][]string{}
	if v.key == "" {
		return out
	}
	via := func(services []string) string {
		parts := make([]string, len(services))
		for i, s := range services {
			parts[i] = s + ".${Region}.amazonaws.com"
		}
		return " if ViaService ∈ [" + strings.Join(parts, " ") + "]"
	}
	if len(decrypt) > 0 {
		out["kms:Decrypt"] = []string{v.key + via(decrypt)}
	}
	if len(generate) > 0 {
		out["kms:GenerateDataKey"] = []string{v.key + via(generate)}
	}
	return out
}

// namedMachineArn: the purge machine by its fixed name (a reference to it
// from the delete function's role would be a dependency cycle).
func (v variant) namedMachineArn() string {
	return "arn:${Partition}:states:${Region}:${AccountId}:stateMachine:" + v.name + "-purge"
}

// Each function's role grants exactly what its code calls (docs/design/infra.md,
// "Least privilege"), on every warehouse bucket, and with a customer
// managed key exactly the KMS actions its DynamoDB, S3 and SQS calls need
// through those services; infra/oracle_test.go checks the calls themselves.
func TestRoleGrantsPerFunction(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) { roleGrantsPerFunction(t, v) })
	}
}

func roleGrantsPerFunction(t *testing.T, v variant) {
	const d, s3, q = "dynamodb", "s3", "sqs"
	router := tableGrants("", "GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem")
	metadata := v.objects("*/metadata/*")
	want := map[string]map[string][]string{
		"ApiFn": merge(router, v.kms([]string{d, s3}, []string{s3}), map[string][]string{
			"s3:GetObject":            append(append(v.objects("*.metadata.json"), v.objects("*.metadata.json.gz")...), metadata...),
			"s3:PutObject":            v.objects("*.metadata.json"),
			"s3:AbortMultipartUpload": v.objects("*.metadata.json"),
			"s3:ListBucket":           v.buckets,
			"sts:AssumeRole":          {"${VendingRole.Arn}"}, // vended credentials (infra/vending.go)
		}),
		"DropFn": merge(router, v.kms([]string{d}, nil), map[string][]string{
			"states:StartExecution": {machineArn},
		}),
		"PurgePlanFn": merge(tableGrants("JOB#* BATCH#* CATALOG#* ACTIVEJOB TBL#* LOC#* OUTBOX FAILEDJOB", "GetItem", "PutItem", "BatchWriteItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"),
			v.kms([]string{d, s3, q}, []string{q}), map[string][]string{
				"s3:GetObject":    v.objects("*"),
				"s3:ListBucket":   v.buckets,
				"sqs:SendMessage": {queueArn}, // it enqueues the batches
			}),
		"PurgeProgressFn": merge(tableGrants("JOB#*", "GetItem", "UpdateItem"), v.kms([]string{d}, nil)),
		"DeleteFn": merge(tableGrants("JOB#* BATCH#* ACTIVEJOB TBL#* LOC#* INFLIGHT#* PACE#* SOFT#* OUTBOX", "GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"),
			v.kms([]string{d, s3, q}, []string{q}), map[string][]string{
				"s3:GetObject":                v.objects("*"),
				"s3:DeleteObject":             v.objects("*"),
				"s3:DeleteObjectVersion":      v.objects("*"), // a versioned warehouse's purge
				"s3:ListBucket":               v.buckets,      // the purge's final listing
				"s3:ListBucketVersions":       v.buckets,
				"s3:GetBucketVersioning":      v.buckets,
				"sqs:ReceiveMessage":          {queueArn},
				"sqs:DeleteMessage":           {queueArn},
				"sqs:GetQueueAttributes":      {queueArn},
				"sqs:ChangeMessageVisibility": {queueArn},
				"sqs:SendMessage":             {queueArn},
				"states:SendTaskSuccess":      {v.namedMachineArn()},
				"states:SendTaskFailure":      {v.namedMachineArn()},
				"states:SendTaskHeartbeat":    {v.namedMachineArn()},
			}),
		"UndropFn": merge(router, v.kms([]string{d}, nil), map[string][]string{
			"states:StartExecution": {machineArn},
		}),
		"PartitionDropFn": merge(router, v.kms([]string{d, s3}, []string{s3}), map[string][]string{
			"s3:GetObject":            append(metadata, v.objects("*")...), // verify heads, repair reads versions
			"s3:GetObjectVersion":     v.objects("*"),
			"s3:PutObject":            append(metadata, suffixed(v.objects("*"), " if a copy")...), // repair copies a version back
			"s3:AbortMultipartUpload": metadata,
			"s3:ListBucket":           v.buckets,
			"s3:ListBucketVersions":   v.buckets,
		}),
		"RetentionFn": merge(tableGrants("RETENTION RETSWEEP TBL#* NS#* INTENT#* JOB#* BATCH#* ACTIVEJOB CATALOG#* OUTBOX", "GetItem", "Query", "PutItem", "BatchWriteItem", "UpdateItem", "DeleteItem"),
			v.kms([]string{d, s3}, []string{s3}), map[string][]string{
				"s3:GetObject":            metadata,
				"s3:PutObject":            metadata,
				"s3:AbortMultipartUpload": metadata,
				"s3:ListBucket":           v.buckets,
				"states:StartExecution":   {machineArn}, // snapshot expiry's job: the machine's plan step enqueues it
			}),
		"HoldExpiryFn": merge(tableGrants("SOFT#* SOFTEXP JOB#* ACTIVEJOB LOC#* CATALOG#* OUTBOX", "GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"),
			v.kms([]string{d}, nil), map[string][]string{
				"states:StartExecution": {machineArn},
			}),
		// The relay: the only role besides reconcile that puts events.
		"OutboxFn": merge(tableGrants("OUTBOX", "Query", "DeleteItem"), v.kms([]string{d}, nil), map[string][]string{
			"dynamodb:ListStreams":      {"*"},
			"dynamodb:DescribeStream":   {streamArn},
			"dynamodb:GetRecords":       {streamArn},
			"dynamodb:GetShardIterator": {streamArn},
			"events:PutEvents":          {busArn},
		}),
		"ReconcileFn": merge(tableGrants("JOB#* BATCH#* ACTIVEJOB TBL#* LOC#* INFLIGHT#* INTENT#* OUTBOX FAILEDJOB", "GetItem", "Query", "PutItem", "BatchWriteItem", "UpdateItem", "DeleteItem", "ConditionCheckItem"),
			v.kms([]string{d}, nil), map[string][]string{
				"states:StartExecution":    {machineArn},
				"states:DescribeExecution": {"arn:${Partition}:states:${Region}:${AccountId}:execution:${Select 6 of ${PurgeMachine} split by :}:*"},
				"states:SendTaskSuccess":   {v.namedMachineArn()},
				"states:SendTaskFailure":   {v.namedMachineArn()},
				"states:SendTaskHeartbeat": {v.namedMachineArn()},
				"events:PutEvents":         {busArn},
			}),
	}
	for fn, w := range want {
		got := grantsOf(t, fn, roleStatementsIn(t, v.of, fn))
		for a := range w {
			sort.Strings(w[a])
		}
		if !reflect.DeepEqual(got, w) {
			g, _ := json.MarshalIndent(got, "", "  ")
			t.Errorf("%s grants:\n%s", fn, g)
		}
	}
	// Engines: the objects of every bucket, and the key through S3 only.
	engine := map[string][]string{}
	for _, p := range v.of("AWS::IAM::ManagedPolicy") {
		for _, st := range p["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			if st["Effect"] != "Allow" || !strings.HasPrefix(strs(st["Action"])[0], "kms:") && !strings.HasPrefix(strs(st["Action"])[0], "s3:") {
				continue
			}
			for a, r := range grantsOf(t, "engine", []map[string]any{st}) {
				engine[a] = append(engine[a], r...)
			}
		}
	}
	wantEngine := merge(v.kms([]string{s3}, []string{s3}), map[string][]string{
		"s3:GetObject": v.objects("*"), "s3:PutObject": v.objects("*"), "s3:AbortMultipartUpload": v.objects("*"),
		"s3:ListBucket": v.buckets, "s3:GetBucketLocation": v.buckets,
	})
	delete(wantEngine, "xray:PutTelemetryRecords")
	delete(wantEngine, "xray:PutTraceSegments")
	for a := range wantEngine {
		sort.Strings(wantEngine[a])
		sort.Strings(engine[a])
	}
	if !reflect.DeepEqual(engine, wantEngine) {
		g, _ := json.MarshalIndent(engine, "", "  ")
		t.Errorf("engine policy grants:\n%s", g)
	}
}

// The drop function writes DynamoDB and starts an execution; it never
// touches S3.
func TestDropRoleHasNoS3(t *testing.T) {
	for a := range grants(t, "DropFn") {
		if strings.HasPrefix(a, "s3:") {
			t.Errorf("the drop function's role holds %s", a)
		}
	}
}

// No role holds table-wide reads or table management: Scan, BatchGetItem,
// DescribeTable, wildcards; only the outbox function reads the stream.
func TestNoRoleScansOrManagesTheTable(t *testing.T) {
	outbox := logicalID(t, "AWS::IAM::Role", "OutboxFnServiceRole")
	stream := []string{"ListStreams", "DescribeStream", "GetRecords", "GetShardIterator"}
	for _, p := range resources("AWS::IAM::Policy") {
		roles := p["Properties"].(map[string]any)["Roles"]
		for _, st := range p["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			for _, a := range strs(st.(map[string]any)["Action"]) {
				ok := []string{"GetItem", "Query", "PutItem", "UpdateItem", "DeleteItem", "ConditionCheckItem", "BatchWriteItem"}
				if reflect.DeepEqual(roles, []any{map[string]any{"Ref": outbox}}) {
					ok = append(ok, stream...)
				}
				if strings.HasPrefix(a, "dynamodb:") && !slices.Contains(ok, strings.TrimPrefix(a, "dynamodb:")) {
					t.Errorf("%v grants %s", p["Properties"].(map[string]any)["Roles"], a)
				}
				if strings.Contains(a, "*") {
					t.Errorf("%v grants the wildcard action %s", p["Properties"].(map[string]any)["Roles"], a)
				}
			}
		}
	}
}

// DescribeExecution covers the purge state machine's executions only.
func TestDescribeExecutionScopedToPurgeExecutions(t *testing.T) {
	for _, p := range resources("AWS::IAM::Policy") {
		for _, st := range p["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			if slices.Contains(strs(st["Action"]), "states:DescribeExecution") {
				if r := render(st["Resource"]); r != "arn:${Partition}:states:${Region}:${AccountId}:execution:${Select 6 of ${PurgeMachine} split by :}:*" {
					t.Errorf("DescribeExecution on %s", r)
				}
			}
		}
	}
	if _, ok := grants(t, "ReconcileFn")["states:DescribeExecution"]; !ok {
		t.Errorf("reconcile cannot describe executions")
	}
}

// Engines write data files, manifests and manifest lists; metadata files
// are the catalog's.
func TestEnginePolicyDeniesMetadataWrites(t *testing.T) {
	policies := resources("AWS::IAM::ManagedPolicy")
	if len(policies) != 1 {
		t.Fatalf("%d managed policies", len(policies))
	}
	var allowPut, denyMeta, denyDelete bool
	for _, p := range policies {
		for _, st := range p["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			st := st.(map[string]any)
			acts, res := strs(st["Action"]), render(st["Resource"])
			switch {
			case st["Effect"] == "Allow" && slices.Contains(acts, "s3:PutObject") && res == objectsArn:
				allowPut = true
			case st["Effect"] == "Deny" && slices.Equal(acts, []string{"s3:PutObject"}) && res == "${Warehouse.Arn}/*.metadata.json,${Warehouse.Arn}/*.metadata.json.gz":
				denyMeta = true
			case st["Effect"] == "Deny" && slices.Contains(acts, "s3:DeleteObject") && res == objectsArn:
				denyDelete = true
			case st["Effect"] == "Allow" && slices.ContainsFunc(acts, func(a string) bool { return strings.HasPrefix(a, "s3:Delete") }):
				t.Errorf("engines may delete: %v", st)
			}
		}
	}
	if !allowPut || !denyMeta || !denyDelete {
		t.Errorf("engine policy: put data %v, metadata denied %v, delete denied %v", allowPut, denyMeta, denyDelete)
	}
}

// The warehouse keeps versions, and its policy lets only the delete
// function's role (and the break-glass role a context value names) delete
// them, and those and the deploying role change versioning, lifecycle
// rules or the policy: the guard preflight checks a brought bucket
// against reads it as complete.
func TestWarehouseVersionedAndGuarded(t *testing.T) {
	template.HasResourceProperties(jsii.String("AWS::S3::Bucket"), map[string]any{
		"VersioningConfiguration": map[string]any{"Status": "Enabled"},
		"BucketEncryption":        assertions.Match_AnyValue(),
	})
	template.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(1))
	var stmts []any
	for _, p := range resources("AWS::S3::BucketPolicy") {
		stmts = append(stmts, p["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any)...)
	}
	deleteRole := map[string]any{"Fn::GetAtt": []any{logicalID(t, "AWS::IAM::Role", "DeleteFnServiceRole"), "Arn"}}
	want := map[string][]string{
		bucketguard.SidVersions: {"s3:DeleteObjectVersion"},
		bucketguard.SidConfig:   {"s3:PutBucketVersioning", "s3:PutLifecycleConfiguration", "s3:PutBucketPolicy", "s3:DeleteBucketPolicy"},
	}
	for _, raw := range stmts {
		st := raw.(map[string]any)
		sid, _ := st["Sid"].(string)
		acts, ok := want[sid]
		if !ok {
			continue
		}
		delete(want, sid)
		if st["Effect"] != "Deny" || st["Principal"] != nil && !reflect.DeepEqual(st["Principal"], map[string]any{"AWS": "*"}) && st["Principal"] != "*" {
			t.Errorf("%s: %v", sid, st)
		}
		if got := strs(st["Action"]); !reflect.DeepEqual(sorted(got), sorted(acts)) {
			t.Errorf("%s denies %v, want %v", sid, got, acts)
		}
		exempt := st["Condition"].(map[string]any)["ArnNotLike"].(map[string]any)["aws:PrincipalArn"]
		e, _ := json.Marshal(exempt)
		d, _ := json.Marshal(deleteRole)
		if !strings.Contains(string(e), string(d)) {
			t.Errorf("%s exempts %s, want the delete function's role %s among them", sid, e, d)
		}
		if sid == bucketguard.SidConfig && !strings.Contains(string(e), "cfn-exec-role") {
			t.Errorf("%s exempts %s: a stack update could not write the policy (the CDK execution role)", sid, e)
		}
	}
	if len(want) > 0 {
		t.Errorf("the bucket policy lacks %v", want)
	}
}

func suffixed(s []string, suffix string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = v + suffix
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// Both alarms notify the one topic, whose ARN is an output.
func TestAlarmsNotifyTopic(t *testing.T) {
	template.ResourceCountIs(jsii.String("AWS::SNS::Topic"), jsii.Number(1))
	topic := logicalID(t, "AWS::SNS::Topic", "AlarmTopic")
	alarms := resources("AWS::CloudWatch::Alarm")
	if len(alarms) == 0 {
		t.Fatal("no alarms")
	}
	for id, a := range alarms {
		actions := a["Properties"].(map[string]any)["AlarmActions"]
		if !reflect.DeepEqual(actions, []any{map[string]any{"Ref": topic}}) {
			t.Errorf("%s notifies %v", id, actions)
		}
	}
	template.HasOutput(jsii.String("AlarmTopicArn"), map[string]any{"Value": map[string]any{"Ref": topic}})
}

// Soft delete in AWS: the undrop function serves the four soft-delete
// routes, the hold-expiry function runs on rate(15 minutes) with an alarm on
// its errors, and neither may touch S3 (expired tables go to the purge
// pipeline, whose delete function alone deletes).
func TestSoftDeleteFunctionsRoutesAndSchedule(t *testing.T) {
	undrop := logicalID(t, "AWS::Lambda::Function", "UndropFn")
	expiry := logicalID(t, "AWS::Lambda::Function", "HoldExpiryFn")
	for _, fn := range []string{"UndropFn", "HoldExpiryFn"} {
		for a := range grants(t, fn) {
			if strings.HasPrefix(a, "s3:") {
				t.Errorf("%s may call %s", fn, a)
			}
		}
	}
	parts := map[string]string{}
	for id, r := range restResources("AWS::ApiGateway::Resource") {
		parts[id] = r["Properties"].(map[string]any)["PathPart"].(string)
	}
	routed := map[string]string{}
	for _, m := range restResources("AWS::ApiGateway::Method") {
		props := m["Properties"].(map[string]any)
		raw, _ := json.Marshal(props["Integration"])
		if !strings.Contains(string(raw), undrop) {
			continue
		}
		res, _ := props["ResourceId"].(map[string]any)
		ref, _ := res["Ref"].(string)
		routed[parts[ref]] = props["HttpMethod"].(string)
		if props["AuthorizationType"] != "AWS_IAM" {
			t.Errorf("a soft-delete route without IAM auth: %v", props)
		}
	}
	for part, method := range map[string]string{"soft-deleted-tables": "GET", "legal-hold": "POST", "undrop": "POST", "purge-now": "POST"} {
		if routed[part] != method {
			t.Errorf("%s %s is not routed to the undrop function (routed: %v)", method, part, routed)
		}
	}
	found := false
	for _, r := range resources("AWS::Events::Rule") {
		props := r["Properties"].(map[string]any)
		raw, _ := json.Marshal(props["Targets"])
		if props["ScheduleExpression"] == "rate(15 minutes)" && strings.Contains(string(raw), expiry) {
			found = true
		}
	}
	if !found {
		t.Errorf("no rate(15 minutes) schedule targets the hold-expiry function")
	}
	alarmed := false
	for _, a := range resources("AWS::CloudWatch::Alarm") {
		props := a["Properties"].(map[string]any)
		raw, _ := json.Marshal(props["Dimensions"])
		if props["MetricName"] == "Errors" && strings.Contains(string(raw), expiry) && props["AlarmActions"] != nil {
			alarmed = true
		}
	}
	if !alarmed {
		t.Errorf("no alarm (with an action) on the hold-expiry function's errors")
	}
}

// Errors API Gateway answers itself are ErrorModels too: a body past the
// invoke limit is a 413 with the Iceberg error shape.
func TestGatewayErrorsAreErrorModels(t *testing.T) {
	found := map[string]bool{}
	for _, r := range restResources("AWS::ApiGateway::GatewayResponse") {
		props := r["Properties"].(map[string]any)
		typ, _ := props["ResponseType"].(string)
		tmpl, _ := props["ResponseTemplates"].(map[string]any)["application/json"].(string)
		if !strings.Contains(tmpl, `"error":{"message":`) || !strings.Contains(tmpl, `"code":`+props["StatusCode"].(string)) {
			t.Errorf("%s: template %s is not an ErrorModel with its status", typ, tmpl)
		}
		found[typ] = true
	}
	for _, typ := range []string{"REQUEST_TOO_LARGE", "MISSING_AUTHENTICATION_TOKEN", "INVALID_SIGNATURE", "THROTTLED", "INTEGRATION_FAILURE"} {
		if !found[typ] {
			t.Errorf("no gateway response for %s", typ)
		}
	}
	restTemplate.HasResourceProperties(jsii.String("AWS::ApiGateway::GatewayResponse"), map[string]any{
		"ResponseType": "REQUEST_TOO_LARGE", "StatusCode": "413",
	})
}

// The OAuth2 token endpoint answers RFC 6749's invalid_client without auth
// and without a function (a mock integration); it is the only method without
// IAM auth.
func TestOAuthTokenEndpointRefusesInRFC6749Shape(t *testing.T) {
	open := 0
	for _, m := range restResources("AWS::ApiGateway::Method") {
		props := m["Properties"].(map[string]any)
		if props["AuthorizationType"] == "AWS_IAM" {
			continue
		}
		open++
		integ, _ := props["Integration"].(map[string]any)
		resps, _ := integ["IntegrationResponses"].([]any)
		if integ["Type"] != "MOCK" || props["HttpMethod"] != "POST" || len(resps) != 1 {
			t.Errorf("a method without IAM auth that is not the token endpoint's mock: %v", props)
			continue
		}
		r := resps[0].(map[string]any)
		var body struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		tmpl, _ := r["ResponseTemplates"].(map[string]any)["application/json"].(string)
		if err := json.Unmarshal([]byte(tmpl), &body); err != nil || r["StatusCode"] != "401" || body.Error != "invalid_client" ||
			!strings.Contains(body.Description, "does not offer") {
			t.Errorf("token endpoint answers %v %q (%v), want 401 invalid_client", r["StatusCode"], tmpl, err)
		}
		reqs, _ := integ["RequestTemplates"].(map[string]any)
		if reqs["application/x-www-form-urlencoded"] == nil {
			t.Errorf("no request template for the form OAuth2 clients post: %v", reqs)
		}
	}
	if open != 1 {
		t.Errorf("%d methods without IAM auth, want the token endpoint only", open)
	}
	paths := map[string]bool{}
	for _, r := range restResources("AWS::ApiGateway::Resource") {
		paths[r["Properties"].(map[string]any)["PathPart"].(string)] = true
	}
	if !paths["oauth"] || !paths["tokens"] {
		t.Errorf("no v1/oauth/tokens resource: %v", paths)
	}
}

// Partition drop in AWS: its routes (drop, retention policies, verify) go
// to the partition-drop function, the retention function runs hourly with
// an alarm on its errors; both read and write only what lies in tables'
// metadata/ folders and delete nothing. Snapshot expiry's files go through
// the delete queue: the retention function may only start the purge
// machine, whose plan step enqueues them and whose delete function alone
// deletes.
func TestPartitionFunctionsRoutesAndSchedule(t *testing.T) {
	fn := logicalID(t, "AWS::Lambda::Function", "PartitionDropFn")
	sweep := logicalID(t, "AWS::Lambda::Function", "RetentionFn")
	for _, name := range []string{"PartitionDropFn", "RetentionFn"} {
		for a, res := range grants(t, name) {
			if strings.HasPrefix(a, "s3:Delete") || strings.HasPrefix(a, "sqs:") {
				t.Errorf("%s may call %s", name, a)
			}
			if strings.HasPrefix(a, "states:") && (name != "RetentionFn" || a != "states:StartExecution" || !slices.Equal(res, []string{machineArn})) {
				t.Errorf("%s may call %s on %v: only the retention function starts the purge machine (expire jobs)", name, a, res)
			}
			// The partition-drop function also serves verify (it reads
			// any object) and repair (it copies a version back over a
			// key, and writes no bytes of its own outside metadata/).
			want := []string{"${Warehouse.Arn}/*/metadata/*"}
			switch {
			case name == "PartitionDropFn" && a == "s3:GetObject":
				want = append(want, objectsArn)
			case name == "PartitionDropFn" && a == "s3:PutObject":
				want = append(want, objectsArn+" if a copy")
			}
			sort.Strings(want)
			if (a == "s3:GetObject" || a == "s3:PutObject") && !slices.Equal(res, want) {
				t.Errorf("%s: %s on %v, want %v", name, a, res, want)
			}
		}
	}
	parts := map[string]string{}
	for id, r := range restResources("AWS::ApiGateway::Resource") {
		parts[id] = r["Properties"].(map[string]any)["PathPart"].(string)
	}
	routed := map[string]bool{}
	for _, m := range restResources("AWS::ApiGateway::Method") {
		props := m["Properties"].(map[string]any)
		raw, _ := json.Marshal(props["Integration"])
		if !strings.Contains(string(raw), fn) {
			continue
		}
		res, _ := props["ResourceId"].(map[string]any)
		ref, _ := res["Ref"].(string)
		routed[props["HttpMethod"].(string)+" "+parts[ref]] = true
		if props["AuthorizationType"] != "AWS_IAM" {
			t.Errorf("a partition route without IAM auth: %v", props)
		}
	}
	for _, r := range infra.PartitionRoutes {
		segs := strings.Split(r.Path, "/")
		if !routed[r.Method+" "+segs[len(segs)-1]] {
			t.Errorf("%s %s is not routed to the partition-drop function (routed: %v)", r.Method, r.Path, routed)
		}
	}
	if len(routed) != len(infra.PartitionRoutes) {
		t.Errorf("routed to the partition-drop function: %v", routed)
	}
	scheduled, alarmed := false, false
	for _, r := range resources("AWS::Events::Rule") {
		props := r["Properties"].(map[string]any)
		raw, _ := json.Marshal(props["Targets"])
		scheduled = scheduled || props["ScheduleExpression"] == "rate(1 hour)" && strings.Contains(string(raw), sweep)
	}
	for _, a := range resources("AWS::CloudWatch::Alarm") {
		props := a["Properties"].(map[string]any)
		raw, _ := json.Marshal(props["Dimensions"])
		alarmed = alarmed || props["MetricName"] == "Errors" && strings.Contains(string(raw), sweep) && props["AlarmActions"] != nil
	}
	if !scheduled || !alarmed {
		t.Errorf("retention: scheduled hourly %v, alarm on errors %v", scheduled, alarmed)
	}
}

// The outbox: the table streams its keys, and the outbox function is woken
// by inserted OUTBOX items only (not by every write of the catalog).
func TestOutboxFunctionReadsTheStreamFilteredToEvents(t *testing.T) {
	table := resources("AWS::DynamoDB::Table")[logicalID(t, "AWS::DynamoDB::Table", "Catalog")]
	if spec := table["Properties"].(map[string]any)["StreamSpecification"]; !reflect.DeepEqual(spec, map[string]any{"StreamViewType": "KEYS_ONLY"}) {
		t.Errorf("table stream: %v", spec)
	}
	fn := logicalID(t, "AWS::Lambda::Function", "OutboxFn")
	found := 0
	for _, m := range resources("AWS::Lambda::EventSourceMapping") {
		p := m["Properties"].(map[string]any)
		if !reflect.DeepEqual(p["FunctionName"], map[string]any{"Ref": fn}) {
			continue
		}
		found++
		raw, _ := json.Marshal(p["FilterCriteria"])
		for _, want := range []string{`\"eventName\":[\"INSERT\"]`, `\"pk\":{\"S\":[\"OUTBOX\"]}`} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("outbox mapping filter %s lacks %s", raw, want)
			}
		}
		if p["StartingPosition"] != "LATEST" {
			t.Errorf("outbox mapping starts at %v", p["StartingPosition"])
		}
	}
	if found != 1 {
		t.Errorf("%d event source mappings for the outbox function, want 1", found)
	}
}
