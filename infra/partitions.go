package infra

import (
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/shared/lambdaenv"
)

// PartitionRoutes are the lifecycle routes the partition-drop function
// serves (SPEC §5).
var PartitionRoutes = []struct{ Path, Method string }{
	{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/partitions/drop", "POST"},
}

// partitions is SPEC §5 in AWS: the partition-drop function behind the
// partition routes. It reads a table's metadata, manifest list and the
// manifests a drop may touch, and writes new manifests, a manifest list and
// a metadata file; it deletes nothing (the ended files go through snapshot
// expiry and the delete pipeline).
func (s *Stack) partitions(st awscdk.Stack, p Props, env map[string]*string) {
	env = withEnv(env, map[string]*string{lambdaenv.EnvEventBus: s.Bus.EventBusName()})
	// 1 GB like the catalog: a metadata file may take 64 MiB and its parse
	// a few times that; manifests are streamed, eight at a time. 29 s is
	// API Gateway's integration timeout.
	s.PartitionDropFn = goFunction(st, "PartitionDropFn", filepath.Join(p.AssetsDir, "partition-drop"), env, 1024, 29)
	integration := awsapigateway.NewLambdaIntegration(s.PartitionDropFn, nil)
	iam := &awsapigateway.MethodOptions{AuthorizationType: awsapigateway.AuthorizationType_IAM}
	for _, r := range PartitionRoutes {
		s.API.Root().ResourceForPath(jsii.String(r.Path)).AddMethod(jsii.String(r.Method), integration, iam)
	}
}
