package emulators

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// s3Blobs keeps object contents by name (a random id, never the key).
type s3Blobs interface {
	// write stores r's bytes under a new name, durably, and returns its
	// size and MD5; an error of r stores nothing.
	write(r io.Reader) (name string, size int64, md5 []byte, err error)
	open(name string) (io.ReadSeekCloser, error)
	remove(name string)
}

func newBlobName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// memBlobs keeps contents in memory.
type memBlobs struct {
	mu sync.RWMutex
	m  map[string][]byte
}

func newMemBlobs() *memBlobs { return &memBlobs{m: map[string][]byte{}} }

func (b *memBlobs) write(r io.Reader) (string, int64, []byte, error) {
	h := md5.New()
	data, err := io.ReadAll(io.TeeReader(r, h))
	if err != nil {
		return "", 0, nil, err
	}
	name := newBlobName()
	b.mu.Lock()
	b.m[name] = data
	b.mu.Unlock()
	return name, int64(len(data)), h.Sum(nil), nil
}

type readSeekNopCloser struct{ *bytes.Reader }

func (readSeekNopCloser) Close() error { return nil }

func (b *memBlobs) open(name string) (io.ReadSeekCloser, error) {
	b.mu.RLock()
	data, ok := b.m[name]
	b.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("blob %s: %w", name, fs.ErrNotExist)
	}
	return readSeekNopCloser{bytes.NewReader(data)}, nil
}

func (b *memBlobs) remove(name string) {
	b.mu.Lock()
	delete(b.m, name)
	b.mu.Unlock()
}

// diskBlobs keeps contents in files, blobs/<first two hex digits>/<name>.
type diskBlobs struct {
	dir  string
	dirs sync.Map // subdirectories known to exist
}

func (b *diskBlobs) path(name string) string { return filepath.Join(b.dir, name[:2], name) }

func (b *diskBlobs) write(r io.Reader) (string, int64, []byte, error) {
	name := newBlobName()
	sub := filepath.Join(b.dir, name[:2])
	if _, ok := b.dirs.Load(sub); !ok {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return "", 0, nil, err
		}
		b.dirs.Store(sub, true)
	}
	f, err := os.OpenFile(b.path(name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return "", 0, nil, err
	}
	h := md5.New()
	n, err := io.Copy(f, io.TeeReader(r, h))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(b.path(name))
		return "", 0, nil, err
	}
	return name, n, h.Sum(nil), nil
}

func (b *diskBlobs) open(name string) (io.ReadSeekCloser, error) { return os.Open(b.path(name)) }

func (b *diskBlobs) remove(name string) { _ = os.Remove(b.path(name)) }

// sweep removes the files no record refers to (written by a request that
// crashed before its journal line, or freed by one that crashed before
// removing them).
func (b *diskBlobs) sweep(refs map[string]bool) error {
	subs, err := os.ReadDir(b.dir)
	if err != nil {
		return err
	}
	for _, sub := range subs {
		if !sub.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(b.dir, sub.Name()))
		if err != nil {
			return err
		}
		for _, f := range files {
			if !refs[f.Name()] {
				_ = os.Remove(filepath.Join(b.dir, sub.Name(), f.Name()))
			}
		}
	}
	return nil
}

// s3Journal is the disk store's change log: one JSON record a line,
// appended under the store's lock (journal order is apply order) and
// fsynced by whoever waits first for a line not yet synced (one fsync
// serves every request appended meanwhile).
type s3Journal struct {
	path    string
	f       *os.File
	size    atomic.Int64
	synced  atomic.Int64
	syncMu  sync.Mutex
	records int // lines since the last compaction
}

// append writes records as one write; a failed write is cut off again, so
// the next line does not continue a torn one. It returns the journal's
// size after them (syncTo's argument).
func (j *s3Journal) append(recs []s3Record) (int64, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return 0, err
		}
	}
	if j.f == nil {
		return 0, errStoreClosed
	}
	size := j.size.Load()
	if _, err := j.f.Write(buf.Bytes()); err != nil {
		_ = j.f.Truncate(size)
		_, _ = j.f.Seek(size, io.SeekStart)
		return 0, err
	}
	j.records += len(recs)
	j.size.Store(size + int64(buf.Len()))
	return size + int64(buf.Len()), nil
}

