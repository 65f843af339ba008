// Command partition-drop is the Lambda behind the partition routes of the
// lifecycle API (SPEC §5): the same router as the catalog, with the
// partitions service, which reads manifests and writes new ones but never
// deletes an object.
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
	cfg, err := routerenv.PartitionRouterConfig(context.Background(), env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(apigw.Serve(router.New(cfg)))
}
