//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package server

import "sync"

var tokensMu sync.Mutex

// lockTokens, where flock is missing, excludes only this process's other
// writers: run one writer at a time (the server or the CLI) there.
func lockTokens(string) (unlock func(), err error) {
	tokensMu.Lock()
	return tokensMu.Unlock, nil
}

// lockPath, where flock is missing, is lockTokens's process-wide mutex.
func lockPath(string) (unlock func(), err error) {
	tokensMu.Lock()
	return tokensMu.Unlock, nil
}
