// Package partitionsenv builds the partitions service of the retention
// function from its environment.
package partitionsenv

import (
	"context"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/partitions"
)

// Partitions builds the partitions service of the retention function: the
// sweep drops expired partitions and expires snapshots, whose files it
// hands to the delete pipeline as jobs (it deletes no object: its purge
// service has no S3 deleter).
func Partitions(ctx context.Context, e lambdaenv.Env) (*partitions.Service, error) {
	p, err := purgeenv.Purge(ctx, e)
	if err != nil {
		return nil, err
	}
	p.S3, p.Sender = nil, nil
	return &partitions.Service{Catalog: p.Catalog, IOProps: e.IOProps, Pipeline: p}, nil
}
