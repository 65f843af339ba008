//go:build unix

package emulators

import (
	"os"
	"syscall"
)

// mapFile maps a file read-only: a start reads only the pages it touches.
// The mapping is never undone (items decoded from it point into it); the
// file is only ever replaced by a rename, never written in place, so what
// is mapped does not change.
func mapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		return []byte{}, nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return os.ReadFile(path)
	}
	return b, nil
}
