package catalog

import (
	"fmt"
	"strconv"
	"time"
)

// The storage sweep's catalog settings (SPEC §3), checked when set.
const (
	// PropOrphanWindow: how old an unreachable file must be before the
	// storage sweep deletes it (ISO-8601, default P3D, at least an hour).
	PropOrphanWindow = "storage-sweep.orphan-window"
	// PropSweepEnabled: whether a sweep runs after each inventory report
	// (default true); a sweep on demand runs either way.
	PropSweepEnabled = "storage-sweep.enabled"
	// MinOrphanWindow: a writer commits its files long before this (the
	// API's requests end within 30 s; the intents' sweep waits an hour).
	MinOrphanWindow = time.Hour
)

// OrphanWindow parses a storage-sweep.orphan-window within its bounds.
func OrphanWindow(v string) (time.Duration, error) {
	d, err := ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < MinOrphanWindow {
		return 0, fmt.Errorf("%w: %s must be at least PT1H (an engine may still be committing a younger file), not %q", ErrOutOfRange, PropOrphanWindow, v)
	}
	return d, nil
}

// checkSweepProperties refuses malformed storage sweep settings and
// stores the window in ISO-8601.
func checkSweepProperties(props map[string]string) error {
	if v, ok := props[PropOrphanWindow]; ok {
		d, err := OrphanWindow(v)
		if err != nil {
			return err
		}
		props[PropOrphanWindow] = FormatDuration(d)
	}
	if v, ok := props[PropSweepEnabled]; ok {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%w: %s must be true or false, not %q", ErrBadRequest, PropSweepEnabled, v)
		}
	}
	return nil
}
