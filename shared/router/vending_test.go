package router

import "testing"

// One storage credential covers every prefix a table owns: their common
// prefix, never cut inside a name.
func TestCommonPrefix(t *testing.T) {
	cases := []struct {
		name string
		locs []string
		want string
	}{
		{"one", []string{"s3://b/w/ns/t-1"}, "s3://b/w/ns/t-1"},
		{"same", []string{"s3://b/w/ns/t-1", "s3://b/w/ns/t-1"}, "s3://b/w/ns/t-1"},
		{"siblings sharing a name's start", []string{"s3://b/w/ns/moved_home", "s3://b/w/ns/moved-1"}, "s3://b/w/ns/"},
		{"one inside the other", []string{"s3://b/w/ns/t", "s3://b/w/ns/t/sub"}, "s3://b/w/ns/"},
		{"buckets", []string{"s3://b/w/t", "s3://c/w/t"}, "s3://"},
		{"none", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := commonPrefix(c.locs); got != c.want {
				t.Errorf("commonPrefix(%q) = %q, want %q", c.locs, got, c.want)
			}
		})
	}
}
