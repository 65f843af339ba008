package emulators

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LambdaFunc plays one Lambda function for the local workflow engine. An
// error's name, as Retry and Catch see it, is its Go type name (what the Lambda
// Go runtime reports as errorType).
type LambdaFunc func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error)

// SendFunc plays the sqs:sendMessage integration.
type SendFunc func(ctx context.Context, queueURL, body string) (messageID string, err error)

// HistoryLimit is Step Functions' limit on events in one Standard
// execution's history: past it the execution fails.
const HistoryLimit = 25000

// StepFunctions is the local workflow engine: it runs Amazon States Language
// definitions (the subset icehold's definitions use: Task with lambda:invoke
// (also .waitForTaskToken, with HeartbeatSeconds and TimeoutSeconds) and
// sqs:sendMessage, Map, Choice, Wait, Pass, Succeed, Fail, Retry, Catch,
// JSONPath parameters) and serves StartExecution, DescribeExecution,
// GetExecutionHistory and SendTaskSuccess/Failure/Heartbeat on the Step
// Functions JSON protocol, so the product's sfn SDK client works unchanged.
// It records the history events Step Functions records for those states and
// fails an execution whose history passes 25,000 events, as Step Functions
// does. Executions are idempotent by name, persisted at every state
// transition (atomic file writes, events appended), and resume after kill -9.
type StepFunctions struct {
	dir      string
	lambdas  map[string]LambdaFunc
	send     SendFunc
	mu       sync.Mutex
	machines map[string]map[string]any // ARN → definition
	defs     map[string]machineDef     // ARN → what DescribeStateMachine shows
	execs    map[string]*execution
	tokens   map[string]*waiter // task token → the task waiting for it
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// TimeScale shrinks Wait states, retry intervals, heartbeats and
	// timeouts (tests, make run).
	TimeScale float64
	// Clock is the engine's time (a ManualClock in tests).
	Clock Clock
	// Limit is the history limit (HistoryLimit unless a test sets another).
	Limit int
}

type execution struct {
	ARN       string          `json:"arn"`
	Name      string          `json:"name"`
	Machine   string          `json:"machine"`
	Input     json.RawMessage `json:"input"`
	Status    string          `json:"status"`
	State     string          `json:"state"`
	Data      json.RawMessage `json:"data"`
	Output    json.RawMessage `json:"output,omitempty"`
	Error     string          `json:"error,omitempty"`
	Cause     string          `json:"cause,omitempty"`
	StartedAt time.Time       `json:"started_at"`
	StoppedAt time.Time       `json:"stopped_at,omitzero"`
	// Events counts the history; the events themselves are appended to
	// <name>.events.jsonl (and kept in memory).
	Events int `json:"events"`

	history   []HistoryEvent
	persisted int // history entries already appended to the file
}

// HistoryEvent is one event of an execution's history.
type HistoryEvent struct {
	ID         int64     `json:"id"`
	PreviousID int64     `json:"previousEventId"`
	Type       string    `json:"type"`
	Timestamp  time.Time `json:"timestamp"`
	State      string    `json:"state,omitempty"`
	Error      string    `json:"error,omitempty"`
	Cause      string    `json:"cause,omitempty"`
}

// waiter is a Task waiting for its token (the callback pattern).
type waiter struct {
	done      chan tokenResult
	heartbeat chan struct{}
}

type tokenResult struct {
	output json.RawMessage
	err    *stateError
}

// errHistoryFull: the execution's history reached its limit.
var errHistoryFull = &stateError{"States.Runtime", "the execution history reached its limit of events"}

// NewStepFunctions returns an engine keeping executions in dir ("" = memory).
func NewStepFunctions(dir string, lambdas map[string]LambdaFunc, send SendFunc) *StepFunctions {
	ctx, cancel := context.WithCancel(context.Background())
	return &StepFunctions{
		dir: dir, lambdas: lambdas, send: send, machines: map[string]map[string]any{},
		execs: map[string]*execution{}, tokens: map[string]*waiter{}, ctx: ctx, cancel: cancel,
		TimeScale: 1, Clock: realClock{}, Limit: HistoryLimit,
	}
}

