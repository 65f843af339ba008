package server

import (
	"cmp"
	"fmt"

	"github.com/icehold/icehold/examples"
)

// ExampleCommand runs the iceberg-go example from the repository root;
// HowTo prints it with the connection in its environment.
const ExampleCommand = "go run ./examples/iceberg-go"

// HowTo is what `icehold local` prints once it serves: where everything
// listens and how to connect a client. The iceberg-go code is the example's
// quoted region itself, and e2e's tour test runs the commands printed here.
func (i Info) HowTo(dir string) string {
	return fmt.Sprintf(`icehold is running (state in %s, details in %s/local.json)

  REST catalog  %s   (catalog %q, warehouse %s)
  AWS services  %s   (every one on this port: eval "$(icehold local env)" sets AWS_ENDPOINT_URL, region, keys)
  S3            %s   (bucket %s, key %s / %s)
  DynamoDB      %s
  SQS           %s   (delete queue, DLQ: icehold local redrive)
  EventBridge   %s
  StepFunctions %s
  admin token   %s

  curl -H "Authorization: Bearer %s" '%s'

iceberg-go: create examples.events, append 3 rows, scan them (examples/iceberg-go):
  ICEHOLD_URL=%s ICEHOLD_TOKEN=%s ICEHOLD_CATALOG=%s %s
its connection, to copy:

%s
PyIceberg:
  load_catalog("icehold", uri="%s", token="%s", warehouse="%s")

Spark:
  --conf spark.sql.catalog.icehold=org.apache.iceberg.spark.SparkCatalog \
  --conf spark.sql.catalog.icehold.type=rest \
  --conf spark.sql.catalog.icehold.uri=%s \
  --conf spark.sql.catalog.icehold.token=%s \
  --conf spark.sql.catalog.icehold.warehouse=%s

The S3 endpoint and keys reach clients through /v1/config; nothing else to set.
`, dir, dir, i.RESTURL, i.Catalog, i.Warehouse, i.AWSEndpoint, i.S3Endpoint, i.Bucket, i.AccessKey, i.SecretKey, i.DynamoDB, i.SQS, cmp.Or(i.Events, "events.log in the state directory"), i.StepFns, i.AdminToken,
		i.AdminToken, i.ConfigCheck,
		i.RESTURL, i.AdminToken, i.Catalog, ExampleCommand,
		examples.IcebergGo,
		i.RESTURL, i.AdminToken, i.Catalog,
		i.RESTURL, i.AdminToken, i.Catalog)
}
