package objects

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Location is an object, or a prefix of objects, in S3: a bucket and the
// exact text of a key. Keys are never URL-decoded: Iceberg writers put
// escaped partition values in paths (city=M%C3%BCnchen), and the object's
// key is that text, not its decoded form.
type Location struct {
	Bucket string
	Key    string
}

// schemes are the URI schemes that name S3 objects (s3a and s3n are how
// Hadoop-based engines write them).
var schemes = []string{"s3://", "s3a://", "s3n://"}

// bucketName is S3's rule for (general purpose) bucket names.
var bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

// Parse splits an s3://, s3a:// or s3n:// URI into bucket and key: the key is
// every character after "bucket/", exactly as written. The key may be empty
// (a bucket root). It is the one place where icehold turns a URI into a key.
func Parse(uri string) (Location, error) {
	rest, ok := "", false
	for _, s := range schemes {
		if rest, ok = strings.CutPrefix(uri, s); ok {
			break
		}
	}
	if !ok {
		return Location{}, fmt.Errorf("%w: %q is not an s3:// URI", ErrBadURI, uri)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if !bucketName.MatchString(bucket) {
		return Location{}, fmt.Errorf("%w: %q does not name a valid bucket", ErrBadURI, uri)
	}
	return Location{Bucket: bucket, Key: key}, nil
}

// URI is the location as s3://bucket/key.
func (l Location) URI() string {
	if l.Key == "" {
		return "s3://" + l.Bucket
	}
	return "s3://" + l.Bucket + "/" + l.Key
}

// Contains reports whether obj lies under the prefix l (l's key plus "/";
// the whole bucket when l's key is empty). A prefix does not contain itself,
// and a key with an empty, "." or ".." segment lies in no prefix (CleanKey):
// its text starting with l's says nothing of where it resolves.
func (l Location) Contains(obj Location) bool {
	if obj.Bucket != l.Bucket || CleanKey(obj.Key) != nil {
		return false
	}
	if l.Key == "" {
		return obj.Key != ""
	}
	return strings.HasPrefix(obj.Key, l.Key+"/")
}

// ErrDotSegment: a path with an empty, "." or ".." segment.
var ErrDotSegment = errors.New("path has an empty, '.' or '..' segment")

// CleanKey refuses a key with an empty segment (a leading, doubled or
// trailing '/'), or a "." or ".." segment ("%2E" counts as a '.'). S3 keys
// such a key literally, but a path resolver (an HTTP client, a FileIO, a
// file system, an emulator) may resolve it to another key, and a prefix
// test on its text places it where it does not lie:
// evil/e/x/../../../demo/t/f starts with evil/e/x/ and resolves to
// demo/t/f. No table file is named so by an engine; icehold refuses such
// paths at commit and never deletes one.
func CleanKey(key string) error {
	for _, seg := range strings.Split(key, "/") {
		switch strings.ReplaceAll(strings.ReplaceAll(seg, "%2E", "."), "%2e", ".") {
		case "", ".", "..":
			return ErrDotSegment
		}
	}
	return nil
}

// CheckPath refuses a file path (any scheme: s3://bucket/key, file:///…,
// or a bare path) whose path part has an empty, "." or ".." segment; the
// error names the path.
func CheckPath(path string) error {
	p := path
	if _, rest, ok := strings.Cut(path, "://"); ok {
		_, p, _ = strings.Cut(rest, "/") // after the authority
	} else {
		p = strings.TrimPrefix(p, "/")
	}
	if err := CleanKey(p); err != nil {
		return fmt.Errorf("%w: %q", err, path)
	}
	return nil
}

// Prefix parses a location that names a prefix (a table location or a
// warehouse): trailing slashes are dropped, and a path with an empty, "." or
// ".." segment is refused, since it would name a different prefix in S3 than
// it appears to. The key may be empty (a whole bucket).
func Prefix(uri string) (Location, error) {
	l, err := Parse(uri)
	if err != nil {
		return l, err
	}
	if strings.HasPrefix(l.Key, "/") {
		return Location{}, fmt.Errorf("%w: %q has an empty path segment", ErrBadURI, uri)
	}
	l.Key = strings.TrimRight(l.Key, "/")
	if l.Key == "" {
		return l, nil
	}
	for _, seg := range strings.Split(l.Key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return Location{}, fmt.Errorf("%w: %q has an empty, '.' or '..' path segment", ErrBadURI, uri)
		}
	}
	return l, nil
}

// ErrAmbiguousKey: a location whose objects' keys would differ between
// FileIOs (SPEC §2, locations in the form their keys take).
var ErrAmbiguousKey = errors.New("object keys under this location differ between FileIOs")

// Engines do not agree on the key of a location's objects. Java's
// S3FileIO (S3URI) keys an object by the raw text after "bucket/", cut at
// the first '?' or '#'. iceberg-go builds data and manifest paths with
// net/url (url.Parse(location).JoinPath(...).String()) before its gocloud
// FileIO keys them raw, so every byte net/url escapes in a path (non-ASCII,
// space, '"', '\', '!', '(', ...) lands percent-escaped, '#' and '?' start
// a fragment or query, and a '%' that starts no %XX escape fails to parse.
// The keys agree exactly on the bytes below and on %XX escapes, which both
// keep as written.

// keySafe reports whether every FileIO writes c in a key as itself: the
// bytes net/url never escapes in a path.
func keySafe(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-_.~/$&+,:;=@", c) >= 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// StableKey checks that the objects under key get the same key whichever
// FileIO writes them: only keySafe bytes and %XX escapes. The error names
// the first character that breaks it.
func StableKey(key string) error {
	for i := 0; i < len(key); {
		c := key[i]
		switch {
		case keySafe(c):
			i++
		case c == '%' && i+2 < len(key) && isHex(key[i+1]) && isHex(key[i+2]):
			i += 3
		case c == '%':
			return fmt.Errorf("%w: a '%%' that starts no %%XX escape (iceberg-go cannot parse it; write %%25)", ErrAmbiguousKey)
		case c == '#' || c == '?':
			return fmt.Errorf("%w: %q (engines cut a key there, or escape it)", ErrAmbiguousKey, c)
		default:
			r, _ := utf8.DecodeRuneInString(key[i:])
			return fmt.Errorf("%w: %q (iceberg-go writes it percent-escaped as %s, Java's S3FileIO as is)", ErrAmbiguousKey, r, EscapeSegment(string(r)))
		}
	}
	return nil
}

// EscapeSegment percent-escapes (%XX, upper case) every byte of s that is
// not keySafe, '/' and '%' included: a name made into one path segment
// whose key every FileIO writes the same.
func EscapeSegment(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; keySafe(c) && c != '/' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