// AddStateMachine registers a definition under a name and returns its ARN.
func (e *StepFunctions) AddStateMachine(name, definition string) (string, error) {
	var def map[string]any
	if err := decodeJSON([]byte(definition), &def); err != nil {
		return "", fmt.Errorf("state machine %s: %w", name, err)
	}
	arn := "arn:aws:states:us-east-1:000000000000:stateMachine:" + name
	e.mu.Lock()
	e.machines[arn] = def
	if e.defs == nil {
		e.defs = map[string]machineDef{}
	}
	e.defs[arn] = machineDef{name: name, definition: definition, created: time.Now()}
	e.mu.Unlock()
	return arn, nil
}

// Resume loads persisted executions and continues the running ones.
func (e *StepFunctions) Resume() error {
	if e.dir == "" {
		return nil
	}
	dir := filepath.Join(e.dir, "executions")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var x execution
		if err := json.Unmarshal(raw, &x); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if x.history, err = readHistory(strings.TrimSuffix(f, ".json")+".events.jsonl", x.Events); err != nil {
			return err
		}
		x.Events, x.persisted = len(x.history), len(x.history)
		e.mu.Lock()
		e.execs[x.ARN] = &x
		e.mu.Unlock()
		if x.Status == "RUNNING" {
			e.run(&x)
		}
	}
	return nil
}

// readHistory reads up to n events (a torn last line from a crash is dropped).
func readHistory(path string, n int) ([]HistoryEvent, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []HistoryEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() && len(out) < n {
		var ev HistoryEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			break
		}
		out = append(out, ev)
	}
	return out, sc.Err()
}

// Close stops running executions (they resume on the next Resume).
func (e *StepFunctions) Close() {
	e.cancel()
	e.wg.Wait()
}

func (e *StepFunctions) persist(x *execution) error {
	if e.dir == "" {
		return nil
	}
	e.mu.Lock()
	raw, err := json.Marshal(x)
	fresh := append([]HistoryEvent(nil), x.history[x.persisted:]...)
	x.persisted = len(x.history)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	if len(fresh) > 0 {
		// Events first: the state file never counts events the log lacks.
		f, err := os.OpenFile(filepath.Join(e.dir, "executions", x.Name+".events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		for _, ev := range fresh {
			line, _ := json.Marshal(ev)
			b.Write(append(line, '\n'))
		}
		_, err = f.Write(b.Bytes())
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return writeFileAtomic(filepath.Join(e.dir, "executions", x.Name+".json"), raw)
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// emit appends a history event; errHistoryFull once the limit is reached
// (the execution's closing event is always recorded).
func (e *StepFunctions) emit(x *execution, typ, state string, failure *stateError) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	closing := strings.HasPrefix(typ, "Execution") && typ != "ExecutionStarted"
	if !closing && x.Events >= e.Limit {
		return errHistoryFull
	}
	ev := HistoryEvent{ID: int64(x.Events + 1), PreviousID: int64(x.Events), Type: typ, Timestamp: e.Clock.Now().UTC(), State: state}
	if failure != nil {
		ev.Error, ev.Cause = failure.Error_, failure.Cause
	}
	x.history = append(x.history, ev)
	x.Events++
	return nil
}

// Start starts a named execution; the same name with the same input while it
// runs answers the same execution, as Step Functions does.
func (e *StepFunctions) Start(machineARN, name, input string) (string, time.Time, error) {
	e.mu.Lock()
	def, ok := e.machines[machineARN]
	if !ok {
		e.mu.Unlock()
		return "", time.Time{}, awsError{"StateMachineDoesNotExist", "state machine " + machineARN}
	}
	if input == "" {
		input = "{}"
	}
	arn := strings.Replace(machineARN, ":stateMachine:", ":execution:", 1) + ":" + name
	if x, ok := e.execs[arn]; ok {
		e.mu.Unlock()
		if x.Status == "RUNNING" && jsonEqual(x.Input, []byte(input)) {
			return arn, x.StartedAt, nil
		}
		return "", time.Time{}, awsError{"ExecutionAlreadyExists", "execution " + name + " already exists"}
	}
	x := &execution{ARN: arn, Name: name, Machine: machineARN, Input: json.RawMessage(input), Status: "RUNNING",
		State: def["StartAt"].(string), Data: json.RawMessage(input), StartedAt: e.Clock.Now().UTC()}
	e.execs[arn] = x
	e.mu.Unlock()
	_ = e.emit(x, "ExecutionStarted", "", nil)
	if err := e.persist(x); err != nil {
		return "", time.Time{}, err
	}
	e.run(x)
	return arn, x.StartedAt, nil
}

// Describe returns a copy of an execution.
func (e *StepFunctions) Describe(arn string) (execution, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.execs[arn]
	if !ok {
		return execution{}, awsError{"ExecutionDoesNotExist", "execution " + arn}
	}
	cp := *x
	cp.history = nil
	return cp, nil
}

// History returns a copy of an execution's history.
func (e *StepFunctions) History(arn string) ([]HistoryEvent, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.execs[arn]
	if !ok {
		return nil, awsError{"ExecutionDoesNotExist", "execution " + arn}
	}
	return append([]HistoryEvent(nil), x.history...), nil
}

func (e *StepFunctions) run(x *execution) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.mu.Lock()
		def := e.machines[x.Machine]
		e.mu.Unlock()
		states := def["States"].(map[string]any)
		for e.ctx.Err() == nil {
			e.mu.Lock()
			name, data := x.State, x.Data
			e.mu.Unlock()
			st, ok := states[name].(map[string]any)
			if !ok {
				e.finish(x, "FAILED", nil, "States.Runtime", "no state "+name)
				return
			}
			var in any
			_ = decodeJSON(data, &in)
			out, next, err := e.state(e.ctx, x, name, st, in, nil)
			if e.ctx.Err() != nil {
				return // stopped: resumes from the persisted state
			}
			var fail *stateError
			if errors.As(err, &fail) {
				e.finish(x, "FAILED", nil, fail.Error_, fail.Cause)
				return
			}
			if err != nil {
				e.finish(x, "FAILED", nil, "States.Runtime", err.Error())
				return
			}
			raw, _ := json.Marshal(out)
			if next == "" {
				e.finish(x, "SUCCEEDED", raw, "", "")
				return
			}
			e.mu.Lock()
			x.State, x.Data = next, raw
			e.mu.Unlock()
			if err := e.persist(x); err != nil {
				slog.Error("persist execution", "execution", x.Name, "error", err)
			}
		}
	}()
}

