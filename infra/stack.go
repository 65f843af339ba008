// Package infra is icehold's CDK stack: what `cdk deploy` creates in AWS.
package infra

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/router"
)

// Props configure the stack.
type Props struct {
	awscdk.StackProps
	// AssetsDir holds one folder per function with its bootstrap (make lambdas).
	AssetsDir string
	// Admins are principal patterns with every privilege (the bootstrap).
	Admins []string
	// DefaultCatalog answers /v1/config without a warehouse.
	DefaultCatalog string
}

// Stack is the deployed product; its parts are exported for tests and for
// the lifecycle constructs that build on them.
type Stack struct {
	awscdk.Stack
	Table     awsdynamodb.Table
	Warehouse awss3.Bucket
	API       awsapigateway.RestApi
	APIFn     awslambda.Function
	// The purge pipeline.
	DropFn, PlanFn, ProgressFn, DeleteFn, ReconcileFn awslambda.Function
	// OutboxFn relays the lifecycle events the other functions record.
	OutboxFn awslambda.Function
	// Soft delete: the undrop routes and the hold-expiry sweep.
	UndropFn, HoldExpiryFn awslambda.Function
	// Partition drop and retention (SPEC §5).
	PartitionDropFn, RetentionFn awslambda.Function
	DeleteQueue, DeleteDLQ       awssqs.Queue
	PurgeMachine                 awsstepfunctions.StateMachine
	// Bus receives the lifecycle events (SPEC §4).
	Bus awsevents.EventBus
	// AlarmTopic is what the alarms notify.
	AlarmTopic awssns.Topic
	// EnginePolicy is for engines (Spark, Trino, …): read and write the
	// warehouse, never delete (soft delete and purge own deletion), never
	// write metadata files (the catalog's).
	EnginePolicy awsiam.ManagedPolicy
}

// NewStack defines the stack.
func NewStack(scope constructs.Construct, id string, p Props) *Stack {
	st := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	s := &Stack{Stack: st}

	s.Table = awsdynamodb.NewTable(st, jsii.String("Catalog"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String("expires_at"),
		// The outbox function wakes on new OUTBOX items (keys are enough:
		// it reads the outbox itself, in order).
		Stream: awsdynamodb.StreamViewType_KEYS_ONLY,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})

	s.Warehouse = awss3.NewBucket(st, jsii.String("Warehouse"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		// Unversioned, by choice: a purge must remove the bytes it reports
		// deleted. In a versioned bucket DeleteObjects only adds delete
		// markers and the data stays as noncurrent versions; recovery is
		// the catalog's (soft delete, SPEC §4), not S3's (docs/design.md).
		Versioned: jsii.Bool(false),
	})

	env := map[string]*string{
		lambdaenv.EnvTable:          s.Table.TableName(),
		lambdaenv.EnvAdmins:         jsii.String(strings.Join(p.Admins, ",")),
		lambdaenv.EnvDefaultCatalog: jsii.String(p.DefaultCatalog),
	}
	s.APIFn = goFunction(st, "ApiFn", filepath.Join(p.AssetsDir, "api"), env, 1024, 29)

	s.API = awsapigateway.NewLambdaRestApi(st, jsii.String("Api"), &awsapigateway.LambdaRestApiProps{
		Handler: s.APIFn,
		// Routes are explicit so the lifecycle operations can have their own
		// functions; everything else goes to the catalog function.
		Proxy: jsii.Bool(false),
		// Gzip answers travel base64 through the proxy integration.
		BinaryMediaTypes: jsii.Strings("*/*"),
		DefaultMethodOptions: &awsapigateway.MethodOptions{
			AuthorizationType: awsapigateway.AuthorizationType_IAM,
		},
		DeployOptions: &awsapigateway.StageOptions{StageName: jsii.String("v1"), TracingEnabled: jsii.Bool(true)},
	})
	s.API.Root().AddMethod(jsii.String("ANY"), nil, nil)
	gatewayErrors(s.API)
	s.API.Root().AddProxy(&awsapigateway.ProxyResourceOptions{AnyMethod: jsii.Bool(true)})
	oauthTokens(s.API)

	s.EnginePolicy = awsiam.NewManagedPolicy(st, jsii.String("EnginePolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("icehold engines: call the catalog, read and write the warehouse, never delete, never write metadata files"),
		Statements:  s.engineStatements(),
	})

	s.purgePipeline(st, p, env)
	s.softDelete(st, p, env)
	s.partitions(st, p, env)
	s.grantAccess()

	awscdk.NewCfnOutput(st, jsii.String("CatalogUri"), &awscdk.CfnOutputProps{Value: s.API.Url()})
	awscdk.NewCfnOutput(st, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: s.Table.TableName(), Description: jsii.String("the DynamoDB table (icehold migrate --table)")})
	awscdk.NewCfnOutput(st, jsii.String("WarehouseBucket"), &awscdk.CfnOutputProps{Value: s.Warehouse.BucketName()})
	awscdk.NewCfnOutput(st, jsii.String("EnginePolicyArn"), &awscdk.CfnOutputProps{Value: s.EnginePolicy.ManagedPolicyArn()})
	awscdk.NewCfnOutput(st, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{Value: s.AlarmTopic.TopicArn(), Description: jsii.String("the SNS topic the alarms notify: subscribe the on-call to it")})
	return s
}

