// Package routerenv builds the router's configuration from a function's
// environment: the functions behind API Gateway (api, drop, undrop,
// partition-drop).
package routerenv

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/icehold/icehold/shared/apigw"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/partitions"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/store"
)

// RouterConfig builds the router's dependencies from the environment; the
// caller is the IAM principal API Gateway authenticated. withPurge gives it
// the purge pipeline's entry (the drop and undrop functions).
func RouterConfig(ctx context.Context, e lambdaenv.Env, withPurge bool) (router.Config, error) {
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return router.Config{}, err
	}
	st := store.New(awsconfig.DynamoDB(cfg, e.Endpoints), e.Table)
	cat := catalog.New(st, objects.New(awsconfig.S3(cfg, e.Endpoints)))
	cat.SetWarehouseBuckets(e.WarehouseBuckets)
	az := authz.New(st, e.Admins)
	cat.SetAuthorizer(az)
	rc := router.Config{
		Catalog:        cat,
		Authz:          az,
		Authenticate:   apigw.Principal,
		ClientDefaults: e.ClientDefaults,
		DefaultCatalog: e.DefaultCatalog,
	}
	if e.VendingRole != "" {
		rc.Vendor = &credentials.Vendor{STS: sts.NewFromConfig(cfg), RoleARN: e.VendingRole, Region: cfg.Region}
	}
	if withPurge {
		rc.Purge = purgeenv.Service(cfg, e, st, cat)
		rc.Purge.S3 = nil // the drop and undrop functions never delete objects
	}
	rc.SoftDelete = &softdelete.Service{Catalog: cat, Purge: rc.Purge}
	return rc, nil
}

// PartitionRouterConfig is RouterConfig for the partition-drop function: the
// router with the partitions service (it reads manifests and writes new
// ones, never deletes an object).
func PartitionRouterConfig(ctx context.Context, e lambdaenv.Env) (router.Config, error) {
	rc, err := RouterConfig(ctx, e, false)
	if err != nil {
		return rc, err
	}
	cfg, err := awsconfig.Load(ctx, e.Endpoints)
	if err != nil {
		return rc, err
	}
	// Storage: verify's files check lists the table's prefixes; repair
	// copies prior versions back (the function's role: infra/access.go).
	rc.Partitions = &partitions.Service{Catalog: rc.Catalog, IOProps: e.IOProps, Storage: awsconfig.S3(cfg, e.Endpoints)}
	return rc, nil
}