func (e *StepFunctions) finish(x *execution, status string, out json.RawMessage, errName, cause string) {
	if status == "SUCCEEDED" {
		_ = e.emit(x, "ExecutionSucceeded", "", nil)
	} else {
		_ = e.emit(x, "ExecutionFailed", "", &stateError{errName, cause})
	}
	e.mu.Lock()
	x.Status, x.Output, x.Error, x.Cause, x.StoppedAt = status, out, errName, cause, e.Clock.Now().UTC()
	e.mu.Unlock()
	if err := e.persist(x); err != nil {
		slog.Error("persist execution", "execution", x.Name, "error", err)
	}
	if status == "FAILED" {
		slog.Warn("execution failed", "execution", x.Name, "error", errName, "cause", cause)
	}
}

// stateError is a States error (Error + Cause) that Retry and Catch match.
type stateError struct {
	Error_ string
	Cause  string
}

func (s *stateError) Error() string { return s.Error_ + ": " + s.Cause }

// errorName is the name Retry and Catch see for a function's error: its Go
// type name, as the Lambda Go runtime reports errorType.
func errorName(err error) string {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return "Lambda.Unknown"
	}
	return t.Name()
}

// stateTypePrefix names a state type in history events.
var stateTypePrefix = map[string]string{"Task": "TaskState", "Choice": "ChoiceState", "Wait": "WaitState", "Pass": "PassState", "Succeed": "SucceedState", "Map": "MapState"}

