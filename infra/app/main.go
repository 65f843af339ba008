// Command app is the CDK app (cdk.json runs it): `cdk deploy` after `make lambdas`.
// Its settings are context values (infra/context.go; docs/operations.md, Deploy).
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/infra"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	props, err := infra.FromContext(app.Node())
	if err != nil {
		fmt.Fprintln(os.Stderr, "icehold:", err)
		jsii.Close()
		os.Exit(1)
	}
	infra.NewStack(app, infra.StackName(app.Node()), props)
	app.Synth(nil)
}
