// Command stateful prints one line naming the stateful resources of a
// synthesized template (make synth runs it), and whether they are those of
// infra/stateful.json, the record an upgrade keeps.
//
//	go run ./infra/stateful cdk.out/Icehold.template.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/icehold/icehold/infra"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: stateful TEMPLATE.json")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	name := filepath.Base(os.Args[1])
	name = name[:len(name)-len(".template.json")]
	res, err := infra.StatefulResources(raw, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(infra.StatefulSummary(res))
	var rec []infra.Stateful
	if b, err := os.ReadFile(filepath.Join("infra", infra.StatefulRecord)); err == nil && json.Unmarshal(b, &rec) == nil && normal(rec) != normal(res) {
		fmt.Println("  not those of infra/" + infra.StatefulRecord + " (the default synth's): with context values that is expected; otherwise go test -run TestStatefulResourcesKeepTheirIdentity ./infra/ says what an upgrade would replace")
	}
}

// normal compares records through their JSON (raw values re-encoded alike).
func normal(r []infra.Stateful) string {
	b, _ := json.Marshal(r)
	var v any
	_ = json.Unmarshal(b, &v)
	out, _ := json.Marshal(v)
	return string(out)
}