// state runs one state and returns its output and the next state ("" = end),
// recording its history events.
func (e *StepFunctions) state(ctx context.Context, x *execution, name string, st map[string]any, in any, ctxObj any) (any, string, error) {
	typ, _ := st["Type"].(string)
	if typ == "Fail" {
		if err := e.emit(x, "FailStateEntered", name, nil); err != nil {
			return nil, "", err
		}
	} else if p, ok := stateTypePrefix[typ]; ok {
		if err := e.emit(x, p+"Entered", name, nil); err != nil {
			return nil, "", err
		}
	}
	out, next, err := e.runState(ctx, x, name, st, in, ctxObj)
	if err != nil {
		return nil, "", err
	}
	if p, ok := stateTypePrefix[typ]; ok {
		if err := e.emit(x, p+"Exited", name, nil); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

func (e *StepFunctions) runState(ctx context.Context, x *execution, name string, st map[string]any, in any, ctxObj any) (any, string, error) {
	next, _ := st["Next"].(string)
	switch st["Type"] {
	case "Pass":
		out := in
		if p, ok := st["Parameters"]; ok {
			out = params(p, in, ctxObj)
		}
		return withResult(st, in, out), next, nil
	case "Succeed":
		return in, "", nil
	case "Fail":
		errName, _ := st["Error"].(string)
		cause, _ := st["Cause"].(string)
		return nil, "", &stateError{errName, cause}
	case "Wait":
		secs, _ := toFloat(st["Seconds"])
		if !e.sleep(ctx, time.Duration(secs*e.TimeScale*float64(time.Second))) {
			return nil, "", ctx.Err()
		}
		return in, next, nil
	case "Choice":
		for _, c := range asList(st["Choices"]) {
			rule := c.(map[string]any)
			if choose(rule, in) {
				return in, rule["Next"].(string), nil
			}
		}
		if d, ok := st["Default"].(string); ok {
			return in, d, nil
		}
		return nil, "", &stateError{"States.NoChoiceMatched", "no choice matched"}
	case "Task", "Map":
		out, err := e.withRetry(ctx, st, func() (any, error) {
			if st["Type"] == "Map" {
				return e.mapState(ctx, x, name, st, in)
			}
			return e.task(ctx, x, name, st, in, ctxObj)
		})
		if err != nil {
			var se *stateError
			if !errors.As(err, &se) || se == errHistoryFull {
				return nil, "", err
			}
			for _, c := range asList(st["Catch"]) {
				catcher := c.(map[string]any)
				if matches(catcher["ErrorEquals"], se.Error_) {
					return withResult(catcher, in, map[string]any{"Error": se.Error_, "Cause": se.Cause}), catcher["Next"].(string), nil
				}
			}
			return nil, "", err
		}
		if rs, ok := st["ResultSelector"]; ok {
			out = params(rs, out, nil)
		}
		if end, _ := st["End"].(bool); end {
			next = ""
		}
		return withResult(st, in, out), next, nil
	}
	return nil, "", fmt.Errorf("unsupported state type %v", st["Type"])
}

func (e *StepFunctions) withRetry(ctx context.Context, st map[string]any, run func() (any, error)) (any, error) {
	attempts := map[int]int{}
	for {
		out, err := run()
		var se *stateError
		if err == nil || !errors.As(err, &se) || ctx.Err() != nil || se == errHistoryFull {
			return out, err
		}
		retried := false
		for i, r := range asList(st["Retry"]) {
			rule := r.(map[string]any)
			if !matches(rule["ErrorEquals"], se.Error_) {
				continue
			}
			maxAttempts := 3.0
			if v, ok := toFloat(rule["MaxAttempts"]); ok {
				maxAttempts = v
			}
			if float64(attempts[i]) >= maxAttempts {
				break
			}
			interval, rate := 1.0, 2.0
			if v, ok := toFloat(rule["IntervalSeconds"]); ok {
				interval = v
			}
			if v, ok := toFloat(rule["BackoffRate"]); ok {
				rate = v
			}
			wait := interval * math.Pow(rate, float64(attempts[i])) * e.TimeScale
			attempts[i]++
			if !e.sleep(ctx, time.Duration(wait*float64(time.Second))) {
				return nil, ctx.Err()
			}
			retried = true
			break
		}
		if !retried {
			return nil, err
		}
	}
}

// task runs one attempt of a Task state: TaskScheduled, TaskStarted, then
// TaskSucceeded, TaskFailed or TaskTimedOut (TaskSubmitted first when it
// waits for a token).
func (e *StepFunctions) task(ctx context.Context, x *execution, name string, st map[string]any, in any, ctxObj any) (any, error) {
	resource, _ := st["Resource"].(string)
	base, waitToken := strings.CutSuffix(resource, ".waitForTaskToken")
	var w *waiter
	token := ""
	if waitToken {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		token = hex.EncodeToString(b)
		w = &waiter{done: make(chan tokenResult, 1), heartbeat: make(chan struct{}, 1)}
		e.mu.Lock()
		e.tokens[token] = w
		e.mu.Unlock()
		defer func() {
			e.mu.Lock()
			delete(e.tokens, token)
			e.mu.Unlock()
		}()
		obj := cloneMap(ctxObj)
		obj["Task"] = map[string]any{"Token": token}
		ctxObj = obj
	}
	for _, typ := range []string{"TaskScheduled", "TaskStarted"} {
		if err := e.emit(x, typ, name, nil); err != nil {
			return nil, err
		}
	}
	out, err := e.invoke(ctx, base, st, in, ctxObj)
	if err == nil && waitToken {
		if err := e.emit(x, "TaskSubmitted", name, nil); err != nil {
			return nil, err
		}
		out, err = e.await(ctx, st, w)
	}
	var se *stateError
	switch {
	case err == nil:
		if err := e.emit(x, "TaskSucceeded", name, nil); err != nil {
			return nil, err
		}
	case errors.As(err, &se) && (se.Error_ == "States.Timeout" || se.Error_ == "States.HeartbeatTimeout"):
		if err := e.emit(x, "TaskTimedOut", name, se); err != nil {
			return nil, err
		}
	case errors.As(err, &se):
		if err := e.emit(x, "TaskFailed", name, se); err != nil {
			return nil, err
		}
	}
	return out, err
}

// await waits for the task's token: SendTaskSuccess or SendTaskFailure,
// within HeartbeatSeconds of the last heartbeat and TimeoutSeconds overall.
func (e *StepFunctions) await(ctx context.Context, st map[string]any, w *waiter) (any, error) {
	scaled := func(key string) <-chan time.Time {
		secs, ok := toFloat(st[key])
		if !ok {
			return nil // no such deadline
		}
		return e.Clock.After(time.Duration(secs * e.TimeScale * float64(time.Second)))
	}
	timeout, heartbeat := scaled("TimeoutSeconds"), scaled("HeartbeatSeconds")
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case r := <-w.done:
			if r.err != nil {
				return nil, r.err
			}
			var v any
			if err := decodeJSON(r.output, &v); err != nil {
				return nil, &stateError{"States.Runtime", "task output is not JSON"}
			}
			return v, nil
		case <-w.heartbeat:
			heartbeat = scaled("HeartbeatSeconds")
		case <-heartbeat:
			return nil, &stateError{"States.HeartbeatTimeout", "no heartbeat within HeartbeatSeconds"}
		case <-timeout:
			return nil, &stateError{"States.Timeout", "the task ran past TimeoutSeconds"}
		}
	}
}

