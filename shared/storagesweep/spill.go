package storagesweep

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Working files. The sweep never holds a report, or the reachable files of
// every table, in memory: each step writes what it read into one working
// file cut into Sections by a hash of the object key, and a join step later
// reads the same few sections of every working file (ranged GETs). All the
// versions of a key, and the key's reachability, meet in one section, so a
// join step holds only its sections: memory is bounded by the section
// range it takes, not by the report or the table.

// Sections is how many parts a working file is cut into.
const Sections = 4096

// sectionOf is the section of an object key, and hashOf its 64-bit hash.
func sectionOf(h uint64) int { return int(h >> 52) }

func hashOf(key string) uint64 {
	f := fnv.New64a()
	_, _ = io.WriteString(f, key)
	return f.Sum64()
}

// spillBudget is how many bytes of rows or hashes a step gathers before it
// writes them out as one working file.
const spillBudget = 64 << 20

// spill gathers rows or hashes by section and writes them out as working
// files once the budget is reached (and at the end of the step).
type spill struct {
	rows   [Sections][]Row
	hashes [Sections][]uint64
	bytes  int
	// write stores one working file: its body and its sections' offsets.
	write func(body []byte, offsets []int64, hashes bool) error
}

func (s *spill) addRow(r Row, h uint64) error {
	sec := sectionOf(h)
	s.rows[sec] = append(s.rows[sec], r)
	s.bytes += len(r.Key) + len(r.Version) + 64
	return s.maybeFlush()
}

func (s *spill) addHash(h uint64) error {
	sec := sectionOf(h)
	s.hashes[sec] = append(s.hashes[sec], h)
	s.bytes += 8
	return s.maybeFlush()
}

func (s *spill) maybeFlush() error {
	if s.bytes < spillBudget {
		return nil
	}
	return s.flush()
}

// flush writes what is gathered: sections of rows sorted by key (newest
// version first) and front-coded, or of sorted hashes.
func (s *spill) flush() error {
	if s.bytes == 0 {
		return nil
	}
	var body []byte
	offsets := make([]int64, Sections+1)
	hashes := false
	for sec := range Sections {
		offsets[sec] = int64(len(body))
		if hs := s.hashes[sec]; len(hs) > 0 {
			hashes = true
			slices.Sort(hs)
			for _, h := range hs {
				body = binary.LittleEndian.AppendUint64(body, h)
			}
		}
		if rows := s.rows[sec]; len(rows) > 0 {
			sortRows(rows)
			body = appendRows(body, rows)
		}
		s.rows[sec], s.hashes[sec] = nil, nil
	}
	offsets[Sections] = int64(len(body))
	s.bytes = 0
	return s.write(body, offsets, hashes)
}

// sortRows orders rows by key, then newest first (the latest version
// before the ones it replaced).
func sortRows(rows []Row) {
	slices.SortFunc(rows, func(a, b Row) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if a.Latest != b.Latest {
			if a.Latest {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.Modified, a.Modified); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
}

// Row flags in a working file.
const (
	flagLatest = 1 << iota
	flagMarker
)

// appendRows front-codes sorted rows (each key as the length it shares
// with the one before and the rest).
func appendRows(b []byte, rows []Row) []byte {
	prev := ""
	for _, r := range rows {
		n := 0
		for n < len(prev) && n < len(r.Key) && prev[n] == r.Key[n] {
			n++
		}
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(len(r.Key)-n))
		b = append(b, r.Key[n:]...)
		b = binary.AppendUvarint(b, uint64(len(r.Version)))
		b = append(b, r.Version...)
		var f byte
		if r.Latest {
			f |= flagLatest
		}
		if r.Marker {
			f |= flagMarker
		}
		b = append(b, f)
		b = binary.AppendUvarint(b, uint64(r.Size))
		b = binary.AppendVarint(b, r.Modified)
		prev = r.Key
	}
	return b
}

var errCorrupt = errors.New("working file corrupt")

// decodeRows reads one section's rows.
func decodeRows(b []byte, out []Row) ([]Row, error) {
	prev := ""
	for len(b) > 0 {
		var r Row
		shared, n := binary.Uvarint(b)
		if n <= 0 || int(shared) > len(prev) {
			return out, errCorrupt
		}
		b = b[n:]
		rest, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < rest {
			return out, errCorrupt
		}
		b = b[n:]
		r.Key = prev[:shared] + string(b[:rest])
		b = b[rest:]
		vl, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < vl+1 {
			return out, errCorrupt
		}
		b = b[n:]
		r.Version = string(b[:vl])
		b = b[vl:]
		r.Latest, r.Marker = b[0]&flagLatest != 0, b[0]&flagMarker != 0
		b = b[1:]
		size, n := binary.Uvarint(b)
		if n <= 0 {
			return out, errCorrupt
		}
		b = b[n:]
		mod, n := binary.Varint(b)
		if n <= 0 {
			return out, errCorrupt
		}
		b = b[n:]
		r.Size, r.Modified = int64(size), mod
		out = append(out, r)
		prev = r.Key
	}
	return out, nil
}

// encodeOffsets and decodeOffsets keep a working file's section offsets
// as uvarint lengths (a few KB per file).
func encodeOffsets(off []int64) []byte {
	var b []byte
	for i := 1; i < len(off); i++ {
		b = binary.AppendUvarint(b, uint64(off[i]-off[i-1]))
	}
	return b
}

func decodeOffsets(b []byte) ([]int64, error) {
	off := make([]int64, 1, Sections+1)
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errCorrupt
		}
		b = b[k:]
		off = append(off, off[len(off)-1]+int64(n))
	}
	if len(off) != Sections+1 {
		return nil, errCorrupt
	}
	return off, nil
}

// readRange reads bytes [from, to) of a working file (one ranged GET).
func readRange(ctx context.Context, c S3, bucket, key string, from, to int64) ([]byte, error) {
	if to <= from {
		return nil, nil
	}
	out, err := c.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Range: aws.String(fmt.Sprintf("bytes=%d-%d", from, to-1)),
	})
	if err != nil {
		return nil, fmt.Errorf("read working file %s: %w", key, err)
	}
	defer out.Body.Close()
	b := make([]byte, 0, to-from)
	buf := make([]byte, 64<<10)
	for {
		n, err := out.Body.Read(buf)
		b = append(b, buf[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read working file %s: %w", key, err)
		}
	}
	if int64(len(b)) != to-from {
		return nil, fmt.Errorf("read working file %s: %d bytes, want %d", key, len(b), to-from)
	}
	return b, nil
}
