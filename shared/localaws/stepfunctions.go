package localaws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LambdaFunc plays one Lambda function for the local workflow engine.
type LambdaFunc func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error)

// SendFunc plays the sqs:sendMessage integration.
type SendFunc func(ctx context.Context, queueURL, body string) (messageID string, err error)

// StepFunctions is the local workflow engine: it runs Amazon States Language
// definitions (the subset icehold's definitions use: Task with lambda:invoke
// and sqs:sendMessage, Map, Choice, Wait, Pass, Succeed, Fail, Retry, Catch,
// JSONPath parameters) and serves StartExecution / DescribeExecution on the
// Step Functions JSON protocol, so the product's sfn SDK client works
// unchanged. Executions are idempotent by name and persisted at every state
// transition (atomic file writes), and resume after kill -9.
type StepFunctions struct {
	dir      string
	lambdas  map[string]LambdaFunc
	send     SendFunc
	mu       sync.Mutex
	machines map[string]map[string]any // ARN → definition
	execs    map[string]*execution
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// TimeScale shrinks Wait states and retry intervals (tests, make run).
	TimeScale float64
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
}

// NewStepFunctions returns an engine keeping executions in dir ("" = memory).
func NewStepFunctions(dir string, lambdas map[string]LambdaFunc, send SendFunc) *StepFunctions {
	ctx, cancel := context.WithCancel(context.Background())
	return &StepFunctions{
		dir: dir, lambdas: lambdas, send: send, machines: map[string]map[string]any{},
		execs: map[string]*execution{}, ctx: ctx, cancel: cancel, TimeScale: 1,
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
		e.mu.Lock()
		e.execs[x.ARN] = &x
		e.mu.Unlock()
		if x.Status == "RUNNING" {
			e.run(&x)
		}
	}
	return nil
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
	e.mu.Unlock()
	if err != nil {
		return err
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
		State: def["StartAt"].(string), Data: json.RawMessage(input), StartedAt: time.Now().UTC()}
	e.execs[arn] = x
	e.mu.Unlock()
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
	return *x, nil
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
			out, next, err := e.state(e.ctx, st, in, nil)
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
	e.mu.Lock()
	x.Status, x.Output, x.Error, x.Cause, x.StoppedAt = status, out, errName, cause, time.Now().UTC()
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

// state runs one state and returns its output and the next state ("" = end).
func (e *StepFunctions) state(ctx context.Context, st map[string]any, in any, ctxObj any) (any, string, error) {
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
		if !sleep(ctx, time.Duration(secs*e.TimeScale*float64(time.Second))) {
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
				return e.mapState(ctx, st, in)
			}
			return e.task(ctx, st, in, ctxObj)
		})
		if err != nil {
			var se *stateError
			if !errors.As(err, &se) {
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
		if err == nil || !errors.As(err, &se) || ctx.Err() != nil {
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
			if !sleep(ctx, time.Duration(wait*float64(time.Second))) {
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

func (e *StepFunctions) task(ctx context.Context, st map[string]any, in any, ctxObj any) (any, error) {
	p := in
	if ps, ok := st["Parameters"]; ok {
		p = params(ps, in, ctxObj)
	}
	pm, _ := p.(map[string]any)
	switch st["Resource"] {
	case "arn:aws:states:::lambda:invoke":
		name, _ := pm["FunctionName"].(string)
		fn, ok := e.lambdas[name]
		if !ok {
			return nil, &stateError{"Lambda.ResourceNotFoundException", "no function " + name}
		}
		payload, _ := json.Marshal(pm["Payload"])
		out, err := fn(ctx, payload)
		if err != nil {
			return nil, &stateError{"Lambda.Unknown", err.Error()}
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
	return nil, &stateError{"States.Runtime", fmt.Sprintf("unsupported resource %v", st["Resource"])}
}

func (e *StepFunctions) mapState(ctx context.Context, st map[string]any, in any) (any, error) {
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
	out := make([]any, len(list))
	for i, item := range list {
		itemIn := item
		if hasSel {
			ctxObj := map[string]any{"Map": map[string]any{"Item": map[string]any{"Index": json.Number(strconv.Itoa(i)), "Value": item}}}
			itemIn = params(sel, in, ctxObj)
		}
		res, err := e.subMachine(ctx, proc, itemIn)
		if err != nil {
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

func (e *StepFunctions) subMachine(ctx context.Context, def map[string]any, in any) (any, error) {
	states := def["States"].(map[string]any)
	name := def["StartAt"].(string)
	for {
		st, ok := states[name].(map[string]any)
		if !ok {
			return nil, &stateError{"States.Runtime", "no state " + name}
		}
		out, next, err := e.state(ctx, st, in, nil)
		if err != nil {
			return nil, err
		}
		if next == "" {
			return out, nil
		}
		name, in = next, out
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

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
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
	}
	return nil, awsError{"UnknownOperationException", "unsupported operation " + op}
}
