package main

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"

	"github.com/icehold/icehold/local/awstest"
)

// fakeAccount is Lambda's and CloudFormation's view of one account: its
// quota, and the reservations a deployed stack's functions hold (by
// logical id; the stack is not deployed, as far as the others go).
type fakeAccount struct {
	quota int
	held  map[string]int
}

func (f fakeAccount) GetAccountSettings(context.Context, *lambda.GetAccountSettingsInput, ...func(*lambda.Options)) (*lambda.GetAccountSettingsOutput, error) {
	unreserved := f.quota
	for _, r := range f.held {
		unreserved -= r
	}
	return &lambda.GetAccountSettingsOutput{AccountLimit: &lambdatypes.AccountLimit{
		ConcurrentExecutions: int32(f.quota), UnreservedConcurrentExecutions: aws.Int32(int32(unreserved))}}, nil
}

func (f fakeAccount) GetFunctionConcurrency(_ context.Context, in *lambda.GetFunctionConcurrencyInput, _ ...func(*lambda.Options)) (*lambda.GetFunctionConcurrencyOutput, error) {
	id := strings.TrimPrefix(aws.ToString(in.FunctionName), "Icehold-")
	out := &lambda.GetFunctionConcurrencyOutput{}
	if r, ok := f.held[id]; ok && r > 0 {
		out.ReservedConcurrentExecutions = aws.Int32(int32(r))
	}
	return out, nil
}

func (f fakeAccount) DescribeStackResource(_ context.Context, in *cloudformation.DescribeStackResourceInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStackResourceOutput, error) {
	if _, ok := f.held[aws.ToString(in.LogicalResourceId)]; !ok { // a function without a reservation is not asked for here
		return nil, &smithy.GenericAPIError{Code: "ValidationError", Message: "Stack with id " + aws.ToString(in.StackName) + " does not exist"}
	}
	return &cloudformation.DescribeStackResourceOutput{StackResourceDetail: &cfntypes.StackResourceDetail{
		PhysicalResourceId: aws.String("Icehold-" + aws.ToString(in.LogicalResourceId))}}, nil
}

