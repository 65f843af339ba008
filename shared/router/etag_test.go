package router

import (
	"strings"
	"testing"
	"time"
)

// A tag names everything the answer depends on, and a vended tag
// revalidates only while its credentials have long enough to live.
func TestRevalidates(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	loc := "s3://b/demo/t/metadata/00001-a.metadata.json"
	path := tablePath("demo", []string{"db"}, "t")
	soon, later := now.Add(4*time.Minute), now.Add(50*time.Minute)
	cases := []struct {
		name, header, snapshots string
		vended, canWrite        bool
		want                    bool
	}{
		{"same version", tableTag(path, loc, "all", tagCreds{}), "all", false, false, true},
		{"default mode is all", tableTag(path, loc, "", tagCreds{}), "all", false, false, true},
		{"without W/", tableTag(path, loc, "all", tagCreds{})[2:], "all", false, false, true},
		{"in a list", `"x", ` + tableTag(path, loc, "all", tagCreds{}), "all", false, false, true},
		{"refs against all", tableTag(path, loc, "refs", tagCreds{}), "all", false, false, false},
		{"another version", tableTag(path, loc+"x", "all", tagCreds{}), "all", false, false, false},
		{"the name before a rename", tableTag(tablePath("demo", []string{"db"}, "old"), loc, "all", tagCreds{}), "all", false, false, false},
		{"star", "*", "all", false, false, false},
		{"plain tag when credentials are due", tableTag(path, loc, "all", tagCreds{}), "all", true, false, false},
		{"vended tag when none are due", tableTag(path, loc, "all", tagCreds{expires: later}), "all", false, false, false},
		{"vended, credentials live", tableTag(path, loc, "all", tagCreds{expires: later}), "all", true, false, true},
		{"vended, credentials about to expire", tableTag(path, loc, "all", tagCreds{expires: soon}), "all", true, false, false},
		{"vended, expiry edited", `W/"` + tableTag(path, loc, "all", tagCreds{expires: later})[3:27] + ".99999999999999.r" + `"`, "all", true, false, false},
		{"vended, read becomes write", strings.Replace(tableTag(path, loc, "all", tagCreds{expires: later}), `.r"`, `.w"`, 1), "all", true, true, false},
		{"vended, writer still writes", tableTag(path, loc, "all", tagCreds{expires: later, write: true}), "all", true, true, true},
		{"vended, writer may write no more", tableTag(path, loc, "all", tagCreds{expires: later, write: true}), "all", true, false, false},
		// Defect: a reader's tag kept answering 304 after it was granted
		// TABLE_WRITE, so its engine kept read-only keys until they expired.
		{"vended, reader may write now", tableTag(path, loc, "all", tagCreds{expires: later}), "all", true, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, ok := revalidates(c.header, path, loc, c.snapshots, c.vended, func() bool { return c.canWrite }, now); ok != c.want {
				t.Errorf("revalidates(%s) = %v, want %v", c.header, ok, c.want)
			}
		})
	}
	if tableTag(path, loc, "all", tagCreds{expires: later}) == tableTag(path, loc, "all", tagCreds{expires: later.Add(time.Second)}) {
		t.Error("credentials of another expiry share a tag")
	}
	if tableTag(path, loc, "all", tagCreds{expires: later}) == tableTag(path, loc, "all", tagCreds{expires: later, write: true}) {
		t.Error("reading and writing credentials share a tag")
	}
}
