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

	// The api function's cold start before lean builds (issue 32), at
	// coldCommit: its binary as BenchmarkColdStart built it then (go build
	// -tags lambda.norpc, not stripped: docs/cost.md's 92.7 MiB) and as make
	// lambdas then built it for amd64 with -ldflags=-s -w added; its init
	// p50 beside an empty Go Lambda built the same way (the bench's build),
	// alternating, two runs of 31 starts each on this machine (load 19-22):
	// ratios 13.3 and 16.1, recorded as their mean.
	coldCommit                        string
	apiBinaryMiB, apiStrippedMiB      float64
	apiInitMs, emptyInitMs, initRatio float64
}{
	commit:    "8647734",
	purgeRate: 71022, purgeReq: 0.00126, loopRate: 144153, perFileRate: 6850,
	rssSmall: 67.7, rssLarge: 83.4,
	coldCommit:   "97fafb0",
	apiBinaryMiB: 92.7, apiStrippedMiB: 65.0,
	apiInitMs: 310, emptyInitMs: 21.0, initRatio: 14.7,
}

func prevMiB(v float64) string { return fmt.Sprintf("%.1f MiB", v) }
