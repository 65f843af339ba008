// Package softdeleteenv builds the soft-delete service of the hold-expiry
// function from its environment.
package softdeleteenv

import (
	"context"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/softdelete"
)

// SoftDelete builds the soft-delete service of the hold-expiry function: it
// starts the purge jobs of expired records (it deletes no object itself).
func SoftDelete(ctx context.Context, e lambdaenv.Env) (*softdelete.Service, error) {
	p, err := purgeenv.Purge(ctx, e)
	if err != nil {
		return nil, err
	}
	p.S3 = nil
	return &softdelete.Service{Catalog: p.Catalog, Purge: p}, nil
}
