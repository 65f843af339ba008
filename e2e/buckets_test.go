package e2e

import (
	"strings"
	"testing"
)

// Defect: a catalog whose warehouse lay in a bucket the deployment does not
// cover was accepted, and then no role could read, write or delete there.
// The create is now a 400 naming the covered buckets, and nothing is made;
// locally the covered bucket is the local server's.
func TestCatalogOutsideTheCoveredBucketsIsRefused(t *testing.T) {
	srv := localOnly(t)
	name := uniq("elsewhere")
	st, body := call(t, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": name, "warehouse": "s3://not-" + srv.Info.Bucket + "/" + name})
	if st != 400 {
		t.Fatalf("create with a warehouse in another bucket: %d %s, want 400", st, body)
	}
	if _, _, msg := errorModel(t, body); !strings.Contains(msg, srv.Info.Bucket) {
		t.Errorf("the 400 does not name the covered bucket %s: %s", srv.Info.Bucket, msg)
	}
	mustCall(t, 404, "GET", "/lifecycle/v1/catalogs/"+name, shared.Token, nil)
	mustCall(t, 201, "POST", "/lifecycle/v1/catalogs", shared.Token, map[string]any{"name": name, "warehouse": "s3://" + srv.Info.Bucket + "/" + name})
}
