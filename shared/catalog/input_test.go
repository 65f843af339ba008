package catalog

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Defect: durations wrapped time.Duration: 213504d, P30501W, 307445735m and
// 5124096h gave tiny or negative holds (a soft drop purged 26 s later).
func TestParseDurationBounds(t *testing.T) {
	day := 24 * time.Hour
	ok := []struct {
		in   string
		want time.Duration
	}{
		{"7d", 7 * day},
		{"12h", 12 * time.Hour},
		{"30m", 30 * time.Minute},
		{"P7D", 7 * day},
		{"PT12H", 12 * time.Hour},
		{"P1DT6H", 30 * time.Hour},
		{"P2W", 14 * day},
		{"PT90S", 90 * time.Second},
		{"P0D", 0},
		{"36500d", 36500 * day},
		{"P36500D", 36500 * day},
		{"P5214W", 5214 * 7 * day},
		{"PT876000H", 36500 * day},
		{"0000000000000000000000007d", 7 * day},
	}
	for _, c := range ok {
		t.Run(c.in, func(t *testing.T) {
			d, err := ParseDuration(c.in)
			if err != nil || d != c.want {
				t.Fatalf("ParseDuration(%q) = %v, %v; want %v", c.in, d, err, c.want)
			}
		})
	}
	tooLong := []string{
		"213504d", "P30501W", "307445735m", "5124096h", // the reported ones
		"36501d", "P36501D", "P5215W", "PT876001H", "P36500DT1S", "P5214WT2000000H",
		"52560001m", "PT3153600001S",
		"99999999999999999999d", "P99999999999999999999D", "PT9223372036854775808S",
		"P1W99999999999999999D",
	}
	for _, in := range tooLong {
		t.Run(in, func(t *testing.T) {
			d, err := ParseDuration(in)
			if err == nil {
				t.Fatalf("ParseDuration(%q) = %v, want an out-of-range error", in, d)
			}
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "100 years") {
				t.Fatalf("ParseDuration(%q): %v; want a 400 naming the bound (100 years)", in, err)
			}
		})
	}
	for _, in := range []string{"", "7", "d", "-1d", "+1d", "7 days", "P", "PT", "P1DT", "1.5d", "P1.5D", "7D", "7s", "P1Y", "P1M", "\u0667d"} {
		t.Run("malformed "+in, func(t *testing.T) {
			if d, err := ParseDuration(in); err == nil || !errors.Is(err, ErrBadRequest) {
				t.Fatalf("ParseDuration(%q) = %v, %v; want a 400", in, d, err)
			}
		})
	}
}
