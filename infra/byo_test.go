package infra_test

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/icehold/icehold/infra"
	"github.com/icehold/icehold/local/server"
)

// With icehold:delete-reserved-concurrency the delete function reserves
// exactly that, and the mapping's maximum leaves the finalize steps their
// room within it (30 = 20 + 10).
func TestReservedConcurrencyFromContext(t *testing.T) {
	fn := byoResources("AWS::Lambda::Function")[logicalIDIn(t, byoResources, "AWS::Lambda::Function", "DeleteFn")]
	if r := fn["Properties"].(map[string]any)["ReservedConcurrentExecutions"]; r != float64(30) {
		t.Errorf("the delete function reserves %v, want the context's 30", r)
	}
	if max := mappingMaximum(t, byoResources); max != 20 {
		t.Errorf("the mapping's maximum concurrency is %v, want 20 (30 less 10 for finalize)", max)
	}
	for id, f := range byoResources("AWS::Lambda::Function") {
		if _, ok := f["Properties"].(map[string]any)["ReservedConcurrentExecutions"]; ok && !strings.HasPrefix(id, "DeleteFn") {
			t.Errorf("%s reserves concurrency", id)
		}
	}
}

// Bring your own storage: the stack makes no bucket, every function knows
// the covered buckets, and the table and both queues are encrypted with the
// customer managed key.
func TestExistingBucketsAndKeyFromContext(t *testing.T) {
	if n := len(byoResources("AWS::S3::Bucket")); n != 0 {
		t.Errorf("the stack makes %d buckets beside the existing ones", n)
	}
	for id, f := range byoResources("AWS::Lambda::Function") {
		vars, _ := f["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if got := vars["ICEHOLD_WAREHOUSE_BUCKETS"]; got != server.DefaultBucket+",team-lake" {
			t.Errorf("%s: ICEHOLD_WAREHOUSE_BUCKETS %v", id, got)
		}
	}
	for id, tbl := range byoResources("AWS::DynamoDB::Table") {
		want := map[string]any{"KMSMasterKeyId": byoKey, "SSEEnabled": true, "SSEType": "KMS"}
		if got := tbl["Properties"].(map[string]any)["SSESpecification"]; !reflect.DeepEqual(got, want) {
			t.Errorf("table %s: SSESpecification %v, want %v", id, got, want)
		}
	}
	queues := byoResources("AWS::SQS::Queue")
	for id, q := range queues {
		if got := q["Properties"].(map[string]any)["KmsMasterKeyId"]; got != byoKey {
			t.Errorf("queue %s: KmsMasterKeyId %v, want the key", id, got)
		}
	}
	if len(queues) != 2 {
		t.Errorf("%d queues", len(queues))
	}
	outputs := (*byoTemplate.ToJSON())["Outputs"].(map[string]any)
	if got := outputs["WarehouseBuckets"].(map[string]any)["Value"]; got != server.DefaultBucket+",team-lake" {
		t.Errorf("output WarehouseBuckets %v", got)
	}
}

// The API's edge from the context: throttling and log retention.
func TestAPIEdgeFromContext(t *testing.T) {
	for _, s := range byoResources("AWS::ApiGateway::Stage") {
		for _, ms := range asList(s["Properties"].(map[string]any)["MethodSettings"]) {
			m := ms.(map[string]any)
			if m["ThrottlingRateLimit"] != float64(50) || m["ThrottlingBurstLimit"] != float64(80) {
				t.Errorf("REST API stage throttling %v/%v, want the context's 50/80", m["ThrottlingRateLimit"], m["ThrottlingBurstLimit"])
			}
		}
	}
	for _, s := range byoResources("AWS::ApiGatewayV2::Stage") {
		m := s["Properties"].(map[string]any)["DefaultRouteSettings"].(map[string]any)
		if m["ThrottlingRateLimit"] != float64(50) || m["ThrottlingBurstLimit"] != float64(80) {
			t.Errorf("HTTP API stage throttling %v/%v, want the context's 50/80", m["ThrottlingRateLimit"], m["ThrottlingBurstLimit"])
		}
	}
	for _, g := range byoResources("AWS::Logs::LogGroup") {
		if d := g["Properties"].(map[string]any)["RetentionInDays"]; d != float64(30) {
			t.Errorf("access logs kept %v days, want 30", d)
		}
	}
}

// A malformed context value fails the synth, naming its key, before a
// deploy would fail on it.
func TestMalformedContextRefused(t *testing.T) {
	for _, c := range []struct {
		key   string
		value any
		says  string
	}{
		{infra.CtxDeleteReserved, "5", "at least 12"},
		{infra.CtxDeleteReserved, "-1", "negative"},
		{infra.CtxDeleteReserved, "sixty", "not a whole number"},
		{infra.CtxKMSKey, "arn:aws:kms:us-east-1:111122223333:alias/icehold", "not a KMS key ARN"},
		{infra.CtxWarehouseBuckets, "Bad_Bucket", "neither a bucket name"},
		{infra.CtxWarehouseBuckets, "arn:aws:s3:::lake/prefix", "neither a bucket name"},
		{infra.CtxAPIRate, "0", "must be positive"},
		{infra.CtxAccessLogDays, float64(-3), "must be positive"},
		{infra.CtxAPI, "graphql", "none of http, rest, both"},
		{infra.CtxBreakGlassRole, "arn:aws:iam::111122223333:user/ops", "not an IAM role ARN"},
	} {
		ctx := map[string]any{c.key: c.value}
		_, err := infra.FromContext(awscdk.NewApp(&awscdk.AppProps{Context: &ctx}).Node())
		if err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s=%v: %v, want an error naming the key and saying %q", c.key, c.value, err, c.says)
		}
	}
	// No context: `make synth` as it comes, no reservation.
	if p, err := infra.FromContext(awscdk.NewApp(nil).Node()); err != nil || p.DeleteReservedConcurrency != 0 || p.APIRate != infra.DefaultAPIRate || len(p.WarehouseBuckets) != 0 || p.KMSKeyARN != "" {
		t.Errorf("no context: %+v %v", p, err)
	}
	ctx := maps.Clone(byoContext)
	if _, err := infra.FromContext(awscdk.NewApp(&awscdk.AppProps{Context: &ctx}).Node()); err != nil {
		t.Errorf("the byo context: %v", err)
	}
}
