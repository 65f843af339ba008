package partitions

import (
	"testing"
	"time"
)

// A partition expires when its whole range ends by the cutoff, which is
// now minus keep rounded down to the field's unit.
func TestRetentionWindow(t *testing.T) {
	now := time.Date(2026, 9, 23, 12, 30, 0, 0, time.UTC)
	day := func(s string) int64 {
		d, _ := time.Parse("2006-01-02", s)
		return d.Unix() / 86400
	}
	for _, c := range []struct {
		name    string
		unit    timeUnit
		keep    time.Duration
		cutoff  string
		expired []int64
		kept    []int64
	}{
		{"day, 7 days", unitDay, 7 * 24 * time.Hour, "2026-09-16T00:00:00Z", []int64{day("2026-09-15"), day("1970-01-01")}, []int64{day("2026-09-16"), day("2026-09-23")}},
		{"hour, 2 hours", unitHour, 2 * time.Hour, "2026-09-23T10:00:00Z", []int64{now.Unix()/3600 - 3}, []int64{now.Unix()/3600 - 2, now.Unix() / 3600}},
		{"month, 31 days", unitMonth, 31 * 24 * time.Hour, "2026-08-01T00:00:00Z", []int64{(2026-1970)*12 + 6}, []int64{(2026-1970)*12 + 7}},
		{"year, 365 days", unitYear, 365 * 24 * time.Hour, "2025-01-01T00:00:00Z", []int64{2024 - 1970}, []int64{2025 - 1970}},
		{"identity timestamp", unitMicros, time.Hour, "2026-09-23T11:30:00Z", []int64{now.Add(-time.Hour).UnixMicro() - 1}, []int64{now.Add(-time.Hour).UnixMicro()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tf := timeField{unit: c.unit}
			cut := tf.cutoff(now, c.keep)
			if got := cut.Format(time.RFC3339); got != c.cutoff {
				t.Errorf("cutoff %s, want %s", got, c.cutoff)
			}
			for _, v := range c.expired {
				if !tf.expired(v, cut) {
					t.Errorf("%d is kept, want expired", v)
				}
			}
			for _, v := range c.kept {
				if tf.expired(v, cut) {
					t.Errorf("%d expired, want kept", v)
				}
			}
			if tf.expired(nil, cut) {
				t.Errorf("the null partition expired")
			}
		})
	}
}
