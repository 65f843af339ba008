package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/lambdaenv"
)

// vendingRole is the role the api function assumes for vended credentials
// (X-Iceberg-Access-Delegation: vended-credentials). Only the api
// function's role may assume it; it holds the engine policy's storage
// statements (read and write objects, list, never delete, never write a
// metadata file), and each session is narrowed further by a session policy
// to one table's prefixes (shared/credentials). Sessions last up to 1
// hour: the api function's own credentials are temporary, so its
// AssumeRole is role chaining, which STS caps at 1 hour whatever the
// role's maximum; each catalog's vended-credentials.duration lies within
// that, and so does how long a session vended before a legal hold, a soft
// drop or a revoke may still write.
func (s *Stack) vendingRole(scope constructs.Construct) {
	role := awsiam.NewRole(scope, jsii.String("VendingRole"), &awsiam.RoleProps{
		Description:        jsii.String("icehold vended credentials: engines' table-scoped sessions, assumed by the api function only"),
		AssumedBy:          awsiam.NewArnPrincipal(s.APIFn.Role().RoleArn()),
		MaxSessionDuration: awscdk.Duration_Seconds(jsii.Number(credentials.MaxDuration.Seconds())),
	})
	statements := *s.engineStatements()
	for _, st := range statements[1:] { // all but execute-api:Invoke
		role.AddToPolicy(st)
	}
	s.APIFn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("sts:AssumeRole"),
		Resources: jsii.Strings(*role.RoleArn()),
	}))
	s.APIFn.AddEnvironment(jsii.String(lambdaenv.EnvVendingRole), role.RoleArn(), nil)
	s.VendingRole = role
}
