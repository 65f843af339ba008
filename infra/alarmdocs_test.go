package infra_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// Every alarm of the stack is in docs/operations.md with what to do when
// it fires, and docs/deploy.md's cost at rest counts them all.
func TestEveryAlarmIsDocumented(t *testing.T) {
	ops, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	alarms := resources("AWS::CloudWatch::Alarm")
	for id := range alarms {
		name := unhash(id)
		// A bullet of its own: "- `Name` (what it measures): what to do".
		if !regexp.MustCompile("(?m)^- `" + regexp.QuoteMeta(name) + "` \\(").Match(ops) {
			t.Errorf("alarm %s is not documented in docs/operations.md (The dashboard and the alarms: a bullet \"- `%s` (its metric): what to do\")", name, name)
		}
	}
	deploy, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`the (\d+) alarms`).FindSubmatch(deploy)
	if m == nil {
		t.Fatal("docs/deploy.md's cost at rest does not count the alarms (\"the N alarms\")")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != len(alarms) {
		t.Errorf("docs/deploy.md counts %d alarms, the stack has %d", n, len(alarms))
	}
}
