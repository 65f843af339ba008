// Command undrop is the Lambda behind the soft-delete routes of the
// lifecycle API: undrop, purge-now, legal hold and the soft-deleted listing
// (the same router as the catalog, with the purge entry to start jobs).
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
