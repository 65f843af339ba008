package router

import (
	"testing"

	"github.com/icehold/icehold/shared/store"
)

// A job's times are answered as RFC 3339 with whole seconds, UTC, whatever
// precision the record keeps.
func TestJobTimesAreRFC3339Seconds(t *testing.T) {
	for _, c := range []struct{ stored, want string }{
		{"2026-12-01T22:45:03.123456789Z", "2026-12-01T22:45:03Z"},
		{"2026-12-01T22:45:03Z", "2026-12-01T22:45:03Z"},
		{"2026-12-01T23:45:03.5+01:00", "2026-12-01T22:45:03Z"},
		{"", ""},
	} {
		v := viewOf(store.Job{ID: "j", CreatedAt: c.stored, UpdatedAt: c.stored})
		if v.CreatedAt != c.want || v.UpdatedAt != c.want {
			t.Errorf("stored %q: answered created-at %q, updated-at %q, want %q", c.stored, v.CreatedAt, v.UpdatedAt, c.want)
		}
	}
}