// stackTemplate is a synthesized template's shape as far as the preflight
// reads it: the functions (the delete function reserving reserved, 0: no
// reservation) and the delete queue's mapping.
func stackTemplate(t *testing.T, reserved int) string {
	t.Helper()
	del := `{"Type": "AWS::Lambda::Function", "Properties": {"Handler": "bootstrap"}}`
	mapping := 50
	if reserved > 0 {
		del = fmt.Sprintf(`{"Type": "AWS::Lambda::Function", "Properties": {"ReservedConcurrentExecutions": %d}}`, reserved)
		mapping = min(50, reserved-10)
	}
	body := fmt.Sprintf(`{"Resources": {
		"ApiFnA1": {"Type": "AWS::Lambda::Function", "Properties": {"Handler": "bootstrap"}},
		"DeleteFnB2": %s,
		"DeleteFnSqsEventSourceC3": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"BatchSize": 1, "ScalingConfig": {"MaximumConcurrency": %d}}},
		"OutboxFnOutboxStreamD4": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"BatchSize": 100}}
	}}`, del, mapping)
	path := filepath.Join(t.TempDir(), "Icehold.template.json")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// `icehold preflight` says, before a deploy, whether the stack fits the
// account's Lambda concurrency and what to raise: for a new account's quota
// of 10 and the usual 1,000, without and with a reservation, and on an
// upgrade of a deployed stack whose reservation the update gives back.
func TestPreflightForQuotasOf10And1000(t *testing.T) {
	isolate(t)
	real := preflightClients
	t.Cleanup(func() { preflightClients = real })
	for _, c := range []struct {
		name     string
		account  fakeAccount
		reserved int
		fits     bool
		says     []string
		never    []string
	}{
		{"quota 10, no reservation", fakeAccount{quota: 10}, 0, true,
			[]string{"quota 10, 10 unreserved", "reserves no concurrency", "fits: 10 unreserved after the deploy", "warning: a purge at full speed runs 60 at once", "L-B99A9384"}, nil},
		{"quota 1000, no reservation", fakeAccount{quota: 1000}, 0, true,
			[]string{"fits: 1000 unreserved after the deploy"}, []string{"warning", "does not fit"}},
		{"quota 10, reservation 60", fakeAccount{quota: 10}, 60, false,
			[]string{"reserves 60 (DeleteFnB2 60)", "would leave -50 unreserved", "raise the quota to at least 160", "L-B99A9384", "without icehold:delete-reserved-concurrency"}, []string{"fits:"}},
		{"quota 1000, reservation 60", fakeAccount{quota: 1000}, 60, true,
			[]string{"fits: 940 unreserved after the deploy"}, []string{"warning", "does not fit"}},
		{"quota 160, upgrade keeping the reservation 60", fakeAccount{quota: 160, held: map[string]int{"DeleteFnB2": 60}}, 60, true,
			[]string{"quota 160, 100 unreserved", "hold 60 reserved now", "fits: 100 unreserved after the deploy"}, []string{"does not fit"}},
		{"quota 1000, upgrade dropping the reservation 60", fakeAccount{quota: 1000, held: map[string]int{"DeleteFnB2": 60}}, 0, true,
			[]string{"fits: 1000 unreserved after the deploy"}, []string{"warning"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			preflightClients = func(context.Context, string, string, string) (lambdaAPI, stackAPI, error) {
				return c.account, c.account, nil
			}
			out, _, err := cli("preflight", "--template", stackTemplate(t, c.reserved), "--region", "us-east-1")
			if c.fits && err != nil || !c.fits && !errors.Is(err, errDoesNotFit) {
				t.Errorf("preflight: %v, want fits %v\n%s", err, c.fits, out)
			}
			for _, s := range c.says {
				if !strings.Contains(out, s) {
					t.Errorf("the answer lacks %q:\n%s", s, out)
				}
			}
			for _, s := range c.never {
				if strings.Contains(out, s) {
					t.Errorf("the answer says %q:\n%s", s, out)
				}
			}
		})
	}
}

// The preflight's rule is Lambda's as moto models it: moto 5.2 serves no
// GetAccountSettings (404), but with MOTO_LAMBDA_CONCURRENCY_QUOTA it
// refuses a PutFunctionConcurrency that leaves fewer than 100 unreserved.
// For quotas of 10 and 1,000, moto refuses or accepts a reservation of 60
// exactly when the preflight says the stack does not fit or fits; once it
// is held, the preflight's Lambda client reads it back from moto.
func TestPreflightAgreesWithMotosLambda(t *testing.T) {
	awstest.RequireMoto(t)
	isolate(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "icehold")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "icehold-local-secret")
	ctx := context.Background()
	for _, quota := range []int{10, 1000} {
		t.Run(fmt.Sprint("quota ", quota), func(t *testing.T) {
			endpoint := startMoto(t, quota)
			lc, _, err := preflightClients(ctx, "us-east-1", "", endpoint)
			if err != nil {
				t.Fatal(err)
			}
			fn := "Icehold-DeleteFnB2"
			createMotoFunction(t, ctx, endpoint, lc.(*lambda.Client), fn)
			_, putErr := lc.(*lambda.Client).PutFunctionConcurrency(ctx, &lambda.PutFunctionConcurrencyInput{FunctionName: aws.String(fn), ReservedConcurrentExecutions: aws.Int32(60)})

			n, err := concurrencyNeeds([]byte(readFile(t, stackTemplate(t, 60))))
			if err != nil {
				t.Fatal(err)
			}
			verdict := preflight(io.Discard, "Icehold", n, account{Quota: quota, Unreserved: quota}, nil)
			if (putErr == nil) != (verdict == nil) {
				t.Fatalf("moto's PutFunctionConcurrency(60): %v; the preflight: %v", putErr, verdict)
			}
			if putErr != nil {
				return
			}
			held, err := heldReservations(ctx, lc, fakeAccount{held: map[string]int{"DeleteFnB2": 0}}, "Icehold", n)
			if err != nil || held["DeleteFnB2"] != 60 {
				t.Errorf("the reservation read back from moto: %v %v, want 60", held, err)
			}
		})
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startMoto runs a moto_server of its own (the quota is read from its
// environment) and stops it at cleanup.
func startMoto(t *testing.T, quota int) string {
	return awstest.StartMoto(t, fmt.Sprintf("MOTO_LAMBDA_CONCURRENCY_QUOTA=%d", quota))
}

// createMotoFunction makes a function in moto with a role moto knows.
func createMotoFunction(t *testing.T, ctx context.Context, endpoint string, lc *lambda.Client, name string) {
	t.Helper()
	// IAM's query API by hand: no IAM client in the module for one call.
	form := url.Values{"Action": {"CreateRole"}, "Version": {"2010-05-08"}, "RoleName": {"icehold-delete"},
		"AssumeRolePolicyDocument": {`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`}}
	req, _ := http.NewRequest(http.MethodPost, endpoint+"/", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=icehold/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("moto CreateRole: %d %s", resp.StatusCode, body)
	}
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	w, _ := zw.Create("bootstrap")
	_, _ = w.Write([]byte("stand-in"))
	_ = zw.Close()
	if _, err := lc.CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(name), Runtime: lambdatypes.RuntimeProvidedal2023,
		Role: aws.String("arn:aws:iam::123456789012:role/icehold-delete"), Handler: aws.String("bootstrap"),
		Code: &lambdatypes.FunctionCode{ZipFile: zipped.Bytes()}}); err != nil {
		t.Fatalf("moto CreateFunction: %v", err)
	}
}
