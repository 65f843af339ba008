package sim

// template is a scenario the generator places on purpose (swarm_test.go).
type template struct {
	name string
	w    int
}

var templates []template
