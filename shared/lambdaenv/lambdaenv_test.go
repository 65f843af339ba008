package lambdaenv_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/purge"
)

// The default pace is the purge pipeline's shared rate (lambdaenv imports
// no service, so it holds the value itself).
func TestDefaultDeletePaceIsThePurgeDefault(t *testing.T) {
	if lambdaenv.DefaultDeletePace != purge.DefaultKeyRate {
		t.Errorf("DefaultDeletePace %v, purge.DefaultKeyRate %v", lambdaenv.DefaultDeletePace, purge.DefaultKeyRate)
	}
}

// Each function reads the same settings whoever builds its services.
func TestFromEnvReadsTheDeleteSettings(t *testing.T) {
	for _, c := range []struct {
		pace, visibility, receives string
		want                       lambdaenv.Env
		bad                        bool
	}{
		{want: lambdaenv.Env{DeletePace: lambdaenv.DefaultDeletePace}},
		{pace: "off", visibility: "60", receives: "5", want: lambdaenv.Env{Queue: lambdaenv.Queue{URL: "q", Visibility: 60e9, MaxReceives: 5}}},
		{pace: "100", want: lambdaenv.Env{DeletePace: 100}},
		{pace: "-1", bad: true},
		{visibility: "x", bad: true},
	} {
		t.Setenv(lambdaenv.EnvTable, "t")
		t.Setenv(lambdaenv.EnvDeleteQueue, c.want.Queue.URL)
		t.Setenv(lambdaenv.EnvDeletePace, c.pace)
		t.Setenv(lambdaenv.EnvVisibility, c.visibility)
		t.Setenv(lambdaenv.EnvMaxReceives, c.receives)
		e, err := lambdaenv.FromEnv()
		if (err != nil) != c.bad {
			t.Errorf("%+v: error %v", c, err)
			continue
		}
		if !c.bad && (e.DeletePace != c.want.DeletePace || e.Queue != c.want.Queue) {
			t.Errorf("%+v: pace %v queue %+v", c, e.DeletePace, e.Queue)
		}
	}
}

// Each function's binary carries only what it runs: its main builds its
// services with the wiring package of its kind, and none links a service
// only other functions run (iceberg-go and the router are most of a binary
// and of its init). go list reads the imports the linker starts from.
func TestFunctionsLinkOnlyWhatTheyRun(t *testing.T) {
	const (
		iceberg    = "github.com/apache/iceberg-go"
		router     = "github.com/icehold/icehold/shared/router"
		partitions = "github.com/icehold/icehold/shared/partitions"
		softdelete = "github.com/icehold/icehold/shared/softdelete"
		purge      = "github.com/icehold/icehold/shared/purge"
		catalog    = "github.com/icehold/icehold/shared/catalog"
	)
	pipeline := []string{router, partitions, softdelete}
	for fn, never := range map[string][]string{
		"outbox":         {iceberg, catalog, purge, router, partitions, softdelete},
		"delete":         pipeline,
		"purge-plan":     pipeline,
		"purge-progress": pipeline,
		"reconcile":      pipeline,
		"hold-expiry":    {router, partitions},
		"retention":      {router, softdelete},
		// The router functions link what shared/router imports: the
		// services of every route (docs/design/infra.md, Lean functions).
		"api":            nil,
		"drop":           nil,
		"undrop":         nil,
		"partition-drop": nil,
	} {
		out, err := exec.Command("go", "list", "-deps", "../../functions/"+fn).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", fn, err)
		}
		deps := strings.Fields(string(out))
		for _, p := range never {
			if slices.ContainsFunc(deps, func(d string) bool { return d == p || strings.HasPrefix(d, p+"/") }) {
				t.Errorf("functions/%s links %s, which it never runs", fn, p)
			}
		}
	}
	fns, _ := filepath.Glob("../../functions/*/main.go")
	if len(fns) != 11 {
		t.Errorf("%d functions: give each new one its row above", len(fns))
	}
}