// gatewayErrors shapes the errors API Gateway answers itself (before or
// instead of a function: a body past the invoke limit, a missing or bad
// signature, throttling, a failed or timed-out integration) as the Iceberg
// ErrorModel the functions answer, so a client sees one error shape.
func gatewayErrors(api awsapigateway.RestApi) {
	for _, g := range []struct {
		id     string
		typ    awsapigateway.ResponseType
		status string
		errTyp string
		hint   string
	}{
		{"TooLarge", awsapigateway.ResponseType_REQUEST_TOO_LARGE(), "413", "RequestEntityTooLargeException", "request bodies are limited to about 4.6 MB"},
		{"NoCredentials", awsapigateway.ResponseType_MISSING_AUTHENTICATION_TOKEN(), "403", "NotAuthorizedException", "sign requests with SigV4 (service execute-api)"},
		{"BadSignature", awsapigateway.ResponseType_INVALID_SIGNATURE(), "403", "NotAuthorizedException", "the SigV4 signature does not match"},
		{"Expired", awsapigateway.ResponseType_EXPIRED_TOKEN(), "403", "NotAuthorizedException", "the credentials have expired"},
		{"Denied", awsapigateway.ResponseType_ACCESS_DENIED(), "403", "ForbiddenException", ""},
		{"Throttled", awsapigateway.ResponseType_THROTTLED(), "429", "TooManyRequestsException", "retry with back-off"},
		{"IntegrationFailed", awsapigateway.ResponseType_INTEGRATION_FAILURE(), "502", "ServiceFailureException", "the function could not be invoked (a request body past Lambda's 6 MB invoke payload ends here)"},
		{"IntegrationTimeout", awsapigateway.ResponseType_INTEGRATION_TIMEOUT(), "504", "ServiceUnavailableException", "retry"},
	} {
		msg := "$context.error.messageString"
		if g.hint != "" {
			msg = `"$util.escapeJavaScript($context.error.message): ` + g.hint + `"`
		}
		api.AddGatewayResponse(jsii.String("Error"+g.id), &awsapigateway.GatewayResponseOptions{
			Type: g.typ, StatusCode: jsii.String(g.status),
			Templates: &map[string]*string{"application/json": jsii.String(
				`{"error":{"message":` + msg + `,"type":"` + g.errTyp + `","code":` + g.status + `}}`)},
		})
	}
}

// oauthTokens answers the Iceberg REST spec's OAuth2 token endpoint, which
// icehold does not offer, in RFC 6749's error shape, as the local router
// does: OAuth2 clients (iceberg-go's rest.WithCredential) send no SigV4, so
// behind IAM auth they would read API Gateway's 403 with no reason. A mock
// integration answers without auth and without invoking a function.
func oauthTokens(api awsapigateway.RestApi) {
	body, _ := json.Marshal(map[string]string{"error": "invalid_client", "error_description": router.OAuthRefusal})
	request := jsii.String(`{"statusCode": 401}`)
	headers := map[string]*string{
		"method.response.header.WWW-Authenticate": jsii.String(`'Bearer realm="icehold"'`),
		"method.response.header.Cache-Control":    jsii.String("'no-store'"),
	}
	api.Root().ResourceForPath(jsii.String("v1/oauth/tokens")).AddMethod(jsii.String("POST"),
		awsapigateway.NewMockIntegration(&awsapigateway.IntegrationOptions{
			// OAuth2 clients post a form; a mock integration reads the status from its template.
			RequestTemplates:    &map[string]*string{"application/x-www-form-urlencoded": request, "application/json": request},
			PassthroughBehavior: awsapigateway.PassthroughBehavior_NEVER,
			IntegrationResponses: &[]*awsapigateway.IntegrationResponse{{
				StatusCode:         jsii.String("401"),
				ResponseTemplates:  &map[string]*string{"application/json": jsii.String(string(body))},
				ResponseParameters: &headers,
			}},
		}),
		&awsapigateway.MethodOptions{
			AuthorizationType: awsapigateway.AuthorizationType_NONE,
			MethodResponses: &[]*awsapigateway.MethodResponse{{
				StatusCode: jsii.String("401"),
				ResponseParameters: &map[string]*bool{
					"method.response.header.WWW-Authenticate": jsii.Bool(true), "method.response.header.Cache-Control": jsii.Bool(true),
				},
			}},
		})
}

// goFunction is one Go Lambda (provided.al2023, arm64) from its bootstrap
// folder; opts adjust its props (e.g. reserved concurrency).
func goFunction(scope constructs.Construct, id, dir string, env map[string]*string, memoryMB, timeoutSec float64, opts ...func(*awslambda.FunctionProps)) awslambda.Function {
	props := &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(dir), nil),
		MemorySize:   jsii.Number(memoryMB),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(timeoutSec)),
		Environment:  &env,
		Tracing:      awslambda.Tracing_ACTIVE,
	}
	for _, o := range opts {
		o(props)
	}
	return awslambda.NewFunction(scope, jsii.String(id), props)
}
