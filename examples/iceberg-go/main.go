// Command iceberg-go connects iceberg-go to icehold with a bearer token,
// creates the table examples.events, appends three rows and scans them back
// (write.go). Against make run:
//
//	ICEHOLD_URL=http://127.0.0.1:8181 ICEHOLD_TOKEN=$(jq -r .admin_token .icehold/local.json) ICEHOLD_CATALOG=demo go run ./examples/iceberg-go
//
// The README and make run's banner show the part between the snippet
// markers; examples_test.go checks that they are this text, and e2e's tour
// test runs the program against a local server.
package main

// snippet begin
import (
	"context"
	"log"
	"os"

	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// files: without it the first write fails
)

func main() {
	ctx := context.Background()
	cat, err := rest.NewCatalog(ctx, "icehold", os.Getenv("ICEHOLD_URL"),
		rest.WithOAuthToken(os.Getenv("ICEHOLD_TOKEN")),
		rest.WithWarehouseLocation(os.Getenv("ICEHOLD_CATALOG"))) // warehouse = catalog name
	if err != nil {
		log.Fatal(err) // a wrong URL or token fails here, at /v1/config
	}
	if err := createAppendScan(ctx, cat); err != nil { // write.go
		log.Fatal(err)
	}
}

// snippet end
