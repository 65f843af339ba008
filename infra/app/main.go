// Command app is the CDK app (cdk.json runs it): `cdk deploy` after `make lambdas`.
package main

import (
	"os"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/infra"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	ctxString := func(key, def string) string {
		if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
			return v
		}
		return def
	}
	var admins []string
	for _, a := range strings.Split(ctxString("icehold:admins", os.Getenv("ICEHOLD_ADMINS")), ",") {
		if a = strings.TrimSpace(a); a != "" {
			admins = append(admins, a)
		}
	}
	infra.NewStack(app, ctxString("icehold:stack-name", "Icehold"), infra.Props{
		AssetsDir:      ctxString("icehold:assets", "dist"),
		Admins:         admins,
		DefaultCatalog: ctxString("icehold:default-catalog", ""),
	})
	app.Synth(nil)
}
