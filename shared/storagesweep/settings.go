package storagesweep

import (
	"fmt"
	"strconv"
	"time"

	"github.com/icehold/icehold/shared/catalog"
)

// The catalog settings a sweep reads (SPEC §3). The orphan window's
// bounds are checked when it is set (catalog.PropOrphanWindow); the
// version window is the storage setting every delete path shares.
const (
	// PropVersionWindow: how long noncurrent versions under a live table
	// are kept for repair (ISO-8601; default P7D).
	PropVersionWindow    = "storage.version-window"
	DefaultVersionWindow = 7 * 24 * time.Hour
	DefaultOrphanWindow  = 3 * 24 * time.Hour
)

// Windows are a catalog's orphan and version windows.
func Windows(props map[string]string) (orphan, version time.Duration, err error) {
	orphan, version = DefaultOrphanWindow, DefaultVersionWindow
	if v, ok := props[catalog.PropOrphanWindow]; ok {
		if orphan, err = catalog.OrphanWindow(v); err != nil {
			return 0, 0, fmt.Errorf("catalog setting %s: %w", catalog.PropOrphanWindow, err)
		}
	}
	if v, ok := props[PropVersionWindow]; ok {
		if version, err = catalog.ParseDuration(v); err != nil {
			return 0, 0, fmt.Errorf("catalog setting %s: %w", PropVersionWindow, err)
		}
	}
	return orphan, version, nil
}

// Enabled says whether a catalog is swept after each report
// (storage-sweep.enabled, default true); a sweep on demand runs either way.
func Enabled(props map[string]string) bool {
	on, err := strconv.ParseBool(props[catalog.PropSweepEnabled])
	return err != nil || on
}
