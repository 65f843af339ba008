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

// Only the delete pipeline may delete objects: the catalog function's role
// holds no s3:DeleteObject, and the engines' policy denies it.
func TestNoDeleteForCatalogOrEngines(t *testing.T) {
	policies := template.FindResources(jsii.String("AWS::IAM::Policy"), nil)
	raw, _ := json.Marshal(policies)
	if strings.Contains(string(raw), "s3:DeleteObject") {
		t.Errorf("a role policy allows s3:DeleteObject: %s", raw)
	}
	template.HasResourceProperties(jsii.String("AWS::IAM::ManagedPolicy"), map[string]any{
		"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{
			assertions.Match_ObjectLike(&map[string]any{"Effect": "Deny", "Action": []any{"s3:DeleteObject", "s3:DeleteObjectVersion"}}),
		})},
	})
}
