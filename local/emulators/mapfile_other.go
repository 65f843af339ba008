//go:build !unix

package emulators

import "os"

// mapFile reads a file (elsewhere it is mapped: mapfile_unix.go).
func mapFile(path string) ([]byte, error) { return os.ReadFile(path) }