// SendTask completes, fails or heartbeats the task waiting for token.
func (e *StepFunctions) SendTask(op, token string, output json.RawMessage, errName, cause string) error {
	e.mu.Lock()
	w, ok := e.tokens[token]
	e.mu.Unlock()
	if !ok {
		return awsError{"TaskDoesNotExist", "no task waits for this token"}
	}
	switch op {
	case "SendTaskHeartbeat":
		select {
		case w.heartbeat <- struct{}{}:
		default:
		}
		return nil
	case "SendTaskSuccess":
		if len(output) == 0 {
			output = json.RawMessage("{}")
		}
		select {
		case w.done <- tokenResult{output: output}:
		default:
		}
	case "SendTaskFailure":
		select {
		case w.done <- tokenResult{err: &stateError{errName, cause}}:
		default:
		}
	}
	return nil
}

func (e *StepFunctions) invoke(ctx context.Context, resource string, st map[string]any, in any, ctxObj any) (any, error) {
	p := in
	if ps, ok := st["Parameters"]; ok {
		p = params(ps, in, ctxObj)
	}
	pm, _ := p.(map[string]any)
	switch resource {
	case "arn:aws:states:::lambda:invoke":
		name, _ := pm["FunctionName"].(string)
		fn, ok := e.lambdas[name]
		if !ok {
			return nil, &stateError{"Lambda.ResourceNotFoundException", "no function " + name}
		}
		payload, _ := json.Marshal(pm["Payload"])
		out, err := fn(ctx, payload)
		if err != nil {
			return nil, &stateError{errorName(err), err.Error()}
		}
		var v any
		if err := decodeJSON(out, &v); err != nil {
			return nil, &stateError{"States.Runtime", "function answered no JSON: " + err.Error()}
		}
		return map[string]any{"Payload": v, "StatusCode": json.Number("200")}, nil
	case "arn:aws:states:::sqs:sendMessage":
		url, _ := pm["QueueUrl"].(string)
		body, ok := pm["MessageBody"].(string)
		if !ok {
			raw, _ := json.Marshal(pm["MessageBody"])
			body = string(raw)
		}
		id, err := e.send(ctx, url, body)
		if err != nil {
			return nil, &stateError{"SQS.SdkClientException", err.Error()}
		}
		return map[string]any{"MessageId": id}, nil
	}
	return nil, &stateError{"States.Runtime", fmt.Sprintf("unsupported resource %v", resource)}
}

