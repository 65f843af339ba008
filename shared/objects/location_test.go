package objects_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/icehold/icehold/shared/objects"
)

func TestParseKeepsTheExactKey(t *testing.T) {
	cases := []struct {
		name, uri, bucket, key string
	}{
		{"plain", "s3://b1x/wh/t/data/f.parquet", "b1x", "wh/t/data/f.parquet"},
		{"escaped unicode", "s3://b1x/t/data/city=M%C3%BCnchen/f.parquet", "b1x", "t/data/city=M%C3%BCnchen/f.parquet"},
		{"raw unicode", "s3://b1x/t/data/city=München/f.parquet", "b1x", "t/data/city=München/f.parquet"},
		{"escaped colon", "s3://b1x/t/ts=2024-01-01+10%3A00/f", "b1x", "t/ts=2024-01-01+10%3A00/f"},
		{"plus stays plus", "s3://b1x/t/city=New+York/f", "b1x", "t/city=New+York/f"},
		{"escaped slash", "s3://b1x/t/p=a%2Fb/f", "b1x", "t/p=a%2Fb/f"},
		{"escaped percent", "s3://b1x/t/p=50%25off/f", "b1x", "t/p=50%25off/f"},
		{"space", "s3://b1x/t/p=a b/f", "b1x", "t/p=a b/f"},
		{"double slash", "s3://b1x/t//f", "b1x", "t//f"},
		{"trailing slash", "s3://b1x/t/", "b1x", "t/"},
		{"question mark and hash", "s3://b1x/t/a?b#c", "b1x", "t/a?b#c"},
		{"s3a", "s3a://b1x/t/f", "b1x", "t/f"},
		{"s3n", "s3n://b1x/t/f", "b1x", "t/f"},
		{"bucket root", "s3://b1x", "b1x", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := objects.Parse(c.uri)
			if err != nil {
				t.Fatal(err)
			}
			if l.Bucket != c.bucket || l.Key != c.key {
				t.Errorf("Parse(%q) = %q %q, want %q %q", c.uri, l.Bucket, l.Key, c.bucket, c.key)
			}
		})
	}
	for _, bad := range []string{"", "http://b1x/k", "S3://b1x/k", "s3://", "s3:///k", "s3://UPPER/k", "file:///tmp/x", "/b1x/k", "s3://b1x:80/k"} {
		if _, err := objects.Parse(bad); !errors.Is(err, objects.ErrBadURI) {
			t.Errorf("Parse(%q): %v, want ErrBadURI", bad, err)
		}
	}
}

