package purge_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/purge"
)

// budgetRun runs a definition in the local engine with stand-in steps that
// report n batches (the workflow is what is under test, not the deletes):
// the plan pages through them, the waiting task is answered once "the last
// batch" is done, finalize ends at once. It returns the execution's status
// and its history's length.
func budgetRun(t *testing.T, definition string, n int) (string, int) {
	t.Helper()
	var engine *emulators.StepFunctions
	lambdas := map[string]emulators.LambdaFunc{
		"plan": func(_ context.Context, raw json.RawMessage) (json.RawMessage, error) {
			var in purge.Input
			_ = json.Unmarshal(raw, &in)
			end := min(in.Cursor+purge.PageSize, n)
			batches := []int{}
			for b := in.Cursor; b < end && len(batches) < purge.PageSize; b++ {
				batches = append(batches, b) // what the polling definition fanned out
			}
			return json.Marshal(map[string]any{"catalog": in.Catalog, "job_id": in.JobID, "cursor": end,
				"planned": end >= n, "stop": false, "batches": batches, "enqueued": end - in.Cursor})
		},
		"wait": func(_ context.Context, raw json.RawMessage) (json.RawMessage, error) {
			var in purge.AwaitInput
			_ = json.Unmarshal(raw, &in)
			// The delete function that completes the last batch returns the token.
			go func() {
				time.Sleep(20 * time.Millisecond)
				_ = engine.SendTask("SendTaskSuccess", in.TaskToken, nil, "", "")
			}()
			return json.RawMessage(`{}`), nil
		},
		"progress": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"remaining":0,"stop":false}`), nil
		},
		"finalize": func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"done":true}`), nil
		},
	}
	engine = emulators.NewStepFunctions("", lambdas, func(context.Context, string, string) (string, error) { return "m", nil })
	defer engine.Close()
	progress := "wait"
	if definition != purge.Definition {
		progress = "progress"
	}
	arn, err := engine.AddStateMachine("m", purge.Substitute(definition, map[string]string{
		"PlanFunction": "plan", "ProgressFunction": progress, "FinalizeFunction": "finalize", "DeleteQueueUrl": "q",
	}))
	if err != nil {
		t.Fatal(err)
	}
	exec, _, err := engine.Start(arn, "x", `{"catalog":"c","job_id":"j"}`)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		x, err := engine.Describe(exec)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != "RUNNING" {
			h, _ := engine.History(exec)
			return x.Status, len(h)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches: still running", n)
		}
	}
}

// A purge of any size fits one execution's history (Step Functions Standard
// holds 25,000 events): the plan enqueues a page of 500 batches per
// invocation, and the wait is one callback task, not a polling loop.
func TestWorkflowHistoryBudget(t *testing.T) {
	for _, n := range []int{100, 100_000} {
		status, events := budgetRun(t, purge.Definition, n)
		t.Logf("%7d batches: %s in %d history events (limit %d)", n, status, events, emulators.HistoryLimit)
		if status != "SUCCEEDED" || events >= emulators.HistoryLimit {
			t.Errorf("%d batches: %s with %d events, want SUCCEEDED under %d", n, status, events, emulators.HistoryLimit)
		}
	}
	// The definition this replaced (an inline Map sending one message per
	// batch, then Progress/Wait polling) could not: the engine fails it as
	// Step Functions would.
	old, err := os.ReadFile("testdata/workflow-polling.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	status, events := budgetRun(t, string(old), 100_000)
	t.Logf("the polling definition, 100000 batches: %s after %d events", status, events)
	if status != "FAILED" {
		t.Errorf("the polling definition with 100,000 batches: %s, want FAILED at the history limit", status)
	}
}
