package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// createAppendScan creates examples.events unless it exists, appends three
// rows and reads the table back.
func createAppendScan(ctx context.Context, cat catalog.Catalog) error {
	err := cat.CreateNamespace(ctx, table.Identifier{"examples"}, nil)
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return err
	}
	ident := table.Identifier{"examples", "events"}
	tbl, err := cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		tbl, err = cat.CreateTable(ctx, ident, iceberg.NewSchema(0,
			iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
			iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String}))
	}
	if err != nil {
		return err
	}

	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		return err
	}
	rows, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{`[
		{"id": 1, "name": "ada"}, {"id": 2, "name": "grace"}, {"id": 3, "name": "edsger"}]`})
	if err != nil {
		return err
	}
	defer rows.Release()
	if tbl, err = tbl.AppendTable(ctx, rows, 1000, nil); err != nil {
		return err
	}

	all, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		return err
	}
	defer all.Release()
	fmt.Printf("%s: appended %d rows, %d in the table (%s)\n",
		strings.Join(ident, "."), rows.NumRows(), all.NumRows(), tbl.MetadataLocation())
	return nil
}
