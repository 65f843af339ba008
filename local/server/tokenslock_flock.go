//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package server

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockTokens takes an exclusive flock on <dir>/tokens.json.lock.
func lockTokens(dir string) (unlock func(), err error) {
	return lockPath(filepath.Join(dir, TokensFileName+".lock"))
}

// lockPath takes an exclusive flock on a lock file. flock locks belong to
// the open file, so it excludes other goroutines of this process as well
// as other processes, and the kernel drops it when a holder dies.
func lockPath(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