func TestPrefixAndContains(t *testing.T) {
	cases := []struct {
		prefix, obj string
		in          bool
	}{
		{"s3://b1x/wh/t", "s3://b1x/wh/t/data/f", true},
		{"s3://b1x/wh/t/", "s3a://b1x/wh/t/data/f", true},
		{"s3a://b1x/wh/t", "s3://b1x/wh/t/m.json", true},
		{"s3://b1x/wh/t", "s3://b1x/wh/t2/data/f", false},
		{"s3://b1x/wh/t", "s3://b1x/wh/t", false},
		{"s3://b1x/wh/t", "s3://b2x/wh/t/f", false},
		{"s3://b1x", "s3://b1x/anything", true},
		{"s3://b1x/wh/M%C3%BCnchen", "s3://b1x/wh/München/f", false},
	}
	for _, c := range cases {
		p, err := objects.Prefix(c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		o, err := objects.Parse(c.obj)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Contains(o); got != c.in {
			t.Errorf("%s contains %s = %v, want %v", c.prefix, c.obj, got, c.in)
		}
	}
	for _, bad := range []string{"s3://b1x/wh//t", "s3://b1x/wh/./t", "s3://b1x/../t", "s3://b1x//"} {
		if _, err := objects.Prefix(bad); !errors.Is(err, objects.ErrBadURI) {
			t.Errorf("Prefix(%q): %v, want ErrBadURI", bad, err)
		}
	}
	if l, _ := objects.Prefix("s3://b1x/wh/t///"); l.URI() != "s3://b1x/wh/t" {
		t.Errorf("trailing slashes: %q", l.URI())
	}
}

// FuzzParse: whatever the URI, the key is the URI's own text after the
// bucket: never decoded, never a path the URI does not spell.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"s3://bkt/a/b", "s3a://bkt/x%2Fy", "s3n://bkt/M%C3%BC", "s3://bkt/a/../b", "s3://bkt//x", "s3://bkt"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		l, err := objects.Parse(uri)
		if err != nil {
			return
		}
		if !strings.HasSuffix(uri, l.Key) {
			t.Fatalf("key %q is not the URI's own text %q", l.Key, uri)
		}
		scheme, _, _ := strings.Cut(uri, "://")
		want := scheme + "://" + l.Bucket
		if l.Key != "" || strings.HasSuffix(uri, "/") {
			want += "/" + l.Key
		}
		if want != uri {
			t.Fatalf("bucket %q key %q do not spell %q", l.Bucket, l.Key, uri)
		}
		if back, err := objects.Parse(l.URI()); err != nil || back != l {
			t.Fatalf("round trip of %q: %+v %v", uri, back, err)
		}
		if p, err := objects.Prefix(uri); err == nil && p.Key != "" && !strings.HasPrefix(l.Key, p.Key) {
			t.Fatalf("prefix %q is not a prefix of the key %q", p.Key, l.Key)
		}
	})
}

// Defect: a prefix test on a path's text placed
// s3://b/evil/e/x/../../../demo/t/data/f inside evil/e/x, where a resolving
// reader (an HTTP client, a FileIO, a file system) found demo/t/data/f: a
// purge of evil's table deleted another catalog's file. A key with an
// empty, '.' or '..' segment lies in no prefix, and CheckPath names it.
func TestDotSegmentsLieInNoPrefix(t *testing.T) {
	wh, _ := objects.Prefix("s3://b1x/evil/e/x")
	root, _ := objects.Prefix("s3://b1x")
	for _, path := range []string{
		"s3://b1x/evil/e/x/../../../demo/t/data/f.parquet",
		"s3://b1x/evil/e/x/./data/f.parquet",
		"s3://b1x/evil/e/x//data/f.parquet",
		"s3://b1x/evil/e/x/data/",
		"s3://b1x/evil/e/x/%2E%2E/%2e%2E/%2e./demo/f",
		"s3://b1x/evil/e/x/a/..",
	} {
		o, err := objects.Parse(path)
		if err != nil {
			t.Fatal(err)
		}
		if wh.Contains(o) || root.Contains(o) {
			t.Errorf("%s lies in a prefix", path)
		}
		if err := objects.CheckPath(path); !errors.Is(err, objects.ErrDotSegment) || !strings.Contains(err.Error(), path) {
			t.Errorf("CheckPath(%q) = %v, want ErrDotSegment naming it", path, err)
		}
	}
	for _, path := range []string{
		"s3://b1x/evil/e/x/data/f.parquet", "s3://b1x/evil/e/x/data/..f.parquet", "s3://b1x/evil/e/x/.hidden/f",
		"s3://b1x/evil/e/x/p=%2E%2E%2E/f", "s3://b1x/evil/e/x/data/f...parquet", "file:///tmp/x/f.parquet", "s3a://b1x/evil/e/x/f",
	} {
		if err := objects.CheckPath(path); err != nil {
			t.Errorf("CheckPath(%q) = %v, want nil", path, err)
		}
	}
	for _, path := range []string{"file:///tmp/../etc/f", "hdfs://nn/a//b", "/a/./b", "relative/../f"} {
		if err := objects.CheckPath(path); !errors.Is(err, objects.ErrDotSegment) {
			t.Errorf("CheckPath(%q) = %v, want ErrDotSegment", path, err)
		}
	}
}
