package router

import (
	"testing"
	"time"
)

// A tag names everything the answer depends on, and a vended tag
// revalidates only while its credentials have long enough to live.
func TestRevalidates(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	loc := "s3://b/demo/t/metadata/00001-a.metadata.json"
	soon, later := now.Add(4*time.Minute), now.Add(50*time.Minute)
	cases := []struct {
		name, header, snapshots string
		vended                  bool
		want                    bool
	}{
		{"same version", tableTag(loc, "all", time.Time{}), "all", false, true},
		{"default mode is all", tableTag(loc, "", time.Time{}), "all", false, true},
		{"without W/", tableTag(loc, "all", time.Time{})[2:], "all", false, true},
		{"in a list", `"x", ` + tableTag(loc, "all", time.Time{}), "all", false, true},
		{"refs against all", tableTag(loc, "refs", time.Time{}), "all", false, false},
		{"another version", tableTag(loc+"x", "all", time.Time{}), "all", false, false},
		{"star", "*", "all", false, false},
		{"plain tag when credentials are due", tableTag(loc, "all", time.Time{}), "all", true, false},
		{"vended tag when none are due", tableTag(loc, "all", later), "all", false, false},
		{"vended, credentials live", tableTag(loc, "all", later), "all", true, true},
		{"vended, credentials about to expire", tableTag(loc, "all", soon), "all", true, false},
		{"vended, expiry edited", `W/"` + tableTag(loc, "all", later)[3:27] + ".99999999999999" + `"`, "all", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := revalidates(c.header, loc, c.snapshots, c.vended, now); ok != c.want {
				t.Errorf("revalidates(%s) = %v, want %v", c.header, ok, c.want)
			}
		})
	}
	if tableTag(loc, "all", later) == tableTag(loc, "all", later.Add(time.Second)) {
		t.Error("credentials of another expiry share a tag")
	}
}
