package router

import "testing"

// Defect: any "q=0" substring counted as a refusal (gzip;q=0.5 was refused).
func TestAcceptEncodingQValues(t *testing.T) {
	cases := []struct {
		header string
		gzip   bool
	}{
		{"gzip", true},
		{"gzip, deflate, br", true},
		{"GZIP", true},
		{"x-gzip", true},
		{"gzip;q=0.5", true},
		{"gzip; q=0.05", true},
		{"gzip;q=1.0", true},
		{"gzip;q=0", false},
		{"gzip;q=0.0", false},
		{"gzip;q=0.000", false},
		{"br, gzip;q=0", false},
		{"*", true},
		{"*;q=0.1", true},
		{"*;q=0", false},
		{"gzip;q=0, *", false},      // gzip named: its own weight decides
		{"gzip;q=0.3, *;q=0", true}, // and the wildcard does not override it
		{"identity", false},
		{"deflate, br", false},
		{"", false},
		{"gzip;q=abc", false},
		{"gzip;q=2", false},
	}
	for _, c := range cases {
		t.Run(c.header, func(t *testing.T) {
			if got := acceptsGzip(c.header); got != c.gzip {
				t.Errorf("acceptsGzip(%q) = %v, want %v", c.header, got, c.gzip)
			}
		})
	}
}
