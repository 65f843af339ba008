// Command partitioned creates examples.clicks, partitioned by day(ts), and
// writes 3 rows on each of the last 10 days (UTC, today included): a table
// to try partition drop and retention on. -scan only prints the rows per
// day. Against make run, after eval "$(icehold local env)":
//
//	go run ./examples/partitioned
//	icehold partitions drop examples.clicks --partition ts_day=$(date -u +%Y-%m-%d)
//	icehold retention set examples.clicks --field ts_day --keep 7d
//	icehold local run retention
//	go run ./examples/partitioned -scan
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/rest"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// files
	"github.com/apache/iceberg-go/table"
)

const days, perDay = 10, 3

var (
	ident  = table.Identifier{"examples", "clicks"}
	schema = iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "user_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 3, Name: "page", Type: iceberg.PrimitiveTypes.String})
	// One partition per day of ts, named ts_day (what partition drop and
	// retention name).
	spec = iceberg.NewPartitionSpec(
		iceberg.PartitionField{SourceIDs: []int{2}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}})
)

func main() {
	scanOnly := flag.Bool("scan", false, "only print the rows per day")
	flag.Parse()
	ctx := context.Background()
	cat, err := rest.NewCatalog(ctx, "icehold", os.Getenv("ICEHOLD_URL"),
		rest.WithOAuthToken(os.Getenv("ICEHOLD_TOKEN")), rest.WithWarehouseLocation(os.Getenv("ICEHOLD_CATALOG")))
	if err != nil {
		log.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if !*scanOnly {
		tbl, err = createAndWrite(ctx, cat)
	}
	if err != nil {
		log.Fatal(err)
	}
	if err := printDays(ctx, tbl); err != nil {
		log.Fatal(err)
	}
}

// createAndWrite creates the table and appends perDay rows on each of the
// last days, in one commit (one data file per day).
func createAndWrite(ctx context.Context, cat catalog.Catalog) (*table.Table, error) {
	err := cat.CreateNamespace(ctx, table.Identifier{"examples"}, nil)
	if err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, err
	}
	tbl, err := cat.CreateTable(ctx, ident, schema, catalog.WithPartitionSpec(&spec))
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return nil, fmt.Errorf("%s exists: drop it first (icehold tables drop %s --purge), or print it with -scan", strings.Join(ident, "."), strings.Join(ident, "."))
	}
	if err != nil {
		return nil, err
	}
	sc, err := table.SchemaToArrowSchema(tbl.Schema(), nil, false, false)
	if err != nil {
		return nil, err
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	var rows []string
	for d := range days {
		for i := range perDay {
			ts := today.AddDate(0, 0, -d).Add(time.Duration(i) * time.Hour)
			rows = append(rows, fmt.Sprintf(`{"user_id": %d, "ts": %q, "page": "/p/%d"}`, d*perDay+i, ts.Format(time.RFC3339), i))
		}
	}
	data, err := array.TableFromJSON(memory.DefaultAllocator, sc, []string{"[" + strings.Join(rows, ",") + "]"})
	if err != nil {
		return nil, err
	}
	defer data.Release()
	return tbl.AppendTable(ctx, data, 1000, nil)
}

// printDays prints the table's rows per day, oldest first.
func printDays(ctx context.Context, tbl *table.Table) error {
	all, err := tbl.Scan(table.WithSelectedFields("ts")).ToArrowTable(ctx)
	if err != nil {
		return err
	}
	defer all.Release()
	perDay := map[string]int{}
	for _, chunk := range all.Column(0).Data().Chunks() {
		ts := chunk.(*array.Timestamp)
		for i := range ts.Len() {
			perDay[ts.Value(i).ToTime(arrow.Microsecond).UTC().Format(time.DateOnly)]++
		}
	}
	fmt.Printf("%s: %d rows in %d day partitions (ts_day)\n", strings.Join(ident, "."), all.NumRows(), len(perDay))
	keys := make([]string, 0, len(perDay))
	for k := range perDay {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Printf("  ts_day=%s  %d rows\n", k, perDay[k])
	}
	return nil
}
