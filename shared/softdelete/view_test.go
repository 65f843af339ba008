package softdelete

import (
	"testing"

	"github.com/icehold/icehold/shared/store"
)

// A soft-deleted table's times are RFC 3339 with whole seconds, UTC, as
// every time of the API (the store keeps nanoseconds, which order records).
func TestViewTimesAreRFC3339Seconds(t *testing.T) {
	v := ViewOf(store.SoftDeleted{DroppedAt: "2026-12-02T01:02:03.123456789Z", PurgeAt: "2026-12-09T01:02:03.5Z"})
	if v.DroppedAt != "2026-12-02T01:02:03Z" || v.PurgeAt != "2026-12-09T01:02:03Z" {
		t.Errorf("dropped-at %q, purge-at %q: want whole seconds", v.DroppedAt, v.PurgeAt)
	}
}
