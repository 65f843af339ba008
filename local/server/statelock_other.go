//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package server

import "os"

// tryLockFile, where flock is missing, always succeeds: the state folder is
// not guarded there, so run one server per folder.
func tryLockFile(*os.File) (bool, error) { return true, nil }

func unlockFile(*os.File) {}
