// Package infra is icehold's CDK stack: what `cdk deploy` creates in AWS.
package infra

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/shared/bucketguard"
	"github.com/icehold/icehold/shared/lambdaenv"
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
	// DeleteReservedConcurrency reserves that many concurrent executions
	// for the delete function; 0 reserves none (the event source mapping's
	// maximum concurrency bounds the deleters either way).
	DeleteReservedConcurrency int
	// WarehouseBuckets are existing buckets (names or ARNs) the catalogs'
	// warehouses lie in; none: the stack makes its own bucket.
	WarehouseBuckets []string
	// KMSKeyARN is a customer managed key: the SSE-KMS key of the bucket
	// the stack makes (existing buckets keep their own settings: their
	// default encryption should name it), of the table and of the queues;
	// every role gets the KMS actions its calls need on it.
	KMSKeyARN string
	// APIRate and APIBurst throttle the API stage (0: the defaults).
	APIRate, APIBurst int
	// AccessLogDays is the retention of the API's access logs (0: default).
	AccessLogDays int
	// API is the front door: APIHTTP ("": the default), APIREST or APIBoth.
	API string
	// BreakGlassRole is a role ARN the warehouse bucket's guard exempts
	// beside icehold's deleting role (it may delete versions and change
	// versioning, lifecycle rules and the policy); "" for none.
	BreakGlassRole string
}

// withDefaults fills the settings left zero.
func (p Props) withDefaults() Props {
	if p.APIRate == 0 {
		p.APIRate = DefaultAPIRate
	}
	if p.APIBurst == 0 {
		p.APIBurst = DefaultAPIBurst
	}
	if p.AccessLogDays == 0 {
		p.AccessLogDays = DefaultAccessLogDays
	}
	if p.API == "" {
		p.API = APIHTTP
	}
	return p
}

// Stack is the deployed product; its parts are exported for tests and for
// the lifecycle constructs that build on them.
type Stack struct {
	awscdk.Stack
	// VendingRole: what vended credentials are sessions of (infra/vending.go).
	VendingRole awsiam.Role
	Table       awsdynamodb.Table
	// Warehouse is the bucket the stack made (nil with WarehouseBuckets);
	// Buckets are every bucket the catalogs may use.
	Warehouse awss3.Bucket
	Buckets   []awss3.IBucket
	// Key is the customer managed key (nil: AWS-owned keys).
	Key awskms.IKey
	// AccessLogs receives the APIs' JSON access log.
	AccessLogs awslogs.LogGroup
	// API is the REST API (nil unless icehold:api is rest or both),
	// HTTPAPI the HTTP API (nil when it is rest).
	API     awsapigateway.RestApi
	HTTPAPI awsapigatewayv2.CfnApi
	APIFn   awslambda.Function
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

	// routed: the REST API's paths (no slashes around) and the methods
	// routes put on them (catchAll completes the tree from it).
	routed map[string][]string
	// fnRoutes: the function of each route ("METHOD /path") that is not
	// the catalog function's (the HTTP API's routes read it).
	fnRoutes map[string]awslambda.IFunction
}

