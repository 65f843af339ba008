// Package catalog is the Iceberg catalog: catalogs, namespaces and tables on
// the record store, table metadata read, changed and written with iceberg-go.
package catalog

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Domain errors; the router maps them to REST status codes in one place.
var (
	ErrBadRequest        = errors.New("bad request")
	ErrUnprocessable     = errors.New("unprocessable")
	ErrNoSuchCatalog     = errors.New("no such catalog")
	ErrNoSuchNamespace   = errors.New("no such namespace")
	ErrNoSuchTable       = errors.New("no such table")
	ErrNoSuchView        = errors.New("no such view")
	ErrCatalogExists     = errors.New("catalog already exists")
	ErrNamespaceExists   = errors.New("namespace already exists")
	ErrTableExists       = errors.New("table already exists")
	ErrViewExists        = errors.New("view already exists")
	ErrNamespaceNotEmpty = errors.New("namespace not empty")
	ErrCommitFailed      = errors.New("commit failed")
	ErrNotFound          = errors.New("not found")
	// ErrPurging: the name is held by a purge job that has not finished.
	ErrPurging = errors.New("table is being purged")
	// ErrLocationOwned: a location equals, contains or lies inside a prefix
	// another table or catalog owns.
	ErrLocationOwned = errors.New("location owned by another table or catalog")
)

// MaxNameBytes bounds one identifier level (DynamoDB keys and S3 keys stay small).
const MaxNameBytes = 255

// MaxNamespaceDepth bounds namespace nesting.
const MaxNamespaceDepth = 16

// ValidateName checks one level of an identifier.
func ValidateName(kind, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: %s name is empty", ErrBadRequest, kind)
	case s == "." || s == "..":
		return fmt.Errorf("%w: %s name %q is reserved", ErrBadRequest, kind, s)
	case len(s) > MaxNameBytes:
		return fmt.Errorf("%w: %s name is %d bytes, more than %d", ErrBadRequest, kind, len(s), MaxNameBytes)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s name is not valid UTF-8", ErrBadRequest, kind)
	case strings.ContainsRune(s, '/'):
		return fmt.Errorf("%w: %s name %q contains '/'", ErrBadRequest, kind, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %s name %q contains a control character", ErrBadRequest, kind, s)
		}
	}
	return nil
}

// ValidateNamespace checks every level of a namespace.
func ValidateNamespace(levels []string) error {
	if len(levels) == 0 {
		return fmt.Errorf("%w: namespace is empty", ErrBadRequest)
	}
	if len(levels) > MaxNamespaceDepth {
		return fmt.Errorf("%w: namespace has %d levels, more than %d", ErrBadRequest, len(levels), MaxNamespaceDepth)
	}
	for _, l := range levels {
		if err := ValidateName("namespace", l); err != nil {
			return err
		}
	}
	return nil
}

// ValidateCatalogName checks a catalog name: it is a URL prefix and a key part.
func ValidateCatalogName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("%w: catalog name must be 1 to 63 characters", ErrBadRequest)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("%w: catalog name %q may hold only letters, digits, '_' and '-'", ErrBadRequest, s)
		}
	}
	return nil
}
