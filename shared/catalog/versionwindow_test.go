package catalog

import (
	"errors"
	"testing"
	"time"
)

// storage.version-window is bounded like every duration: at least an hour
// (repair restores from those versions), at most 100 years, P7D unset, and
// stored as ISO-8601; a bad value is a 4xx naming the setting.
func TestVersionWindow(t *testing.T) {
	cases := []struct {
		set  string // "": unset
		want time.Duration
		bad  bool
	}{
		{"", 7 * 24 * time.Hour, false},
		{"P30D", 30 * 24 * time.Hour, false},
		{"1h", time.Hour, false},
		{"PT59M", 0, true},
		{"PT0S", 0, true},
		{"P36501D", 0, true},
		{"P99999999999999999999D", 0, true},
		{"soon", 0, true},
	}
	for _, c := range cases {
		t.Run(c.set, func(t *testing.T) {
			props := map[string]string{}
			if c.set != "" {
				props[PropVersionWindow] = c.set
			}
			err := validateCatalogProperties(props)
			if c.bad {
				if err == nil || !errors.Is(err, ErrBadRequest) && !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("%q: %v, want a 4xx", c.set, err)
				}
				return
			}
			d, verr := VersionWindow(props)
			if err != nil || verr != nil || d != c.want {
				t.Fatalf("%q: %v, %v, %v; want %v", c.set, d, err, verr, c.want)
			}
		})
	}
}
