package emulators

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Request bodies as S3 takes them: aws-chunked framing decoded, and the
// content checked at its end against every digest the request states
// (x-amz-content-sha256, Content-MD5, x-amz-checksum-*, a trailing
// checksum). A mismatch is a read error, so nothing is stored.

var (
	errSHA256Mismatch = s3Err(http.StatusBadRequest, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.")
	errBadSHA256      = s3Err(http.StatusBadRequest, "InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.")
	errBadDigest      = s3Err(http.StatusBadRequest, "BadDigest", "The Content-MD5 you specified did not match what we received.")
	errInvalidDigest  = s3Err(http.StatusBadRequest, "InvalidDigest", "The Content-MD5 you specified is not valid.")
	errIncompleteBody = s3Err(http.StatusBadRequest, "IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header.")
	errMissingLength  = s3Err(http.StatusLengthRequired, "MissingContentLength", "You must provide the Content-Length HTTP header.")
	errBadChunk       = s3Err(http.StatusBadRequest, "InvalidChunkSizeError", "Only the last chunk is allowed to have a size less than 8192 bytes")
	errBadChecksum    = s3Err(http.StatusBadRequest, "InvalidRequest", "Value for x-amz-checksum header is invalid.")
)

// checksums are the x-amz-checksum-* algorithms.
var checksums = map[string]func() hash.Hash{
	"crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"crc64nvme": func() hash.Hash { return crc64.New(crc64.MakeTable(0x9a6c9329ac4bc9b5)) },
	"sha1":      sha1.New,
	"sha256":    sha256.New,
}

func checksumMismatch(alg string) *S3Error {
	return s3Err(http.StatusBadRequest, "BadDigest", "The "+strings.ToUpper(alg)+" you specified did not match the calculated checksum.")
}

// verifying fails the read that reaches EOF when the bytes read do not
// hash to want.
type verifying struct {
	r    io.Reader
	h    hash.Hash
	want []byte
	fail error
}

func (v *verifying) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF && !bytes.Equal(v.h.Sum(nil), v.want) {
		return n, v.fail
	}
	return n, err
}

// payload is the request's content, to be read to its end (only then is
// it verified).
func payload(r *http.Request) (io.Reader, error) {
	var body io.Reader = r.Body
	if r.Body == nil {
		body = http.NoBody
	}
	body = incomplete{body}
	sha := r.Header.Get("X-Amz-Content-Sha256")
	switch {
	case sha == "" || sha == "UNSIGNED-PAYLOAD":
	case strings.HasPrefix(sha, "STREAMING-"):
		want, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
		if err != nil || want < 0 {
			return nil, errMissingLength
		}
		c := &chunked{br: bufio.NewReader(body), want: want}
		if name := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Amz-Trailer"))); name != "" {
			alg, ok := strings.CutPrefix(name, "x-amz-checksum-")
			newHash := checksums[alg]
			if !ok || newHash == nil {
				return nil, errBadChecksum
			}
			c.trailer, c.alg, c.h = name, alg, newHash()
		}
		body = c
	default:
		want, err := hex.DecodeString(sha)
		if err != nil || len(want) != sha256.Size {
			return nil, errBadSHA256
		}
		body = &verifying{r: body, h: sha256.New(), want: want, fail: errSHA256Mismatch}
	}
	if m := r.Header.Get("Content-Md5"); m != "" {
		want, err := base64.StdEncoding.DecodeString(m)
		if err != nil || len(want) != md5.Size {
			return nil, errInvalidDigest
		}
		body = &verifying{r: body, h: md5.New(), want: want, fail: errBadDigest}
	}
	for alg, newHash := range checksums {
		v := r.Header.Get("X-Amz-Checksum-" + alg)
		if v == "" {
			continue
		}
		want, err := base64.StdEncoding.DecodeString(v)
		h := newHash()
		if err != nil || len(want) != h.Size() {
			return nil, errBadChecksum
		}
		body = &verifying{r: body, h: h, want: want, fail: checksumMismatch(alg)}
	}
	return body, nil
}

// incomplete reports a body cut short of its Content-Length as S3 does.
type incomplete struct{ r io.Reader }

func (i incomplete) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = errIncompleteBody
	}
	return n, err
}

// readBody reads a request's whole (small) body, verified.
func readBody(r *http.Request) ([]byte, error) {
	body, err := payload(r)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(body, 16<<20))
}

// chunked decodes aws-chunked content: "<hex size>[;chunk-signature=...]\r\n
// <data>\r\n" chunks, a zero-size last chunk, trailer lines, "\r\n" (chunk
// signatures are not checked; the trailing checksum is).
type chunked struct {
	br           *bufio.Reader
	left         int64 // bytes left in the current chunk
	total, want  int64
	done         bool
	trailer, alg string
	h            hash.Hash
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.done {
		return 0, io.EOF
	}
	if c.left == 0 {
		if err := c.header(); err != nil {
			return 0, err
		}
		if c.done {
			return 0, io.EOF
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	c.total += int64(n)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	if err == io.EOF {
		return n, errIncompleteBody
	}
	if err != nil {
		return n, err
	}
	if c.left == 0 {
		if crlf, err := c.line(); err != nil || crlf != "" {
			return n, errIncompleteBody
		}
	}
	return n, nil
}

func (c *chunked) line() (string, error) {
	s, err := c.br.ReadString('\n')
	if err != nil {
		return "", errIncompleteBody
	}
	return strings.TrimRight(s, "\r\n"), nil
}

// header reads a chunk's header; at the last chunk, the trailer.
func (c *chunked) header() error {
	h, err := c.line()
	if err != nil {
		return err
	}
	size, _, _ := strings.Cut(h, ";")
	n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
	if err != nil || n < 0 {
		return errBadChunk
	}
	if n > 0 {
		c.left = n
		return nil
	}
	var got string
	for {
		l, err := c.line()
		if err != nil {
			return err
		}
		if l == "" {
			break
		}
		name, value, _ := strings.Cut(l, ":")
		if strings.EqualFold(strings.TrimSpace(name), c.trailer) {
			got = strings.TrimSpace(value)
		}
	}
	if c.total != c.want {
		return errIncompleteBody
	}
	if c.h != nil {
		want, err := base64.StdEncoding.DecodeString(got)
		if err != nil || !bytes.Equal(want, c.h.Sum(nil)) {
			return checksumMismatch(c.alg)
		}
	}
	c.done = true
	return nil
}
