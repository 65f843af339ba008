// Command api is the catalog Lambda: API Gateway proxy events in, the Iceberg
// REST catalog and the lifecycle views out.
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
	cfg, err := routerenv.RouterConfig(context.Background(), env, false)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(apigw.Serve(router.New(cfg)))
}
