package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFileName is the file in the state folder whose lock a running server
// holds for its whole life.
const LockFileName = "server.lock"

// ErrStateInUse: another running server holds the state folder. Two servers
// on one folder would append to one DynamoDB journal and serve two views of
// it, and the second would overwrite the first's local.json.
var ErrStateInUse = errors.New("state folder in use")

// InUseError names the server that holds a state folder.
type InUseError struct {
	Dir string
	// PID and URL are the holder's, as far as they are known: the pid from
	// the lock file, the URL from local.json when that file is the holder's
	// (a holder still starting has not written it yet).
	PID int
	URL string
}

func (e *InUseError) Error() string {
	who := "another icehold local"
	if e.PID > 0 {
		who += fmt.Sprintf(" (pid %d", e.PID)
		if e.URL != "" {
			who += ", " + e.URL
		} else {
			who += ", still starting"
		}
		who += ")"
	}
	return fmt.Sprintf("%s: %s is serving it; stop that server first, or give this one another --dir", e.Dir, who)
}

func (e *InUseError) Unwrap() error { return ErrStateInUse }

// lockState takes the state folder's lock without waiting: nil error and an
// unlock function, or an *InUseError when another server holds it. The lock
// file holds the holder's pid, so the refusal can name it.
func lockState(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	held, err := tryLockFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !held {
		f.Close()
		return nil, holderOf(dir)
	}
	// The pid goes into the file only now, under the lock: a stale pid from
	// a server killed with -9 is overwritten, never believed.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		unlockFile(f)
		f.Close()
	}, nil
}

// holderOf reads who holds dir's lock, for the refusal's message.
func holderOf(dir string) *InUseError {
	e := &InUseError{Dir: dir}
	if raw, err := os.ReadFile(filepath.Join(dir, LockFileName)); err == nil {
		e.PID, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
	}
	var info Info
	if raw, err := os.ReadFile(filepath.Join(dir, "local.json")); err == nil && json.Unmarshal(raw, &info) == nil {
		if e.PID == 0 || info.ProcessID == e.PID {
			e.PID, e.URL = info.ProcessID, info.RESTURL
		}
	}
	return e
}
