// Command drop is the Lambda behind DELETE …/tables/{t}: one transaction and a
// StartExecution; the same router as the catalog, with the purge entry.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/routerenv"
	"github.com/icehold/icehold/shared/router"
)

func main() {
	env, err := lambdaenv.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := routerenv.RouterConfig(context.Background(), env, true)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(apigw.Serve(router.New(cfg)))
}
