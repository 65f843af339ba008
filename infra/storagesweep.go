package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/shared/storagesweep"
)

// StorageSweepRoutes are the lifecycle routes the drop function serves:
// starting a sweep reads the report's manifest, makes a job and starts
// its workflow, as a drop starts a purge (docs/design/storagesweep.md).
var StorageSweepRoutes = []struct{ Path, Method string }{
	{"lifecycle/v1/catalogs/{c}/storage-sweep", "POST"},
	{"lifecycle/v1/catalogs/{c}/namespaces/{namespace}/tables/{table}/storage-sweep", "POST"},
}

// The inventory the stack configures on the bucket it makes: S3 delivers
// its reports to the inventory bucket under
// <InventoryPrefix>/<warehouse bucket>/<InventoryID>/.
const (
	InventoryID     = "icehold"
	InventoryPrefix = "inventory"
)

// InventoryFields are the optional fields the sweep reads beside those
// every report of all versions has (Bucket, Key, VersionId, IsLatest,
// IsDeleteMarker).
var InventoryFields = []string{"Size", "LastModifiedDate"}

// The table items the sweep reads and writes beyond a purge's: its
// working items (SWEEP#), the ownership index (LOC#), and the catalog,
// namespace, soft-deleted records and active jobs that protect a table.
var (
	// sweepPlanActions: the plan's steps query the index and the sweep's
	// chunks, put the chunks and table lists, write batches, move the job.
	sweepPlanActions = []string{"GetItem", "Query", "PutItem", "BatchWriteItem", "UpdateItem"}
	sweepPlanKeys    = []string{pkSweep, pkClaim, pkActiveJob, pkJob, pkBatch, pkTable, pkSoft, pkCatalog, pkNamespace}
	// sweepCheckActions: a sweep batch checks each owner again (its claim,
	// entry, soft-deleted records, and its catalog's and namespace's hold).
	sweepCheckActions = []string{"GetItem", "Query"}
	sweepCheckKeys    = []string{pkClaim, pkTable, pkSoft, pkCatalog, pkNamespace}
)

// storageSweep is the storage sweep in AWS (SPEC §3): the inventory
// bucket that receives the reports and holds the sweep's working files,
// the daily inventory of the bucket the stack makes (a brought bucket's is
// the operator's: docs/operations.md), the routes that start a sweep, and
// what the functions that start, plan and check one may touch.
func (s *Stack) storageSweep(st awscdk.Stack) {
	s.Inventory = awss3.NewBucket(st, jsii.String("Inventory"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		// S3 managed: S3 Inventory writes to an SSE-KMS destination only
		// with a key policy for it, and a report holds no object's data.
		Encryption:    awss3.BucketEncryption_S3_MANAGED,
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
		LifecycleRules: &[]*awss3.LifecycleRule{
			// A sweep refuses a report older than 48 hours; a few more
			// days leave them to read back.
			{Id: jsii.String("reports"), Prefix: jsii.String(InventoryPrefix + "/"), Expiration: awscdk.Duration_Days(jsii.Number(14))},
			{Id: jsii.String("sweep-working-files"), Prefix: jsii.String(storagesweep.SpillPrefix), Expiration: awscdk.Duration_Days(jsii.Number(7))},
		},
	})
	// S3 delivers every warehouse bucket's reports (a brought bucket's
	// too, once the operator points its inventory here).
	sources := make([]string, len(s.Buckets))
	for i, b := range s.Buckets {
		sources[i] = *b.BucketArn()
	}
	s.Inventory.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("InventoryDelivery"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("s3.amazonaws.com"), nil)},
		Actions:    jsii.Strings("s3:PutObject"),
		Resources:  jsii.Strings(*s.Inventory.ArnForObjects(jsii.String(InventoryPrefix + "/*"))),
		Conditions: &map[string]any{
			"ArnLike":      map[string]any{"aws:SourceArn": sources},
			"StringEquals": map[string]any{"aws:SourceAccount": *awscdk.Aws_ACCOUNT_ID()},
		},
	}))
	if s.Warehouse != nil {
		s.Warehouse.AddInventory(&awss3.Inventory{
			InventoryId:           jsii.String(InventoryID),
			Enabled:               jsii.Bool(true),
			Destination:           &awss3.InventoryDestination{Bucket: s.Inventory, Prefix: jsii.String(InventoryPrefix)},
			Format:                awss3.InventoryFormat_CSV, // what shared/storagesweep reads
			Frequency:             awss3.InventoryFrequency_DAILY,
			IncludeObjectVersions: awss3.InventoryObjectVersion_ALL,
			OptionalFields:        jsii.Strings(InventoryFields...),
		})
	}
	for _, r := range StorageSweepRoutes {
		s.lambdaRoute(r.Path, r.Method, s.DropFn)
	}

	reports := *s.Inventory.ArnForObjects(jsii.String(InventoryPrefix + "/*"))
	working := *s.Inventory.ArnForObjects(jsii.String(storagesweep.SpillPrefix + "*"))
	// drop (the routes): reads the report's manifest.json and
	// manifest.checksum before it makes the job.
	allow(s.DropFn, actions("s3", "GetObject"), reports)
	// purge-plan: reads the report's data files, writes and reads its
	// working files (AbortMultipartUpload: the uploader's failed parts).
	allow(s.PlanFn, actions("s3", "GetObject"), reports, working)
	allow(s.PlanFn, actions("s3", "PutObject", "AbortMultipartUpload"), working)
	s.grantTable(s.PlanFn, sweepPlanActions, sweepPlanKeys)
	// delete: a sweep batch checks its owners again before it deletes.
	s.grantTable(s.DeleteFn, sweepCheckActions, sweepCheckKeys)

	awscdk.NewCfnOutput(st, jsii.String("InventoryBucket"), &awscdk.CfnOutputProps{Value: s.Inventory.BucketName(),
		Description: jsii.String(fmt.Sprintf("where S3 Inventory delivers the warehouse buckets' reports (prefix %s/) and storage sweeps keep their working files", InventoryPrefix))})
}