// mapState runs an inline Map: MapStateStarted, each item's iteration
// (MapIterationStarted, its states' events, MapIterationSucceeded), then
// MapStateSucceeded.
func (e *StepFunctions) mapState(ctx context.Context, x *execution, name string, st map[string]any, in any) (any, error) {
	items := in
	if p, ok := st["ItemsPath"].(string); ok {
		items = lookup(in, p, nil)
	}
	list := asList(items)
	proc, _ := st["ItemProcessor"].(map[string]any)
	if proc == nil {
		proc, _ = st["Iterator"].(map[string]any)
	}
	sel, hasSel := st["ItemSelector"]
	if !hasSel {
		sel, hasSel = st["Parameters"]
	}
	if err := e.emit(x, "MapStateStarted", name, nil); err != nil {
		return nil, err
	}
	out := make([]any, len(list))
	for i, item := range list {
		itemIn := item
		if hasSel {
			ctxObj := map[string]any{"Map": map[string]any{"Item": map[string]any{"Index": json.Number(strconv.Itoa(i)), "Value": item}}}
			itemIn = params(sel, in, ctxObj)
		}
		if err := e.emit(x, "MapIterationStarted", name, nil); err != nil {
			return nil, err
		}
		res, err := e.subMachine(ctx, x, proc, itemIn)
		if err != nil {
			var se *stateError
			if errors.As(err, &se) && se != errHistoryFull {
				if err := e.emit(x, "MapIterationFailed", name, se); err != nil {
					return nil, err
				}
				if err := e.emit(x, "MapStateFailed", name, se); err != nil {
					return nil, err
				}
			}
			return nil, err
		}
		if err := e.emit(x, "MapIterationSucceeded", name, nil); err != nil {
			return nil, err
		}
		out[i] = res
	}
	if err := e.emit(x, "MapStateSucceeded", name, nil); err != nil {
		return nil, err
	}
	return out, nil
}

func (e *StepFunctions) subMachine(ctx context.Context, x *execution, def map[string]any, in any) (any, error) {
	states := def["States"].(map[string]any)
	name := def["StartAt"].(string)
	for {
		st, ok := states[name].(map[string]any)
		if !ok {
			return nil, &stateError{"States.Runtime", "no state " + name}
		}
		out, next, err := e.state(ctx, x, name, st, in, nil)
		if err != nil {
			return nil, err
		}
		if next == "" {
			return out, nil
		}
		name, in = next, out
	}
}

// sleep waits d on the engine's clock.
func (e *StepFunctions) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-e.Clock.After(d):
		return true
	}
}

// ---- JSONPath and friends ----

func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if decodeJSON(a, &x) != nil || decodeJSON(b, &y) != nil {
		return false
	}
	ra, _ := json.Marshal(x)
	rb, _ := json.Marshal(y)
	return bytes.Equal(ra, rb)
}

// lookup resolves $.a.b[0] against data, or $$.… against the context object.
func lookup(data any, path string, ctxObj any) any {
	cur := data
	if strings.HasPrefix(path, "$$") {
		cur, path = ctxObj, path[1:]
	}
	path = strings.TrimPrefix(path, "$")
	for _, part := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		if part == "" {
			continue
		}
		idx := -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			idx, _ = strconv.Atoi(part[i+1 : len(part)-1])
			part = part[:i]
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
		if idx >= 0 {
			l := asList(cur)
			if idx >= len(l) {
				return nil
			}
			cur = l[idx]
		}
	}
	return cur
}

// params builds Parameters / ItemSelector / ResultSelector: keys ending in
// ".$" take the value at their path.
func params(tmpl any, data any, ctxObj any) any {
	switch t := tmpl.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, v := range t {
			if key, ok := strings.CutSuffix(k, ".$"); ok {
				if p, ok := v.(string); ok {
					out[key] = lookup(data, p, ctxObj)
					continue
				}
			}
			out[k] = params(v, data, ctxObj)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			out[i] = params(v, data, ctxObj)
		}
		return out
	}
	return tmpl
}

