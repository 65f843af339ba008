package emulators_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/awsconfig"
)

const waitDefinition = `{
  "StartAt": "Wait",
  "States": {
    "Wait": {
      "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
      "Parameters": { "FunctionName": "register", "Payload": { "token.$": "$$.Task.Token" } },
      "HeartbeatSeconds": 60, "ResultPath": "$.answer",
      "Retry": [{ "ErrorEquals": ["States.HeartbeatTimeout"], "IntervalSeconds": 1, "MaxAttempts": 3, "BackoffRate": 1 }],
      "End": true
    }
  }
}`

// tokens records the tokens the waiting task registers.
type tokens struct {
	mu   sync.Mutex
	list []string
}

func (k *tokens) register(_ context.Context, raw json.RawMessage) (json.RawMessage, error) {
	var in struct{ Token string }
	_ = json.Unmarshal(raw, &in)
	k.mu.Lock()
	k.list = append(k.list, in.Token)
	k.mu.Unlock()
	return json.RawMessage(`{}`), nil
}

func (k *tokens) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.list)
}

func (k *tokens) last() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.list[len(k.list)-1]
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// The callback pattern on the engine's clock: heartbeats keep a waiting task
// alive, a missed heartbeat times it out (and Retry registers a new token),
// SendTaskSuccess ends it; a spent token is refused. All through the SDK.
func TestWaitForTaskTokenHeartbeatsAndHistory(t *testing.T) {
	ctx := context.Background()
	clock := emulators.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var k tokens
	engine := emulators.NewStepFunctions("", map[string]emulators.LambdaFunc{"register": k.register}, nil)
	engine.Clock = clock
	defer engine.Close()
	client := awsconfig.SFN(served(t, engine, func(e *awsconfig.Endpoints) *string { return &e.SFN }))
	arn, err := engine.AddStateMachine("w", waitDefinition)
	if err != nil {
		t.Fatal(err)
	}
	out, err := client.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String(arn), Name: aws.String("e1"), Input: aws.String(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first token", func() bool { return k.count() == 1 && clock.Waiting() > 0 })
	// 59 s, a heartbeat, 59 s more: still the first token.
	clock.Advance(59 * time.Second)
	if _, err := client.SendTaskHeartbeat(ctx, &sfn.SendTaskHeartbeatInput{TaskToken: aws.String(k.last())}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	clock.Advance(59 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if k.count() != 1 {
		t.Fatalf("a heartbeat did not keep the task: %d tokens", k.count())
	}
	// No heartbeat for 60 s: timed out, retried with a new token.
	clock.Advance(2 * time.Second)
	eventually(t, "the retry's backoff", func() bool { return clock.Waiting() > 0 })
	clock.Advance(time.Second)
	eventually(t, "a second token", func() bool { return k.count() == 2 })
	first := k.list[0]
	if _, err := client.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String(first), Output: aws.String(`{}`)}); err == nil {
		t.Errorf("a timed-out task's token was accepted")
	}
	eventually(t, "the second wait", func() bool { return clock.Waiting() > 0 })
	if _, err := client.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String(k.last()), Output: aws.String(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the execution to end", func() bool {
		d, err := client.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: out.ExecutionArn})
		return err == nil && d.Status == "SUCCEEDED"
	})

	// The history, paged: every event once, in order, as Step Functions
	// records them for this run.
	var types []string
	p := sfn.NewGetExecutionHistoryPaginator(client, &sfn.GetExecutionHistoryInput{ExecutionArn: out.ExecutionArn, MaxResults: 3})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			if int(ev.Id) != len(types)+1 {
				t.Fatalf("event %d out of order", ev.Id)
			}
			types = append(types, string(ev.Type))
		}
	}
	want := []string{"ExecutionStarted", "TaskStateEntered",
		"TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskTimedOut",
		"TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskSucceeded",
		"TaskStateExited", "ExecutionSucceeded"}
	if len(types) != len(want) {
		t.Fatalf("history %v, want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("history %v, want %v", types, want)
		}
	}
}

// The listing calls operators make (aws stepfunctions list-state-machines,
// list-executions): newest execution first, a status filter, pages.
func TestListStateMachinesAndExecutions(t *testing.T) {
	const passDefinition = `{"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": true}}}`
	engine := emulators.NewStepFunctions("", nil, nil)
	defer engine.Close()
	arn, err := engine.AddStateMachine("m", passDefinition)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := awsconfig.SFN(served(t, engine, func(e *awsconfig.Endpoints) *string { return &e.SFN }))
	machines, err := client.ListStateMachines(ctx, &sfn.ListStateMachinesInput{})
	if err != nil || len(machines.StateMachines) != 1 || aws.ToString(machines.StateMachines[0].StateMachineArn) != arn {
		t.Fatalf("ListStateMachines: %+v, %v", machines, err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := client.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String(arn), Name: aws.String(name), Input: aws.String("{}")}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct start times
	}
	eventually(t, "3 executions succeeded", func() bool {
		out, err := client.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn), StatusFilter: "SUCCEEDED"})
		return err == nil && len(out.Executions) == 3
	})
	var names []string
	p := sfn.NewListExecutionsPaginator(client, &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn), MaxResults: 2})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Executions {
			names = append(names, aws.ToString(x.Name))
		}
	}
	if fmt.Sprint(names) != "[c b a]" {
		t.Errorf("executions %v, want newest first: [c b a]", names)
	}
	running, err := client.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn), StatusFilter: "RUNNING"})
	if err != nil || len(running.Executions) != 0 {
		t.Errorf("RUNNING executions: %+v, %v", running, err)
	}
	if _, err := client.ListExecutions(ctx, &sfn.ListExecutionsInput{StateMachineArn: aws.String(arn + "x")}); err == nil {
		t.Error("ListExecutions of an unknown state machine answered no error")
	}
}
