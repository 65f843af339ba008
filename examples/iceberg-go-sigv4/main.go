// Command iceberg-go-sigv4 connects iceberg-go to a deployed icehold stack,
// signing with SigV4 (the AWS credential chain; API Gateway checks the
// signature, service execute-api), and lists the catalog's namespaces:
//
//	ICEHOLD_URL=<the stack's CatalogUri output> ICEHOLD_CATALOG=<catalog> go run ./examples/iceberg-go-sigv4
//
// The local server checks SigV4 as API Gateway does, with keys of local
// IAM users (make test runs it so, e2e TestSigV4Example):
//
//	eval "$(go run ./cmd/icehold local iam add-user alice)"
//	ICEHOLD_URL=http://127.0.0.1:8181 ICEHOLD_CATALOG=demo go run ./examples/iceberg-go-sigv4
package main

// snippet begin
import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// files: without it the first write fails
)

func main() {
	ctx := context.Background()
	cat, err := rest.NewCatalog(ctx, "icehold", os.Getenv("ICEHOLD_URL"),
		rest.WithSigV4(), // AWS credentials from the environment, service execute-api
		rest.WithWarehouseLocation(os.Getenv("ICEHOLD_CATALOG")))
	if err != nil {
		log.Fatal(err)
	}
	namespaces, err := cat.ListNamespaces(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(namespaces)
}

// snippet end