// withResult places a result into the state input per ResultPath.
func withResult(st map[string]any, in, result any) any {
	rp, ok := st["ResultPath"]
	if !ok {
		return result // default ResultPath "$"
	}
	if rp == nil {
		return in
	}
	path, _ := rp.(string)
	if path == "$" {
		return result
	}
	root := cloneMap(in)
	cur := root
	parts := strings.Split(strings.TrimPrefix(path, "$."), ".")
	for _, p := range parts[:len(parts)-1] {
		next := cloneMap(cur[p])
		cur[p] = next
		cur = next
	}
	cur[parts[len(parts)-1]] = result
	return root
}

func cloneMap(v any) map[string]any {
	out := map[string]any{}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			out[k] = x
		}
	}
	return out
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

func matches(errorEquals any, name string) bool {
	for _, e := range asList(errorEquals) {
		if e == name || (e == "States.ALL" && name != "States.Runtime") || (e == "States.TaskFailed" && !strings.HasPrefix(name, "States.")) {
			return true
		}
	}
	return false
}

func choose(rule map[string]any, in any) bool {
	if and, ok := rule["And"]; ok {
		for _, r := range asList(and) {
			if !choose(r.(map[string]any), in) {
				return false
			}
		}
		return true
	}
	if or, ok := rule["Or"]; ok {
		for _, r := range asList(or) {
			if choose(r.(map[string]any), in) {
				return true
			}
		}
		return false
	}
	if not, ok := rule["Not"].(map[string]any); ok {
		return !choose(not, in)
	}
	path, _ := rule["Variable"].(string)
	v := lookup(in, path, nil)
	for op, want := range rule {
		switch op {
		case "BooleanEquals":
			return v == want
		case "StringEquals":
			return v == want
		case "IsPresent":
			return (v != nil) == want
		case "NumericEquals", "NumericGreaterThan", "NumericLessThan", "NumericGreaterThanEquals", "NumericLessThanEquals":
			a, ok1 := toFloat(v)
			b, ok2 := toFloat(want)
			if !ok1 || !ok2 {
				return false
			}
			return map[string]bool{
				"NumericEquals": a == b, "NumericGreaterThan": a > b, "NumericLessThan": a < b,
				"NumericGreaterThanEquals": a >= b, "NumericLessThanEquals": a <= b,
			}[op]
		}
	}
	return false
}

// ---- the Step Functions JSON protocol ----

func (e *StepFunctions) ServeHTTP(w http.ResponseWriter, r *http.Request) { serveJSON(w, r, e.call) }

func (e *StepFunctions) call(_ context.Context, op string, req map[string]any) (map[string]any, error) {
	str := func(k string) string { s, _ := req[k].(string); return s }
	switch op {
	case "StartExecution":
		name := str("name")
		if name == "" {
			name = fmt.Sprintf("exec-%d", time.Now().UnixNano())
		}
		arn, at, err := e.Start(str("stateMachineArn"), name, str("input"))
		if err != nil {
			return nil, err
		}
		return map[string]any{"executionArn": arn, "startDate": epoch(at)}, nil
	case "DescribeExecution":
		x, err := e.Describe(str("executionArn"))
		if err != nil {
			return nil, err
		}
		out := map[string]any{
			"executionArn": x.ARN, "stateMachineArn": x.Machine, "name": x.Name, "status": x.Status,
			"startDate": epoch(x.StartedAt), "input": string(x.Input),
		}
		if !x.StoppedAt.IsZero() {
			out["stopDate"] = epoch(x.StoppedAt)
		}
		if x.Output != nil {
			out["output"] = string(x.Output)
		}
		if x.Error != "" {
			out["error"], out["cause"] = x.Error, x.Cause
		}
		return out, nil
	case "GetExecutionHistory":
		return e.historyPage(str("executionArn"), req)
	case "ListStateMachines":
		return e.listMachines(), nil
	case "DescribeStateMachine":
		e.mu.Lock()
		d, ok := e.defs[str("stateMachineArn")]
		e.mu.Unlock()
		if !ok {
			return nil, awsError{"StateMachineDoesNotExist", "no state machine " + str("stateMachineArn")}
		}
		return map[string]any{"stateMachineArn": str("stateMachineArn"), "name": d.name, "status": "ACTIVE",
			"definition": d.definition, "roleArn": "arn:aws:iam::000000000000:role/" + d.name, "type": "STANDARD",
			"creationDate": epoch(d.created)}, nil
	case "ListExecutions":
		return e.listExecutions(str("stateMachineArn"), str("statusFilter"), req)
	case "SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat":
		return map[string]any{}, e.SendTask(op, str("taskToken"), json.RawMessage(str("output")), str("error"), str("cause"))
	}
	return nil, awsError{"UnknownOperationException", "unsupported operation " + op}
}

