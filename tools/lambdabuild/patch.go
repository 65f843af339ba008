package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// IcebergGo is the module Patch changes.
const IcebergGo = "github.com/apache/iceberg-go"

// substraitFile is the file Patch changes, in the module.
const substraitFile = "table/substrait/substrait.go"

// Patch makes iceberg-go's table/substrait build its Substrait extension
// collection on first use instead of at package init. Every program that
// imports iceberg-go/table (all metadata handling does) otherwise parses
// Substrait's whole YAML function catalogue before main: about 200 ms and
// 32 MB on a loaded 2-core machine, in every cold start, for a registry
// only scans with row filters use (no catalog request does). The value
// built is the same; only when it is built changes. Patch fails when the
// file no longer has the code it replaces (a new iceberg-go: check whether
// the init is still eager, then update or drop the patch).
func Patch(moduleDir string) error {
	path := filepath.Join(moduleDir, substraitFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	src := string(raw)
	const eager = `var (
	collection = extensions.GetDefaultCollectionWithNoError()
	funcSetURI = "extension:apache.iceberg:functions_set"
)

func init() {
	if !collection.URILoaded(funcSetURI) {
		if err := collection.Load(funcSetURI, strings.NewReader(funcsetYAML)); err != nil {
			panic(err)
		}
	}
}
`
	const lazy = `var funcSetURI = "extension:apache.iceberg:functions_set"

// collection is built on first use (icehold's lean build: tools/lambdabuild).
var collection = sync.OnceValue(func() *extensions.Collection {
	c := extensions.GetDefaultCollectionWithNoError()
	if !c.URILoaded(funcSetURI) {
		if err := c.Load(funcSetURI, strings.NewReader(funcsetYAML)); err != nil {
			panic(err)
		}
	}
	return c
})
`
	const use, used = "NewEmptyExtensionRegistry(collection)", "NewEmptyExtensionRegistry(collection())"
	if strings.Count(src, eager) != 1 || strings.Count(src, "collection") != strings.Count(eager, "collection")+strings.Count(src, use) ||
		!strings.Contains(src, "\t\"strings\"\n") || strings.Contains(src, "\t\"sync\"\n") {
		return fmt.Errorf("%s of %s: not the eager init this patch replaces (a new iceberg-go? see tools/lambdabuild/patch.go)", substraitFile, IcebergGo)
	}
	src = strings.Replace(src, eager, lazy, 1)
	src = strings.ReplaceAll(src, use, used)
	src = strings.Replace(src, "\t\"strings\"\n", "\t\"strings\"\n\t\"sync\"\n", 1)
	return os.WriteFile(path, []byte(src), 0o644)
}
