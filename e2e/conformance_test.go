package e2e

import (
	"testing"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/catalogtest"
)

// iceberg-go's own catalog conformance suite, through its REST client.
func TestIcebergGoConformance(t *testing.T) {
	catalogtest.RunCatalogTests(t, catalogtest.Config{
		NewCatalog:                  func(t *testing.T) catalog.Catalog { return client(t, shared.Token) },
		SupportsNamespaceProperties: true,
	})
}