// NewStack defines the stack; p must pass Validate (FromContext checks it).
func NewStack(scope constructs.Construct, id string, p Props) *Stack {
	p = p.withDefaults()
	if err := p.Validate(); err != nil {
		panic(err)
	}
	st := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	s := &Stack{Stack: st}
	if len(p.Admins) == 0 {
		// It deploys, but grants start from the admins: without one nobody
		// can create a catalog (a 403 on the system scope).
		awscdk.Annotations_Of(st).AddWarningV2(jsii.String("icehold:no-admins"), jsii.String("icehold:admins is empty: "+
			"no principal holds any privilege, so nobody can create a catalog after this deploy. "+
			"Deploy with -c icehold:admins=arn:aws:iam::<account>:role/<admin-role> (docs/deploy.md, Admins)"), nil)
	}
	if p.KMSKeyARN != "" {
		s.Key = awskms.Key_FromKeyArn(st, jsii.String("Key"), jsii.String(p.KMSKeyARN))
	}

	tableProps := &awsdynamodb.TableProps{
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
	}
	if s.Key != nil {
		tableProps.Encryption, tableProps.EncryptionKey = awsdynamodb.TableEncryption_CUSTOMER_MANAGED, s.Key
	}
	// Its construct id (and so its logical id) is in infra/stateful.json:
	// a new one would replace the table on upgrade.
	s.Table = awsdynamodb.NewTable(st, jsii.String("Catalog"), tableProps)

	s.warehouseBuckets(st, p)

	env := map[string]*string{
		lambdaenv.EnvTable:            s.Table.TableName(),
		lambdaenv.EnvAdmins:           jsii.String(strings.Join(p.Admins, ",")),
		lambdaenv.EnvDefaultCatalog:   jsii.String(p.DefaultCatalog),
		lambdaenv.EnvWarehouseBuckets: jsii.String(strings.Join(s.bucketNames(), ",")),
	}
	s.APIFn = goFunction(st, "ApiFn", filepath.Join(p.AssetsDir, "api"), env, 1024, 29)

	s.AccessLogs = awslogs.NewLogGroup(st, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     retention(p.AccessLogDays),
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN, // who called what outlives the stack
	})
	if p.API != APIHTTP {
		s.restAPI(st, p)
	}
	if p.API != APIREST {
		s.HTTPAPI = awsapigatewayv2.NewCfnApi(st, jsii.String("HttpApi"), &awsapigatewayv2.CfnApiProps{
			Name: st.StackName(), ProtocolType: jsii.String("HTTP"),
			Description: jsii.String("icehold: the Iceberg REST catalog and the lifecycle API (IAM authorization)"),
		})
	}

	s.EnginePolicy = awsiam.NewManagedPolicy(st, jsii.String("EnginePolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("icehold engines: call the catalog, read and write the warehouse, never delete, never write metadata files"),
		Statements:  s.engineStatements(),
	})

	s.purgePipeline(st, p, env)
	s.softDelete(st, p, env)
	s.partitions(st, p, env)
	if s.API != nil {
		s.catchAll()
	}
	if s.HTTPAPI != nil {
		s.httpRoutes(p)
	}
	s.grantAccess()
	s.vendingRole(st)
	s.guardWarehouse(st, p)

	// The outputs the docs and the CLI name (docs/operations.md, Deploy).
	s.catalogURIs(st)
	awscdk.NewCfnOutput(st, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: s.Table.TableName(), Description: jsii.String("the DynamoDB table (icehold migrate --table)")})
	awscdk.NewCfnOutput(st, jsii.String("WarehouseBuckets"), &awscdk.CfnOutputProps{Value: jsii.String(strings.Join(s.bucketNames(), ",")), Description: jsii.String("the buckets catalogs' warehouses may lie in")})
	awscdk.NewCfnOutput(st, jsii.String("EnginePolicyArn"), &awscdk.CfnOutputProps{Value: s.EnginePolicy.ManagedPolicyArn()})
	awscdk.NewCfnOutput(st, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{Value: s.AlarmTopic.TopicArn(), Description: jsii.String("the SNS topic the alarms notify: subscribe the on-call to it")})
	awscdk.NewCfnOutput(st, jsii.String("AccessLogGroup"), &awscdk.CfnOutputProps{Value: s.AccessLogs.LogGroupName(), Description: jsii.String("the API's access log: one JSON line per request, with the caller's IAM ARN")})
	return s
}

// warehouseBuckets makes the warehouse bucket, or imports the existing ones.
func (s *Stack) warehouseBuckets(st awscdk.Stack, p Props) {
	if len(p.WarehouseBuckets) == 0 {
		props := &awss3.BucketProps{
			BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
			EnforceSSL:        jsii.Bool(true),
			Encryption:        awss3.BucketEncryption_S3_MANAGED,
			RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
			// Versioned: an engine's overwrite or delete of a committed
			// file leaves the prior version, which repair restores; only
			// icehold's deleting role removes versions (the guard policy,
			// guardWarehouse), so a purge still leaves nothing
			// (docs/design/infra.md, the warehouse bucket).
			Versioned: jsii.Bool(true),
		}
		if s.Key != nil {
			// A bucket key: S3 asks KMS for a data key per bucket and period,
			// not per object (cost and KMS request quotas).
			props.Encryption, props.EncryptionKey, props.BucketKeyEnabled = awss3.BucketEncryption_KMS, s.Key, jsii.Bool(true)
		}
		s.Warehouse = awss3.NewBucket(st, jsii.String("Warehouse"), props)
		s.Buckets = []awss3.IBucket{s.Warehouse}
		return
	}
	for i, b := range p.WarehouseBuckets {
		name, _ := BucketName(b) // Validate checked it
		s.Buckets = append(s.Buckets, awss3.Bucket_FromBucketName(st, jsii.String(fmt.Sprintf("ExistingWarehouse%d", i)), jsii.String(name)))
	}
}