// syncTo returns once the journal is fsynced up to end.
func (j *s3Journal) syncTo(end int64) error {
	if j.synced.Load() >= end {
		return nil
	}
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.synced.Load() >= end {
		return nil
	}
	target := j.size.Load()
	if j.f == nil {
		return errStoreClosed
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.synced.Store(target)
	return nil
}

func (j *s3Journal) close() error {
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// openDiskStore replays dir's journal, compacts it when most of it is
// history, and sweeps unreferenced blobs.
func openDiskStore(s *S3Store, dir string) (*S3Store, error) {
	root := filepath.Join(dir, "s3store")
	blobs := &diskBlobs{dir: filepath.Join(root, "blobs")}
	if err := os.MkdirAll(blobs.dir, 0o755); err != nil {
		return nil, err
	}
	s.blobs = blobs
	j := &s3Journal{path: filepath.Join(root, "journal")}
	if err := s.replay(j); err != nil {
		return nil, fmt.Errorf("s3 journal %s: %w", j.path, err)
	}
	f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	j.f = f
	j.synced.Store(j.size.Load())
	s.journal = j
	if j.size.Load() == 0 {
		if err := s.importGofakes3(dir); err != nil {
			return nil, fmt.Errorf("import %s: %w", filepath.Join(dir, "s3"), err)
		}
	}
	if j.records > 2*s.live()+1000 {
		if err := s.compact(); err != nil {
			return nil, err
		}
	}
	if err := blobs.sweep(s.referenced()); err != nil {
		return nil, err
	}
	return s, nil
}

// replay applies the journal. A torn last line (a crash mid-append: never
// answered; an append is one write ending in a newline) is cut off; a
// whole line that does not decode is damage: refused.
func (s *S3Store) replay(j *s3Journal) error {
	f, err := os.OpenFile(j.path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var good int64
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		var rec s3Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		s.apply(rec)
		good += int64(len(line))
		j.records++
	}
	if st, err := f.Stat(); err != nil {
		return err
	} else if st.Size() > good {
		if err := f.Truncate(good); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
	}
	j.size.Store(good)
	return nil
}

// maybeCompact rewrites the journal as the state once most of it is
// history (deleted versions, replaced null versions).
func (s *S3Store) maybeCompact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal == nil || s.journal.f == nil || !s.compactDue() {
		return
	}
	_ = s.compact() // a failed compaction leaves the journal as it was
}

// s3CompactAt is the fewest journal records a compaction rewrites (tests
// lower it).
var s3CompactAt = 100_000

// compactDue: the journal holds over s3CompactAt records, most of them
// history.
func (s *S3Store) compactDue() bool {
	return s.journal.records >= s3CompactAt && s.journal.records >= 2*s.live()
}

// compact writes the state beside the journal, fsyncs it and renames it
// over the journal (the caller holds s.mu: nothing is appended meanwhile).
func (s *S3Store) compact() error {
	j := s.journal
	j.syncMu.Lock()
	defer j.syncMu.Unlock()
	tmp := j.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	records := 0
	err = s.snapshot(func(r s3Record) error { records++; return enc.Encode(r) })
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, j.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(j.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	nf, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	st, err := nf.Stat()
	if err != nil {
		nf.Close()
		return err
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.records = nf, records
	j.size.Store(st.Size())
	j.synced.Store(st.Size())
	return nil
}

// importGofakes3 takes in, once, the objects of a state folder written by
// the gofakes3 backend this store replaced (<dir>/s3/buckets/<bucket>/<key
// as a path>), then renames that folder s3.gofakes3: a make run state
// keeps its tables.
func (s *S3Store) importGofakes3(dir string) error {
	old := filepath.Join(dir, "s3")
	buckets, err := os.ReadDir(filepath.Join(old, "buckets"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, b := range buckets {
		if !b.IsDir() {
			continue
		}
		if err := s.CreateBucket(b.Name()); err != nil && !errors.Is(err, ErrBucketOwned) {
			return err
		}
		root := filepath.Join(old, "buckets", b.Name())
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = s.PutObject(b.Name(), filepath.ToSlash(rel), f, PutOptions{Metadata: map[string]string{"Content-Type": "binary/octet-stream"}})
			return err
		})
		if err != nil {
			return err
		}
	}
	return os.Rename(old, old+".gofakes3")
}
