package emulators

import (
	"slices"
	"strings"
)

// keyIndex is a bucket's keys in byte order: sorted chunks of at most
// chunkMax entries, so that an insert moves at most a chunk and a listing
// seeks to its first key instead of walking the bucket (gofakes3's s3mem
// walked every key on every listing: quadratic for anything that lists per
// file).
type keyIndex struct {
	chunks [][]*s3Object
	n      int
}

const chunkMax = 512

// chunkFor is the chunk a key belongs in: the first whose last key is >=
// key (the last chunk when key is past every key).
func (x *keyIndex) chunkFor(key string) int {
	i, _ := slices.BinarySearchFunc(x.chunks, key, func(c []*s3Object, k string) int {
		return strings.Compare(c[len(c)-1].key, k)
	})
	return min(i, len(x.chunks)-1)
}

func searchChunk(c []*s3Object, key string) (int, bool) {
	return slices.BinarySearchFunc(c, key, func(o *s3Object, k string) int { return strings.Compare(o.key, k) })
}

func (x *keyIndex) get(key string) *s3Object {
	if len(x.chunks) == 0 {
		return nil
	}
	c := x.chunks[x.chunkFor(key)]
	if i, ok := searchChunk(c, key); ok {
		return c[i]
	}
	return nil
}

// put inserts o (no object with its key is indexed yet).
func (x *keyIndex) put(o *s3Object) {
	x.n++
	if len(x.chunks) == 0 {
		x.chunks = [][]*s3Object{{o}}
		return
	}
	ci := x.chunkFor(o.key)
	c := x.chunks[ci]
	i, _ := searchChunk(c, o.key)
	c = slices.Insert(c, i, o)
	if len(c) <= chunkMax {
		x.chunks[ci] = c
		return
	}
	half := len(c) / 2
	left, right := slices.Clone(c[:half]), slices.Clone(c[half:])
	x.chunks[ci] = left
	x.chunks = slices.Insert(x.chunks, ci+1, right)
}

func (x *keyIndex) remove(key string) {
	if len(x.chunks) == 0 {
		return
	}
	ci := x.chunkFor(key)
	c := x.chunks[ci]
	i, ok := searchChunk(c, key)
	if !ok {
		return
	}
	x.n--
	c = slices.Delete(c, i, i+1)
	if len(c) == 0 {
		x.chunks = slices.Delete(x.chunks, ci, ci+1)
		return
	}
	x.chunks[ci] = c
}

// cursor walks the index in key order.
type cursor struct {
	x     *keyIndex
	ci, i int
}

// seek is a cursor at the first key >= key.
func (x *keyIndex) seek(key string) cursor {
	if len(x.chunks) == 0 {
		return cursor{x: x}
	}
	ci := x.chunkFor(key)
	i, _ := searchChunk(x.chunks[ci], key)
	cur := cursor{x: x, ci: ci, i: i}
	cur.settle()
	return cur
}

func (c *cursor) settle() {
	if c.ci < len(c.x.chunks) && c.i >= len(c.x.chunks[c.ci]) {
		c.ci, c.i = c.ci+1, 0
	}
}

// object is the cursor's object, nil past the end.
func (c *cursor) object() *s3Object {
	if c.ci >= len(c.x.chunks) {
		return nil
	}
	return c.x.chunks[c.ci][c.i]
}

func (c *cursor) next() {
	c.i++
	c.settle()
}

// all is every object in key order (inventories, compaction).
func (x *keyIndex) all(yield func(*s3Object) bool) {
	for _, c := range x.chunks {
		for _, o := range c {
			if !yield(o) {
				return
			}
		}
	}
}

// prefixEnd is the least string greater than every string that starts
// with p ("" when there is none: p is all 0xff bytes).
func prefixEnd(p string) string {
	b := []byte(p)
	for len(b) > 0 {
		if b[len(b)-1] < 0xff {
			b[len(b)-1]++
			return string(b)
		}
		b = b[:len(b)-1]
	}
	return ""
}