// guardWarehouse puts the lifecycle guard (shared/bucketguard) on the
// bucket the stack makes: only the delete function's role and the
// break-glass role delete versions; those and the role CloudFormation
// deploys with (the CDK bootstrap's execution role, which writes this
// policy on every update) change versioning, lifecycle rules or the
// policy. A bucket the operator brings keeps its own policy: icehold
// preflight checks it.
func (s *Stack) guardWarehouse(st awscdk.Stack, p Props) {
	if s.Warehouse == nil {
		return
	}
	deleters := []string{*s.DeleteFn.Role().RoleArn()}
	if p.BreakGlassRole != "" {
		deleters = append(deleters, p.BreakGlassRole)
	}
	deployer := *awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:iam::${AWS::AccountId}:role/cdk-"+bootstrapQualifier(st)+"-cfn-exec-role-${AWS::AccountId}-${AWS::Region}"), nil)
	for _, r := range bucketguard.Rules(*awscdk.Aws_PARTITION(), *s.Warehouse.BucketName(), deleters, []string{deployer}) {
		s.Warehouse.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(r.Sid), Effect: awsiam.Effect_DENY, Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions: jsii.Strings(r.Actions...), Resources: jsii.Strings(r.Resource),
			Conditions: &map[string]any{"ArnNotLike": map[string]any{"aws:PrincipalArn": r.Exempt}},
		}))
	}
}

// bootstrapQualifier is the CDK bootstrap's qualifier (cdk.json's
// @aws-cdk/core:bootstrapQualifier, else the default).
func bootstrapQualifier(st awscdk.Stack) string {
	if q, ok := st.Node().TryGetContext(jsii.String("@aws-cdk/core:bootstrapQualifier")).(string); ok && q != "" {
		return q
	}
	return *awscdk.DefaultStackSynthesizer_DEFAULT_QUALIFIER()
}

// bucketNames are the names of the warehouse buckets.
func (s *Stack) bucketNames() []string {
	out := make([]string, len(s.Buckets))
	for i, b := range s.Buckets {
		out[i] = *b.BucketName()
	}
	return out
}

// retention is the log retention of that many days, rounded up to one
// CloudWatch Logs offers.
func retention(days int) awslogs.RetentionDays {
	for _, d := range []struct {
		n int
		r awslogs.RetentionDays
	}{
		{1, awslogs.RetentionDays_ONE_DAY}, {3, awslogs.RetentionDays_THREE_DAYS}, {5, awslogs.RetentionDays_FIVE_DAYS},
		{7, awslogs.RetentionDays_ONE_WEEK}, {14, awslogs.RetentionDays_TWO_WEEKS}, {30, awslogs.RetentionDays_ONE_MONTH},
		{60, awslogs.RetentionDays_TWO_MONTHS}, {90, awslogs.RetentionDays_THREE_MONTHS}, {120, awslogs.RetentionDays_FOUR_MONTHS},
		{150, awslogs.RetentionDays_FIVE_MONTHS}, {180, awslogs.RetentionDays_SIX_MONTHS}, {365, awslogs.RetentionDays_ONE_YEAR},
		{400, awslogs.RetentionDays_THIRTEEN_MONTHS}, {545, awslogs.RetentionDays_EIGHTEEN_MONTHS}, {731, awslogs.RetentionDays_TWO_YEARS},
		{1096, awslogs.RetentionDays_THREE_YEARS}, {1827, awslogs.RetentionDays_FIVE_YEARS}, {2192, awslogs.RetentionDays_SIX_YEARS},
		{2557, awslogs.RetentionDays_SEVEN_YEARS}, {2922, awslogs.RetentionDays_EIGHT_YEARS}, {3288, awslogs.RetentionDays_NINE_YEARS},
		{3653, awslogs.RetentionDays_TEN_YEARS},
	} {
		if days <= d.n {
			return d.r
		}
	}
	return awslogs.RetentionDays_INFINITE
}

// goFunction is one Go Lambda (provided.al2023, arm64 unless icehold:arch
// says x86_64) from its bootstrap folder; opts adjust its props (e.g.
// reserved concurrency).
func goFunction(scope constructs.Construct, id, dir string, env map[string]*string, memoryMB, timeoutSec float64, opts ...func(*awslambda.FunctionProps)) awslambda.Function {
	arch := awslambda.Architecture_ARM_64()
	if ctxString(scope.Node(), CtxArch, "arm64") == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	props := &awslambda.FunctionProps{
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: arch,
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
