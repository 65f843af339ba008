package bench

// prices are AWS's published on-demand list prices in us-east-1 (US East,
// N. Virginia), in USD, without free tiers, read on 2026-12-01 (API
// Gateway and CloudWatch: 2026-12-06) from the pages named beside each
// (docs/cost.md lists them with links). The workloads' monthly costs are
// these times the counted units.
var prices = struct {
	date string

	httpAPIPerM                     float64 // HTTP API requests, first 300 M a month, 512 KB each (aws.amazon.com/api-gateway/pricing)
	restAPIPerM                     float64 // REST API requests, first 333 M a month
	lambdaPerM, lambdaPerGBs        float64 // requests; Arm duration, first tier (aws.amazon.com/lambda/pricing)
	dynamoReadPerM, dynamoWritePerM float64 // on-demand read / write request units (aws.amazon.com/dynamodb/pricing/on-demand)
	dynamoGBMonth                   float64 // storage, Standard table class
	s3Tier1PerK, s3Tier2PerK        float64 // PUT, COPY, POST, LIST / GET, HEAD and others; DELETE free (aws.amazon.com/s3/pricing)
	sfnPerK                         float64 // Standard workflow state transitions (aws.amazon.com/step-functions/pricing)
	sqsPerM                         float64 // standard queue requests (aws.amazon.com/sqs/pricing)
	eventsPerM                      float64 // custom events put on a bus (aws.amazon.com/eventbridge/pricing)
	glueRequestsPerM                float64 // Data Catalog requests (aws.amazon.com/glue/pricing)
	glueObjectsPer100K              float64 // Data Catalog objects stored a month
	dashboardMonth                  float64 // a CloudWatch dashboard a month (aws.amazon.com/cloudwatch/pricing)
	alarmMonth                      float64 // a standard-resolution alarm metric a month
	logsPerGB                       float64 // CloudWatch Logs ingestion (standard), per GB
}{
	date:        "2026-12-01 (API Gateway, CloudWatch: 2026-12-06)",
	httpAPIPerM: 1.00, restAPIPerM: 3.50,
	lambdaPerM: 0.20, lambdaPerGBs: 0.0000133334,
	dynamoReadPerM: 0.125, dynamoWritePerM: 0.625, dynamoGBMonth: 0.25,
	s3Tier1PerK: 0.005, s3Tier2PerK: 0.0004,
	sfnPerK:            0.025,
	sqsPerM:            0.40,
	eventsPerM:         1.00,
	glueRequestsPerM:   1.00,
	glueObjectsPer100K: 1.00,
	dashboardMonth:     3.00, alarmMonth: 0.10, logsPerGB: 0.50,
}

// What the stack logs and watches, as priced: one access log line per API
// request (the JSON object of infra/frontdoor.go with a role's ARN, about
// 500 bytes), Lambda's START, END, REPORT and X-Ray lines per invocation
// (about 400 bytes; the functions log only errors and the purge's metric
// lines), one dashboard, and the stack's alarms (infra: DLQ, failed purge
// jobs, hold-expiry and retention errors).
const (
	accessLogBytes  = 500
	lambdaLogBytes  = 400
	stackDashboards = 1
	stackAlarms     = 4
)

// The functions' memory (infra/: goFunction's memoryMB), GB.
var functionGB = map[string]float64{
	"api": 1, "drop": 0.5, "undrop": 0.5, "partition-drop": 1, "purge-plan": 1, "purge-progress": 0.25,
	"delete": 1, "reconcile": 0.25, "outbox": 0.25, "hold-expiry": 0.5, "retention": 1,
}

// Billed duration is not counted here (the emulators answer in
// microseconds): it is modelled as a few milliseconds of CPU an invocation
// plus AWS's typical latency per call it makes, bench/s3model's for S3.
const (
	cpuMsPerInvocation         = 5
	dynamoMsPerCall            = 5
	s3ReadMs, s3WriteMs        = 10, 30
	sqsMsPerCall, sfnMsPerCall = 10, 20
)
