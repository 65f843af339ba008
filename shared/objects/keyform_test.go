package objects_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/objects"
)

// engineKeys are the keys a table at loc gets for one data file and one
// manifest: from iceberg-go's own location provider, and as Java's
// S3FileIO writes them (the raw text after the bucket, cut at '?' or '#').
// ok is false when iceberg-go cannot write under loc at all.
func engineKeys(t *testing.T, loc string) (goKeys, javaKeys []string, ok bool) {
	t.Helper()
	lp, err := table.LoadLocationProvider(loc, nil)
	if err != nil {
		return nil, nil, false
	}
	for _, p := range []string{lp.NewDataLocation("f.parquet"), lp.NewMetadataLocation("m.avro")} {
		l, err := objects.Parse(p)
		if err != nil {
			return nil, nil, false
		}
		goKeys = append(goKeys, l.Key)
	}
	for _, p := range []string{loc + "/data/f.parquet", loc + "/metadata/m.avro"} {
		l, _ := objects.Parse(p)
		k, _, _ := strings.Cut(l.Key, "?")
		k, _, _ = strings.Cut(k, "#")
		javaKeys = append(javaKeys, k)
	}
	return goKeys, javaKeys, true
}

// rawOnly are the bytes net/url keeps in a path only through its RawPath
// (while nothing else in the whole path needs escaping): iceberg-go keeps
// them here but would escape them in another path, so they are refused.
const rawOnly = "!'()*[]"

// The rule StableKey applies is what the engines do: a location passes
// only when iceberg-go and S3FileIO write its objects under the same keys,
// the location's own text plus the file's name; every other location is
// refused but those with a rawOnly byte.
func TestStableKeyIsWhatTheEnginesAgreeOn(t *testing.T) {
	var chars []string
	for c := 0x20; c < 0x7f; c++ {
		chars = append(chars, string(rune(c)))
	}
	chars = append(chars, "ü", "☺", "%C3%BC", "%c3%bc", "%2F", "%25", "%41", "%2e%2e", "%", "%z1", "%4", "a%", "\t", "\x7f")
	for _, ch := range chars {
		loc := "s3://b1x/wh/t" + ch + "x"
		if ch == "/" || ch == "." {
			continue // whole segments: Prefix's rules, not key forms
		}
		t.Run(loc, func(t *testing.T) {
			goKeys, javaKeys, ok := engineKeys(t, loc)
			l, _ := objects.Parse(loc)
			want := []string{l.Key + "/data/f.parquet", l.Key + "/metadata/m.avro"}
			same := ok && strings.Join(goKeys, "|") == strings.Join(want, "|") && strings.Join(javaKeys, "|") == strings.Join(want, "|")
			err := objects.StableKey(l.Key)
			if err == nil && !same || err != nil && same && !strings.Contains(rawOnly, ch) {
				t.Errorf("StableKey(%q) = %v, but iceberg-go writes %q and S3FileIO %q (want %q)", l.Key, err, goKeys, javaKeys, want)
			}
			if err != nil && !errors.Is(err, objects.ErrAmbiguousKey) {
				t.Errorf("StableKey(%q) = %v, want ErrAmbiguousKey", l.Key, err)
			}
		})
	}
}

func TestStableKeyNamesTheCharacter(t *testing.T) {
	cases := []struct{ key, names string }{
		{"wh/n2/vü", "'ü'"},
		{"wh/a b", "' '"},
		{"wh/a#b", "'#'"},
		{"wh/a?b", "'?'"},
		{"wh/a\\b", "'\\\\'"},
		{"wh/50%off", "'%'"},
	}
	for _, c := range cases {
		t.Run(c.key, func(t *testing.T) {
			err := objects.StableKey(c.key)
			if err == nil || !strings.Contains(err.Error(), c.names) {
				t.Errorf("StableKey(%q) = %v, want an error naming %s", c.key, err, c.names)
			}
		})
	}
}

// A name escaped into a segment is a stable key, and distinct names stay
// distinct segments.
func TestEscapeSegment(t *testing.T) {
	seen := map[string]string{}
	for _, name := range []string{"vü", "v%C3%BC", "a b", "a+b", "50%off", "a#b?c", `back\slash`, "q(1)!", "plain_name-1.x~", "☺"} {
		seg := objects.EscapeSegment(name)
		if err := objects.StableKey(seg); err != nil {
			t.Errorf("EscapeSegment(%q) = %q: %v", name, seg, err)
		}
		if strings.Contains(seg, "/") {
			t.Errorf("EscapeSegment(%q) = %q holds a '/'", name, seg)
		}
		if other, dup := seen[seg]; dup {
			t.Errorf("%q and %q both escape to %q", name, other, seg)
		}
		seen[seg] = name
		goKeys, _, ok := engineKeys(t, "s3://b1x/wh/"+seg)
		if !ok || goKeys[0] != "wh/"+seg+"/data/f.parquet" {
			t.Errorf("iceberg-go writes %q under %q", goKeys, "wh/"+seg)
		}
	}
	if got := objects.EscapeSegment("vü"); got != "v%C3%BC" {
		t.Errorf("EscapeSegment(vü) = %q, want v%%C3%%BC", got)
	}
}
