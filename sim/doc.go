// Package sim is icehold's lifecycle simulation (docs/design/simulation.md, "Lifecycle
// simulation"): a seeded generator drives the local composition (router,
// store, purge pipeline, sweeps, on the embedded emulators) through random
// histories of every lifecycle operation from concurrent actors, with clock
// jumps, delivery faults, crashes and restarts, and checks after every step
// invariants derived from its own model of what each table made reachable.
// The package is its tests: go test ./sim/ (make test, make soak, make mutate).
package sim