// machineDef is a state machine as DescribeStateMachine shows it.
type machineDef struct {
	name, definition string
	created          time.Time
}

func (e *StepFunctions) listMachines() map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []map[string]any{}
	for arn, d := range e.defs {
		out = append(out, map[string]any{"stateMachineArn": arn, "name": d.name, "type": "STANDARD", "creationDate": epoch(d.created)})
	}
	slices.SortFunc(out, func(a, b map[string]any) int { return strings.Compare(a["name"].(string), b["name"].(string)) })
	return map[string]any{"stateMachines": out}
}

// listExecutions answers ListExecutions: newest first, statusFilter,
// maxResults (default 100, at most 1000) and nextToken, as Step Functions
// pages them.
func (e *StepFunctions) listExecutions(machine, status string, req map[string]any) (map[string]any, error) {
	e.mu.Lock()
	if _, ok := e.defs[machine]; !ok {
		e.mu.Unlock()
		return nil, awsError{"StateMachineDoesNotExist", "no state machine " + machine}
	}
	var xs []execution
	for _, x := range e.execs {
		if x.Machine == machine && (status == "" || x.Status == status) {
			xs = append(xs, *x)
		}
	}
	e.mu.Unlock()
	slices.SortFunc(xs, func(a, b execution) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	size := 100
	if v, ok := toFloat(req["maxResults"]); ok && v > 0 {
		size = min(int(v), 1000)
	}
	start := 0
	if tok, _ := req["nextToken"].(string); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(xs) {
			return nil, awsError{"InvalidToken", "bad nextToken"}
		}
		start = n
	}
	end := min(start+size, len(xs))
	page := make([]map[string]any, 0, end-start)
	for _, x := range xs[start:end] {
		m := map[string]any{"executionArn": x.ARN, "stateMachineArn": x.Machine, "name": x.Name, "status": x.Status, "startDate": epoch(x.StartedAt)}
		if !x.StoppedAt.IsZero() {
			m["stopDate"] = epoch(x.StoppedAt)
		}
		page = append(page, m)
	}
	out := map[string]any{"executions": page}
	if end < len(xs) {
		out["nextToken"] = strconv.Itoa(end)
	}
	return out, nil
}

// historyPage answers GetExecutionHistory: maxResults (1 to 1000, default
// 100), nextToken, reverseOrder.
func (e *StepFunctions) historyPage(arn string, req map[string]any) (map[string]any, error) {
	events, err := e.History(arn)
	if err != nil {
		return nil, err
	}
	size := 100
	if v, ok := toFloat(req["maxResults"]); ok && v > 0 {
		size = min(int(v), 1000)
	}
	if rev, _ := req["reverseOrder"].(bool); rev {
		for i, j := 0, len(events)-1; i < j; i, j = i+1, j-1 {
			events[i], events[j] = events[j], events[i]
		}
	}
	start := 0
	if tok, _ := req["nextToken"].(string); tok != "" {
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || n > len(events) {
			return nil, awsError{"InvalidToken", "bad nextToken"}
		}
		start = n
	}
	end := min(start+size, len(events))
	page := make([]map[string]any, 0, end-start)
	for _, ev := range events[start:end] {
		m := map[string]any{"id": ev.ID, "previousEventId": ev.PreviousID, "type": ev.Type, "timestamp": epoch(ev.Timestamp)}
		if ev.State != "" {
			key := "stateExitedEventDetails"
			if strings.HasSuffix(ev.Type, "Entered") {
				key = "stateEnteredEventDetails"
			}
			if strings.HasSuffix(ev.Type, "Entered") || strings.HasSuffix(ev.Type, "Exited") {
				m[key] = map[string]any{"name": ev.State}
			}
		}
		if ev.Error != "" {
			details := map[string]any{"error": ev.Error, "cause": ev.Cause}
			switch ev.Type {
			case "ExecutionFailed":
				m["executionFailedEventDetails"] = details
			case "TaskFailed":
				m["taskFailedEventDetails"] = details
			case "TaskTimedOut":
				m["taskTimedOutEventDetails"] = details
			}
		}
		page = append(page, m)
	}
	out := map[string]any{"events": page}
	if end < len(events) {
		out["nextToken"] = strconv.Itoa(end)
	}
	return out, nil
}
