package bench

import "fmt"

// previous: SPEC §8's figures from the run this branch started from,
// printed beside today's. Commit 8647734's `make bench`, run on this
// machine (2 cores, shared) right before the run recorded in
// docs/design/tests.md. Its drop benchmark failed before measuring (a second
// register of one metadata file is a 409 since the ownership index). The
// issue quoted 133,000 files/s for icehold and 360,000 for the 250-key loop
// from a quieter run of the same code.
var previous = struct {
	commit                           string
	purgeRate, loopRate, perFileRate float64 // in-process, files/s
	purgeReq                         float64 // icehold's S3 requests per file
	rssSmall, rssLarge               float64 // the delete function's peak RSS, MiB
}{
	commit:    "8647734",
	purgeRate: 71022, purgeReq: 0.00126, loopRate: 144153, perFileRate: 6850,
	rssSmall: 67.7, rssLarge: 83.4,
}

func prevMiB(v float64) string { return fmt.Sprintf("%.1f MiB", v) }
