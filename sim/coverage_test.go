package sim

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Coverage (docs/design/simulation.md, "Coverage"): every operation kind,
// barrier and scenario template counts how often it ran and how often it
// changed state (an operation: an accepted answer; a barrier or template:
// it did what it is there for, e.g. a sweep that ended something). The
// run prints the table across its seeds; a kind the generator knows that
// never ran, or never changed state, fails the run: a check that is never
// reached catches nothing.

type count struct{ ran, changed int }

type coverage struct {
	mu sync.Mutex
	m  map[string]*count
	// na: kinds this build cannot run (e.g. no repair route), with why.
	na map[string]string
}

var cover = &coverage{m: map[string]*count{}, na: map[string]string{}}

func (c *coverage) add(kind string, changed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.m[kind]
	if n == nil {
		n = &count{}
		c.m[kind] = n
	}
	n.ran++
	if changed {
		n.changed++
	}
}

func (c *coverage) unavailable(kind, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.na[kind] = why
}

// refusalOnly: kinds whose point is a refusal (they never change state):
// malformed bodies, and a vended session's escapes.
var refusalOnly = map[string]bool{"bad-body": true, "engine-escape": true}

// expected lists every kind the generator can make: operations, barriers,
// templates.
func expectedKinds() []string {
	var out []string
	for _, k := range opWeights {
		out = append(out, "op "+k.kind)
	}
	// Variants counted apart from their kind (a create's staged ways).
	out = append(out, "op staged-create", "op staged-create-tx")
	for _, b := range barrierWeights {
		out = append(out, "barrier "+b.kind)
	}
	for _, t := range templates {
		out = append(out, "template "+t.name)
	}
	return out
}

// table prints the coverage and returns the kinds never reached.
func (c *coverage) table(without map[string]bool) (string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	var missing []string
	fmt.Fprintf(&b, "%-34s %7s %8s\n", "kind", "ran", "changed")
	kinds := expectedKinds()
	for k := range c.m {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	for _, k := range kinds {
		n := c.m[k]
		if n == nil {
			n = &count{}
		}
		_, name, _ := strings.Cut(k, " ")
		note := ""
		switch {
		case c.na[name] != "":
			note = "n/a: " + c.na[name]
		case without[name]:
			note = "off (-sim.without)"
		case n.ran == 0:
			note, missing = "NEVER RAN", append(missing, k)
		case n.changed == 0 && !refusalOnly[name]:
			note, missing = "NEVER CHANGED STATE", append(missing, k)
		}
		fmt.Fprintf(&b, "%-34s %7d %8d  %s\n", k, n.ran, n.changed, note)
	}
	return b.String(), missing
}
