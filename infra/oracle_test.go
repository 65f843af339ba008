package infra_test

// The IAM oracle: each function's own code (built as its main builds it)
// runs a purge end to end against the local emulators, each function behind
// its own recording proxy; every AWS call it makes is turned into the IAM
// request AWS would authorize (action, resource ARN, dynamodb:LeadingKeys)
// and evaluated against the synthesized policy of that function's role. A
// grant narrowed too far fails here instead of as AccessDenied in AWS.
//
// What it cannot see: the event source mapping's own calls are replayed
// by the test (ReceiveMessage, DeleteMessage, GetQueueAttributes, under the
// delete role as in AWS), and the state machine's role is not exercised.

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/iampolicy"
	"github.com/icehold/icehold/shared/lambdaenv"
	"github.com/icehold/icehold/shared/lambdaenv/outboxenv"
	"github.com/icehold/icehold/shared/lambdaenv/partitionsenv"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/lambdaenv/routerenv"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/store"
)

const (
	oracleRegion  = "us-east-1"
	oracleAccount = "000000000000"
	oracleBus     = "icehold-lifecycle"
	oracleMachine = "arn:aws:states:us-east-1:000000000000:stateMachine:" + server.PurgeMachine
)

// iamRequest is one authorization AWS makes for a call.
type iamRequest struct {
	Action, Resource string
	LeadingKey       string // the item's partition key (DynamoDB), "" otherwise
	ViaService       string // the service a KMS request comes through (kms:ViaService)
	Call             string // the API call it came from
}

func (r iamRequest) String() string {
	s := r.Action + " on " + r.Resource
	if r.LeadingKey != "" {
		s += " (pk " + r.LeadingKey + ")"
	}
	if r.ViaService != "" {
		s += " (via " + r.ViaService + ")"
	}
	return s + " [" + r.Call + "]"
}

// kmsRequests are the KMS authorizations the calls need when the table,
// the buckets' objects and the queues are encrypted with a customer managed
// key (docs/design/infra.md, "Bring your own storage"): DynamoDB decrypts the
// table key with the caller's authority on every data call; S3 decrypts an
// object read (GET; a HEAD reads no data) and a multipart upload's parts
// (UploadPart, Complete), and generates a data key for an object written
// (PUT, CreateMultipartUpload); SQS generates and decrypts a data key for a
// message sent and decrypts one received. Deletes, lists and queue
// attributes use no key.
func kmsRequests(reqs []iamRequest, key string) []iamRequest {
	var out []iamRequest
	need := func(r iamRequest, service string, actions ...string) {
		for _, a := range actions {
			out = append(out, iamRequest{Action: "kms:" + a, Resource: key, ViaService: service + "." + oracleRegion + ".amazonaws.com", Call: r.Call})
		}
	}
	for _, r := range reqs {
		service, action, _ := strings.Cut(r.Action, ":")
		method, uri, _ := strings.Cut(r.Call, " ")
		switch {
		case service == "dynamodb":
			need(r, "dynamodb", "Decrypt")
		case r.Action == "s3:GetObject" && method == http.MethodGet:
			need(r, "s3", "Decrypt")
		case r.Action == "s3:PutObject" && strings.Contains(uri, "uploadId="):
			need(r, "s3", "Decrypt")
		case r.Action == "s3:PutObject":
			need(r, "s3", "GenerateDataKey")
		case r.Action == "sqs:SendMessage":
			need(r, "sqs", "GenerateDataKey", "Decrypt")
		case r.Action == "sqs:ReceiveMessage":
			need(r, "sqs", "Decrypt")
		case service == "kms":
			panic("kms request recorded: " + action)
		}
	}
	return out
}

// fakeSFN answers StartExecution and DescribeExecution (the local engine
// would run the pipeline itself; here the test runs each step).
type fakeSFN struct {
	mu      sync.Mutex
	started []struct{ Name, Input string }
	status  map[string]string // execution ARN → status; absent: ExecutionDoesNotExist
}

// recorder is one function's view of AWS: a proxy to the emulators that
// records what each request needs from IAM.
type recorder struct {
	dynamo, s3emu, sqsE *url.URL
	sfn                 *fakeSFN
	mu                  sync.Mutex
	reqs                []iamRequest
	errs                []string
}

func newRecorder(t *testing.T, info server.Info, sfn *fakeSFN) (*recorder, string) {
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	r := &recorder{dynamo: parse(info.DynamoDB), s3emu: parse(info.S3Endpoint), sqsE: parse(info.SQS), sfn: sfn}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func (r *recorder) record(reqs ...iamRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, reqs...)
}

func (r *recorder) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	target := req.Header.Get("X-Amz-Target")
	service, op, _ := strings.Cut(target, ".")
	switch service {
	case "DynamoDB_20120810":
		r.record(dynamoRequests(op, body)...)
		httputil.NewSingleHostReverseProxy(r.dynamo).ServeHTTP(w, req)
	case "AmazonSQS":
		var in struct{ QueueUrl string }
		_ = json.Unmarshal(body, &in)
		// A batch call is authorized as its single action (IAM has no
		// SendMessageBatch action).
		r.record(iamRequest{Action: "sqs:" + strings.TrimSuffix(op, "Batch"), Resource: queueARN(in.QueueUrl), Call: target})
		httputil.NewSingleHostReverseProxy(r.sqsE).ServeHTTP(w, req)
	case "AWSStepFunctions":
		r.serveSFN(w, op, body)
	case "AWSEvents":
		var in struct {
			Entries []struct{ EventBusName string }
		}
		_ = json.Unmarshal(body, &in)
		out := []map[string]string{}
		for _, e := range in.Entries {
			bus := e.EventBusName
			if !strings.HasPrefix(bus, "arn:") {
				bus = "arn:aws:events:" + oracleRegion + ":" + oracleAccount + ":event-bus/" + bus
			}
			r.record(iamRequest{Action: "events:" + op, Resource: bus, Call: target})
			out = append(out, map[string]string{"EventId": "e"})
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"FailedEntryCount": 0, "Entries": out})
	case "":
		reqs, err := s3Requests(req, body)
		if err != nil {
			r.fail("%s %s: %v", req.Method, req.URL, err)
		}
		r.record(reqs...)
		httputil.NewSingleHostReverseProxy(r.s3emu).ServeHTTP(w, req)
	default:
		r.fail("unexpected service call %s", target)
		http.Error(w, "unknown service", http.StatusBadRequest)
	}
}

func (r *recorder) serveSFN(w http.ResponseWriter, op string, body []byte) {
	var in struct {
		StateMachineArn string `json:"stateMachineArn"`
		Name            string `json:"name"`
		Input           string `json:"input"`
		ExecutionArn    string `json:"executionArn"`
	}
	_ = json.Unmarshal(body, &in)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	f := r.sfn
	f.mu.Lock()
	defer f.mu.Unlock()
	switch op {
	case "StartExecution":
		r.record(iamRequest{Action: "states:StartExecution", Resource: in.StateMachineArn, Call: "StartExecution"})
		f.started = append(f.started, struct{ Name, Input string }{in.Name, in.Input})
		exec := purge.ExecutionARN(in.StateMachineArn, in.Name)
		f.status[exec] = "RUNNING"
		_ = json.NewEncoder(w).Encode(map[string]any{"executionArn": exec, "startDate": time.Now().Unix()})
	case "DescribeExecution":
		r.record(iamRequest{Action: "states:DescribeExecution", Resource: in.ExecutionArn, Call: "DescribeExecution"})
		st, ok := f.status[in.ExecutionArn]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"__type": "ExecutionDoesNotExist", "message": "no such execution"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"executionArn": in.ExecutionArn, "stateMachineArn": oracleMachine,
			"status": st, "startDate": time.Now().Unix(), "input": "{}"})
	case "SendTaskSuccess", "SendTaskHeartbeat", "SendTaskFailure":
		// Task responses are granted on the state machine (CDK's
		// grantTaskResponse); the oracle's fake has no waiting task.
		r.record(iamRequest{Action: "states:" + op, Resource: oracleMachine, Call: op})
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "TaskDoesNotExist", "message": "no task waits for this token"})
	default:
		r.record(iamRequest{Action: "states:" + op, Resource: "?", Call: op})
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "InvalidArn", "message": "not emulated"})
	}
}

func queueARN(u string) string {
	parts := strings.Split(strings.TrimRight(u, "/"), "/")
	if len(parts) < 2 {
		return "?" + u
	}
	return "arn:aws:sqs:" + oracleRegion + ":" + parts[len(parts)-2] + ":" + parts[len(parts)-1]
}

// dynamoRequests: IAM authorizes a transaction and a batch per item, with
// the item's partition key as dynamodb:LeadingKeys.
func dynamoRequests(op string, body []byte) []iamRequest {
	type attr struct {
		S string `json:"S"`
	}
	type keyed struct {
		TableName string          `json:"TableName"`
		Key       map[string]attr `json:"Key"`
		Item      map[string]attr `json:"Item"`
	}
	var in struct {
		keyed
		KeyConditionExpression    string                        `json:"KeyConditionExpression"`
		ExpressionAttributeValues map[string]attr               `json:"ExpressionAttributeValues"`
		TransactItems             []map[string]keyed            `json:"TransactItems"`
		RequestItems              map[string][]map[string]keyed `json:"RequestItems"`
	}
	_ = json.Unmarshal(body, &in)
	tableARN := func(name string) string {
		return "arn:aws:dynamodb:" + oracleRegion + ":" + oracleAccount + ":table/" + name
	}
	pk := func(k keyed) string {
		if v, ok := k.Key["pk"]; ok {
			return v.S
		}
		return k.Item["pk"].S
	}
	var out []iamRequest
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		action := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		for _, it := range in.TransactItems {
			for kind, k := range it {
				out = append(out, iamRequest{Action: "dynamodb:" + action[kind], Resource: tableARN(k.TableName), LeadingKey: pk(k), Call: op})
			}
		}
	case "BatchWriteItem", "BatchGetItem":
		for table, reqs := range in.RequestItems {
			for _, rq := range reqs {
				for _, k := range rq {
					out = append(out, iamRequest{Action: "dynamodb:" + op, Resource: tableARN(table), LeadingKey: pk(k), Call: op})
				}
			}
		}
	case "Query":
		m := regexp.MustCompile(`\bpk = (:\w+)`).FindStringSubmatch(in.KeyConditionExpression)
		key := "?"
		if m != nil {
			key = in.ExpressionAttributeValues[m[1]].S
		}
		out = append(out, iamRequest{Action: "dynamodb:Query", Resource: tableARN(in.TableName), LeadingKey: key, Call: op})
	case "GetItem", "PutItem", "UpdateItem", "DeleteItem":
		out = append(out, iamRequest{Action: "dynamodb:" + op, Resource: tableARN(in.TableName), LeadingKey: pk(in.keyed), Call: op})
	default: // Scan, DescribeTable, …: no key
		out = append(out, iamRequest{Action: "dynamodb:" + op, Resource: tableARN(in.TableName), Call: op})
	}
	return out
}

// s3Requests maps a path-style S3 request to what IAM authorizes.
func s3Requests(req *http.Request, body []byte) ([]iamRequest, error) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	q := req.URL.Query()
	obj := func(action, k string) iamRequest {
		return iamRequest{Action: action, Resource: "arn:aws:s3:::" + bucket + "/" + k, Call: req.Method + " " + req.URL.RequestURI()}
	}
	switch {
	case key == "" && req.Method == http.MethodPost && q.Has("delete"):
		var d struct {
			Objects []struct{ Key string } `xml:"Object"`
		}
		if err := xml.Unmarshal(body, &d); err != nil {
			return nil, err
		}
		var out []iamRequest
		for _, o := range d.Objects {
			r := obj("s3:DeleteObject", o.Key)
			r.Call = "DeleteObjects"
			out = append(out, r)
		}
		return out, nil
	case key == "" && (req.Method == http.MethodGet || req.Method == http.MethodHead):
		action := "s3:ListBucket"
		if q.Has("location") {
			action = "s3:GetBucketLocation"
		}
		return []iamRequest{{Action: action, Resource: "arn:aws:s3:::" + bucket, Call: req.Method + " " + req.URL.RequestURI()}}, nil
	case key == "":
		return nil, fmt.Errorf("bucket-level %s not mapped", req.Method)
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		return []iamRequest{obj("s3:GetObject", key)}, nil
	case req.Method == http.MethodPut || req.Method == http.MethodPost:
		return []iamRequest{obj("s3:PutObject", key)}, nil // PutObject, multipart create/part/complete
	case req.Method == http.MethodDelete && q.Has("uploadId"):
		return []iamRequest{obj("s3:AbortMultipartUpload", key)}, nil
	case req.Method == http.MethodDelete:
		return []iamRequest{obj("s3:DeleteObject", key)}, nil
	}
	return nil, fmt.Errorf("%s not mapped", req.Method)
}

// policy is a role's statements with their intrinsic functions resolved to
// the local names of the resources.
type policy []map[string]any

func localPolicy(t *testing.T, statements []map[string]any) policy {
	t.Helper()
	byPrefix := map[string]string{
		"Catalog.Arn": "arn:aws:dynamodb:" + oracleRegion + ":" + oracleAccount + ":table/" + server.TableName,
		// The stream: the event source mapping reads it (not exercised here).
		"Catalog.StreamArn": "arn:aws:dynamodb:" + oracleRegion + ":" + oracleAccount + ":table/" + server.TableName + "/stream/local",
		"Warehouse.Arn":     "arn:aws:s3:::" + server.DefaultBucket,
		"DeleteQueue.Arn":   "arn:aws:sqs:" + oracleRegion + ":" + oracleAccount + ":" + server.DeleteQueue,
		"PurgeMachine":      oracleMachine,
		"LifecycleBus.Arn":  "arn:aws:events:" + oracleRegion + ":" + oracleAccount + ":event-bus/" + oracleBus,
		"Api":               "local-api", // the engines' execute-api:Invoke (not exercised here)
		"HttpApi":           "local-http-api",
		"VendingRole.Arn":   "arn:aws:iam::" + oracleAccount + ":role/" + server.VendingRole,
		"AWS::Partition":    "aws",
		"AWS::Region":       oracleRegion,
		"AWS::AccountId":    oracleAccount,
	}
	var resolve func(v any) string
	resolve = func(v any) string {
		switch x := v.(type) {
		case string:
			// The purge machine named by its fixed name (<stack>-purge).
			for _, stack := range []string{"Test", "Byo"} {
				x = strings.ReplaceAll(x, ":stateMachine:"+stack+"-purge", ":stateMachine:"+server.PurgeMachine)
			}
			return x
		case map[string]any:
			if ref, ok := x["Ref"].(string); ok {
				if v, ok := byPrefix[ref]; ok {
					return v
				}
				if v, ok := byPrefix[unhash(ref)]; ok {
					return v
				}
			}
			if ga, ok := x["Fn::GetAtt"].([]any); ok {
				if v, ok := byPrefix[unhash(ga[0].(string))+"."+ga[1].(string)]; ok {
					return v
				}
			}
			if j, ok := x["Fn::Join"].([]any); ok {
				parts := []string{}
				for _, e := range j[1].([]any) {
					parts = append(parts, resolve(e))
				}
				return strings.Join(parts, j[0].(string))
			}
			if sel, ok := x["Fn::Select"].([]any); ok {
				if sp, ok := sel[1].(map[string]any)["Fn::Split"].([]any); ok {
					parts := strings.Split(resolve(sp[1]), sp[0].(string))
					if i := int(sel[0].(float64)); i < len(parts) {
						return parts[i]
					}
				}
			}
		}
		raw, _ := json.Marshal(v)
		t.Fatalf("the oracle cannot resolve %s", raw)
		return ""
	}
	var out policy
	for _, st := range statements {
		c := map[string]any{}
		for k, v := range st {
			c[k] = v
		}
		var res []string
		if list, ok := st["Resource"].([]any); ok {
			for _, r := range list {
				res = append(res, resolve(r))
			}
		} else {
			res = append(res, resolve(st["Resource"]))
		}
		c["Resource"] = res
		if cond, ok := st["Condition"].(map[string]any); ok {
			if eq, ok := cond["StringEquals"].(map[string]any); ok {
				vs := eq["kms:ViaService"]
				var services []any
				for _, v := range vs.([]any) {
					services = append(services, resolve(v))
				}
				c["Condition"] = map[string]any{"StringEquals": map[string]any{"kms:ViaService": services}}
			}
		}
		out = append(out, c)
	}
	return out
}

func (p policy) matches(st map[string]any, r iamRequest) (bool, error) {
	if !slices.ContainsFunc(strs(st["Action"]), func(a string) bool { return iampolicy.Match(strings.ToLower(a), strings.ToLower(r.Action)) }) {
		return false, nil
	}
	if !slices.ContainsFunc(st["Resource"].([]string), func(res string) bool { return iampolicy.Match(res, r.Resource) }) {
		return false, nil
	}
	cond, ok := st["Condition"].(map[string]any)
	if !ok {
		return true, nil
	}
	for op, kv := range cond {
		for k, v := range kv.(map[string]any) {
			if op == "StringEquals" && k == "kms:ViaService" {
				if !slices.Contains(strs(v), r.ViaService) {
					return false, nil
				}
				continue
			}
			if op != "ForAllValues:StringLike" || k != "dynamodb:LeadingKeys" {
				return false, fmt.Errorf("the oracle does not evaluate %s %s", op, k)
			}
			if r.LeadingKey == "" {
				continue // ForAllValues over no values holds
			}
			if !slices.ContainsFunc(strs(v), func(p string) bool { return iampolicy.Match(p, r.LeadingKey) }) {
				return false, nil
			}
		}
	}
	return true, nil
}

// allows is IAM's evaluation for one identity policy: an explicit deny
// wins, then any allow.
func (p policy) allows(r iamRequest) (bool, error) {
	allowed := false
	for _, st := range p {
		ok, err := p.matches(st, r)
		if err != nil {
			return false, err
		}
		if ok && st["Effect"] == "Deny" {
			return false, nil
		}
		allowed = allowed || ok
	}
	return allowed, nil
}

// check fails the test for every recorded request the policy does not
// allow, and logs the granted actions the run never needed.
func (p policy) check(t *testing.T, who string, reqs []iamRequest, errs []string) {
	t.Helper()
	for _, e := range errs {
		t.Errorf("%s: %s", who, e)
	}
	if len(reqs) == 0 {
		t.Errorf("%s made no AWS calls: the scenario did not run it", who)
	}
	seen := map[string]bool{}
	denied := map[string]bool{}
	for _, r := range reqs {
		seen[r.Action] = true
		ok, err := p.allows(r)
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if !ok && !denied[r.String()] {
			denied[r.String()] = true
			t.Errorf("%s: denied %s", who, r)
		}
	}
	var unused []string
	for _, st := range p {
		if st["Effect"] != "Allow" {
			continue
		}
		for _, a := range strs(st["Action"]) {
			if !seen[a] && !strings.HasPrefix(a, "xray:") {
				unused = append(unused, a)
			}
		}
	}
	sort.Strings(unused)
	t.Logf("%s: %d calls allowed; granted but not exercised here: %v", who, len(reqs), unused)
}

func (r *recorder) take() ([]iamRequest, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs), slices.Clone(r.errs)
}

// functionEnv is a function's environment with every AWS endpoint at its
// recorder.
func functionEnv(info server.Info, at string) lambdaenv.Env {
	env := info.FunctionEnv()
	env.Endpoints.DynamoDB, env.Endpoints.S3, env.Endpoints.SQS, env.Endpoints.SFN, env.Endpoints.Events = at, at, at, at, at
	env.IOProps["s3.endpoint"] = at
	env.EventBus = oracleBus
	env.StateMachineARN = oracleMachine
	return env
}

// enginePolicy is the managed policy engines attach.
func enginePolicy(t *testing.T) []map[string]any { return enginePolicyIn(t, resources) }

func enginePolicyIn(t *testing.T, of func(string) map[string]map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, p := range of("AWS::IAM::ManagedPolicy") {
		for _, st := range p["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			out = append(out, st.(map[string]any))
		}
	}
	return out
}

// The evaluator itself: what the roles must not be able to do.
func TestOracleEvaluatorRefusals(t *testing.T) {
	table := "arn:aws:dynamodb:us-east-1:000000000000:table/" + server.TableName
	obj := func(k string) string { return "arn:aws:s3:::" + server.DefaultBucket + "/" + k }
	cases := []struct {
		who   string
		pol   []map[string]any
		req   iamRequest
		allow bool
	}{
		{"DeleteFn", nil, iamRequest{Action: "dynamodb:GetItem", Resource: table, LeadingKey: "JOB#demo"}, true},
		{"DeleteFn", nil, iamRequest{Action: "dynamodb:PutItem", Resource: table, LeadingKey: "GRANT#demo"}, false},
		{"DeleteFn", nil, iamRequest{Action: "dynamodb:UpdateItem", Resource: table, LeadingKey: "GRANT#demo"}, false},
		{"DeleteFn", nil, iamRequest{Action: "dynamodb:UpdateItem", Resource: table, LeadingKey: "IDEM#api"}, false},
		{"DeleteFn", nil, iamRequest{Action: "dynamodb:PutItem", Resource: table, LeadingKey: "TBL#demo#ns"}, true}, // tombstones share the table partition
		{"DeleteFn", nil, iamRequest{Action: "dynamodb:PutItem", Resource: table, LeadingKey: "CATALOG#demo"}, false},
		{"DeleteFn", nil, iamRequest{Action: "states:SendTaskSuccess", Resource: oracleMachine}, true},
		{"PurgePlanFn", nil, iamRequest{Action: "states:SendTaskSuccess", Resource: oracleMachine}, false},
		{"PurgeProgressFn", nil, iamRequest{Action: "states:SendTaskSuccess", Resource: oracleMachine}, false},
		{"DeleteFn", nil, iamRequest{Action: "s3:DeleteObject", Resource: obj("demo/t/data/x.parquet")}, true},
		{"PurgeProgressFn", nil, iamRequest{Action: "dynamodb:UpdateItem", Resource: table, LeadingKey: "JOB#demo"}, true},
		{"PurgeProgressFn", nil, iamRequest{Action: "dynamodb:UpdateItem", Resource: table, LeadingKey: "BATCH#pj-1"}, false},
		{"PurgeProgressFn", nil, iamRequest{Action: "dynamodb:GetItem", Resource: table, LeadingKey: "BATCH#pj-1"}, false},
		{"PurgePlanFn", nil, iamRequest{Action: "s3:DeleteObject", Resource: obj("demo/t/data/x.parquet")}, false},
		{"DropFn", nil, iamRequest{Action: "s3:GetObject", Resource: obj("demo/t/metadata/00000-a.metadata.json")}, false},
		{"ApiFn", nil, iamRequest{Action: "s3:PutObject", Resource: obj("demo/t/data/x.parquet")}, false},
		{"ApiFn", nil, iamRequest{Action: "s3:PutObject", Resource: obj("demo/t/metadata/00001-a.metadata.json")}, true},
		{"ApiFn", nil, iamRequest{Action: "s3:GetObject", Resource: obj("demo/t/metadata/00001-a.metadata.json")}, true},
		{"ApiFn", nil, iamRequest{Action: "s3:GetObject", Resource: obj("demo/t/data/x.parquet")}, false},
		{"ApiFn", nil, iamRequest{Action: "s3:GetObject", Resource: obj("demo/t/metadata/snap-1.avro")}, true}, // a commit's path check
		{"ApiFn", nil, iamRequest{Action: "s3:PutObject", Resource: obj("demo/t/metadata/snap-1.avro")}, false},
		{"ApiFn", nil, iamRequest{Action: "dynamodb:Scan", Resource: table}, false},
		{"ReconcileFn", nil, iamRequest{Action: "states:DescribeExecution", Resource: "arn:aws:states:us-east-1:000000000000:execution:other-machine:x"}, false},
		{"ReconcileFn", nil, iamRequest{Action: "states:DescribeExecution", Resource: "arn:aws:states:us-east-1:000000000000:execution:" + server.PurgeMachine + ":pj-1"}, true},
		{"engine", enginePolicy(t), iamRequest{Action: "s3:PutObject", Resource: obj("demo/t/data/x.parquet")}, true},
		{"engine", enginePolicy(t), iamRequest{Action: "s3:PutObject", Resource: obj("demo/t/metadata/snap-1.avro")}, true},
		{"engine", enginePolicy(t), iamRequest{Action: "s3:PutObject", Resource: obj("demo/t/metadata/00002-a.metadata.json")}, false},
		{"engine", enginePolicy(t), iamRequest{Action: "s3:DeleteObject", Resource: obj("demo/t/data/x.parquet")}, false},
	}
	// With a customer managed key: each KMS action through its services only.
	via := func(service string) string { return service + "." + oracleRegion + ".amazonaws.com" }
	otherKey := strings.Replace(byoKey, "1234abcd", "99999999", 1)
	for _, c := range []struct {
		who   string
		req   iamRequest
		allow bool
	}{
		{"ApiFn", iamRequest{Action: "kms:Decrypt", Resource: byoKey, ViaService: via("dynamodb")}, true},
		{"ApiFn", iamRequest{Action: "kms:GenerateDataKey", Resource: byoKey, ViaService: via("s3")}, true},
		{"ApiFn", iamRequest{Action: "kms:Decrypt", Resource: byoKey}, false}, // directly, not through a service
		{"ApiFn", iamRequest{Action: "kms:Decrypt", Resource: otherKey, ViaService: via("s3")}, false},
		{"ApiFn", iamRequest{Action: "kms:Decrypt", Resource: byoKey, ViaService: via("sqs")}, false},
		{"DropFn", iamRequest{Action: "kms:Decrypt", Resource: byoKey, ViaService: via("s3")}, false},
		{"DeleteFn", iamRequest{Action: "kms:GenerateDataKey", Resource: byoKey, ViaService: via("s3")}, false}, // it writes no object
		{"DeleteFn", iamRequest{Action: "kms:GenerateDataKey", Resource: byoKey, ViaService: via("sqs")}, true},
		{"PurgeProgressFn", iamRequest{Action: "kms:Encrypt", Resource: byoKey, ViaService: via("dynamodb")}, false},
		{"DeleteFn", iamRequest{Action: "s3:DeleteObject", Resource: "arn:aws:s3:::team-lake/t/data/x.parquet"}, true},
		{"DeleteFn", iamRequest{Action: "s3:DeleteObject", Resource: "arn:aws:s3:::team-lake-2/t/data/x.parquet"}, false},
	} {
		cases = append(cases, struct {
			who   string
			pol   []map[string]any
			req   iamRequest
			allow bool
		}{c.who, roleStatementsIn(t, byoResources, c.who), c.req, c.allow})
	}
	for _, c := range cases {
		stmts := c.pol
		if stmts == nil {
			stmts = roleStatements(t, c.who)
		}
		got, err := localPolicy(t, stmts).allows(c.req)
		if err != nil || got != c.allow {
			t.Errorf("%s %s: allowed %v (%v), want %v", c.who, c.req, got, err, c.allow)
		}
	}
}

// Every AWS call each function's code makes in a purge from create to
// finalize (and reconcile's restart and failure, plan's failure) is allowed
// by its role's synthesized policy.
func TestOracleFunctionCallsAllowedByTheirRoles(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{DeleteWorkers: -1, ReconcileEvery: time.Hour, RelayEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	info := srv.Info
	sfn := &fakeSFN{status: map[string]string{}}
	recs := map[string]*recorder{}
	envs := map[string]lambdaenv.Env{}
	for _, fn := range []string{"ApiFn", "DropFn", "PurgePlanFn", "PurgeProgressFn", "DeleteFn", "ReconcileFn", "RetentionFn", "OutboxFn", "engine"} {
		r, at := newRecorder(t, info, sfn)
		recs[fn], envs[fn] = r, functionEnv(info, at)
	}

	// The two router functions, as their mains build them; API Gateway
	// authenticated the caller.
	handler := func(fn string, withPurge bool) http.Handler {
		cfg, err := routerenv.RouterConfig(ctx, envs[fn], withPurge)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Authenticate = func(*http.Request) string { return server.AdminPrincipal }
		return router.New(cfg)
	}
	api, drop := handler("ApiFn", false), handler("DropFn", true)
	call := func(h http.Handler, method, path string, body any, want int, hdr ...string) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		}
		req := httptest.NewRequest(method, path, rd)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != want {
			t.Fatalf("%s %s: %d %s (want %d)", method, path, w.Code, w.Body, want)
		}
		return w.Body.Bytes()
	}
	schema := json.RawMessage(`{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","type":"long","required":false}]}`)
	create := func(name string) string {
		var out struct {
			Metadata struct {
				Location string `json:"location"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(call(api, "POST", "/v1/demo/namespaces/lp/tables", map[string]any{"name": name, "schema": schema}, 200), &out)
		return out.Metadata.Location
	}

	// api: the catalog's routes.
	call(api, "GET", "/v1/config?warehouse=demo", nil, 200)
	call(api, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"lp"}}, 200, "Idempotency-Key", "k-ns")
	call(api, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"lp"}}, 200, "Idempotency-Key", "k-ns")
	call(api, "PUT", "/lifecycle/v1/catalogs/demo/grants/local:etl", map[string]any{"privileges": []string{"TABLE_READ"}}, 200)
	loc := create("t1")
	create("t2")
	create("t3")
	create("t4")

	// engine: data files, a manifest and a manifest list, as an engine
	// writes them (iceberg-go's writers), with the engine policy.
	ecfg, err := awsconfig.Load(ctx, envs["engine"].Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	engine := awsconfig.S3(ecfg, envs["engine"].Endpoints)
	put := func(uri string, data []byte) {
		t.Helper()
		k := strings.TrimPrefix(uri, "s3://"+server.DefaultBucket+"/")
		if _, err := engine.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(server.DefaultBucket), Key: aws.String(k), Body: bytes.NewReader(data)}); err != nil {
			t.Fatal(err)
		}
	}
	sid := int64(1)
	var mbuf bytes.Buffer
	sch := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "x", Type: iceberg.PrimitiveTypes.Int64})
	mw, err := iceberg.NewManifestWriter(2, &mbuf, *iceberg.UnpartitionedSpec, sch, sid)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		path := fmt.Sprintf("%s/data/%05d.parquet", loc, i)
		df, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, path, iceberg.ParquetFile, nil, nil, nil, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		if err := mw.Add(iceberg.NewManifestEntry(iceberg.EntryStatusADDED, &sid, nil, nil, df.Build())); err != nil {
			t.Fatal(err)
		}
		put(path, []byte("data"))
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	mpath := loc + "/metadata/m-00000.avro"
	mf, err := mw.ToManifestFile(mpath, int64(mbuf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	put(mpath, mbuf.Bytes())
	var lbuf bytes.Buffer
	if err := iceberg.WriteManifestList(2, &lbuf, sid, nil, &sid, 0, []iceberg.ManifestFile{mf}); err != nil {
		t.Fatal(err)
	}
	lpath := loc + "/metadata/snap-00001.avro"
	put(lpath, lbuf.Bytes())

	// api: the commit (the catalog writes the metadata file), reads.
	call(api, "POST", "/v1/demo/namespaces/lp/tables/t1", map[string]any{"requirements": []any{}, "updates": []any{
		map[string]any{"action": "add-snapshot", "snapshot": map[string]any{"snapshot-id": sid, "sequence-number": sid,
			"timestamp-ms": time.Now().UnixMilli(), "manifest-list": lpath, "summary": map[string]string{"operation": "append"}, "schema-id": 0}},
		map[string]any{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": sid},
	}}, 200)
	call(api, "GET", "/v1/demo/namespaces/lp/tables/t1", nil, 200)
	call(api, "GET", "/v1/demo/namespaces/lp/tables", nil, 200)
	call(api, "POST", "/v1/demo/tables/rename", map[string]any{
		"source":      map[string]any{"namespace": []string{"lp"}, "name": "t3"},
		"destination": map[string]any{"namespace": []string{"lp"}, "name": "t3b"}}, 204)
	call(api, "POST", "/v1/demo/namespaces/lp/register", map[string]any{"name": "r", "metadata-location": loc + "/metadata/99999-missing.metadata.json"}, 400)
	// A catalog in a bucket no role covers is refused, with no AWS call
	// beyond its authorization.
	call(api, "POST", "/lifecycle/v1/catalogs", map[string]any{"name": "elsewhere", "warehouse": "s3://team-lake-not-covered/x"}, 400)

	// drop: DELETE …/tables/{t} is the drop function's, with or without purge.
	call(drop, "DELETE", "/v1/demo/namespaces/lp/tables/t3b", nil, 204)
	call(drop, "DELETE", "/v1/demo/namespaces/lp/tables/t1?purgeRequested=true", nil, 204)
	call(drop, "DELETE", "/v1/demo/namespaces/lp/tables/t2?purgeRequested=true", nil, 204)
	call(drop, "DELETE", "/v1/demo/namespaces/lp/tables/t4?purgeRequested=true", nil, 204)
	call(drop, "DELETE", "/v1/demo/namespaces/lp/tables/t4?purgeRequested=true", nil, 404)
	var jobs []purge.Input
	sfn.mu.Lock()
	started := slices.Clone(sfn.started)
	sfn.mu.Unlock()
	for _, s := range started {
		var in purge.Input
		if err := json.Unmarshal([]byte(s.Input), &in); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, in)
	}
	if len(jobs) != 3 {
		t.Fatalf("%d executions started, want 3", len(jobs))
	}
	j1, j2, j4 := jobs[0], jobs[1], jobs[2]
	call(api, "GET", "/lifecycle/v1/catalogs/demo/purge-jobs/"+j1.JobID, nil, 200)

	svc := func(fn string) *purge.Service {
		s, err := purgeenv.Purge(ctx, envs[fn])
		if err != nil {
			t.Fatal(err)
		}
		s.Metrics = io.Discard
		return s
	}
	plan, progress, reconcile := svc("PurgePlanFn"), svc("PurgeProgressFn"), svc("ReconcileFn")

	// purge-plan (it enqueues the batches) and purge-progress (the
	// WaitForBatches task storing its token) on t1's job.
	batches := 0
	for in := j1; ; {
		res, err := plan.Plan(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		batches += res.Enqueued
		if res.Planned || res.Stop {
			break
		}
		in.Cursor = res.Cursor
	}
	if batches == 0 {
		t.Fatal("no batches planned")
	}
	if _, err := progress.AwaitBatches(ctx, purge.AwaitInput{Catalog: j1.Catalog, JobID: j1.JobID, TaskToken: "token-1"}); err != nil {
		t.Fatal(err)
	}

	// delete: each batch arrives as the event source mapping delivers it
	// (its receive and delete run under the delete role too); one batch
	// is held long enough for the lease to be extended.
	denv := envs["DeleteFn"]
	denv.Queue.Visibility = 3 * time.Second
	del := svc("DeleteFn")
	dcfg, err := awsconfig.Load(ctx, denv.Endpoints)
	if err != nil {
		t.Fatal(err)
	}
	esm := awsconfig.SQS(dcfg, denv.Endpoints)
	lease, err := purgeenv.SQS(ctx, denv)
	if err != nil {
		t.Fatal(err)
	}
	var held sync.Once
	del.SetCrash(func(point string) error {
		if point == "delete.before-checkpoint" {
			held.Do(func() { time.Sleep(1500 * time.Millisecond) })
		}
		return nil
	})
	deleteFn := del.DeleteHandler(lease, purgeenv.Queue(denv))
	deliver := func(n int) {
		t.Helper()
		for b := range n {
			if _, err := esm.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(info.DeleteQueue),
				AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}}); err != nil {
				t.Fatal(err)
			}
			got, err := esm.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(info.DeleteQueue), MaxNumberOfMessages: 1,
				MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount}})
			if err != nil || len(got.Messages) != 1 {
				t.Fatalf("receive: %v %v", got, err)
			}
			m := got.Messages[0]
			ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
				Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs",
				EventSourceARN: "arn:aws:sqs:us-east-1:000000000000:" + server.DeleteQueue}}}
			raw, _ := json.Marshal(ev)
			out, err := deleteFn(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			if res := out.(events.SQSEventResponse); len(res.BatchItemFailures) > 0 {
				t.Fatalf("batch %d failed", b)
			}
			if _, err := esm.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(info.DeleteQueue), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// delete: the finalize step (invoked by the state machine).
	finalize := func(in purge.Input) {
		t.Helper()
		for range 10 {
			raw, _ := json.Marshal(purge.StepInput{Input: in})
			out, err := deleteFn(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			if out.(purge.FinalizeResult).Done {
				return
			}
		}
	}
	deliver(batches)
	finalize(j1)
	var job struct {
		State        string `json:"state"`
		FilesDeleted int    `json:"files-deleted"`
	}
	_ = json.Unmarshal(call(api, "GET", "/lifecycle/v1/catalogs/demo/purge-jobs/"+j1.JobID, nil, 200), &job)
	if job.State != "SUCCEEDED" || job.FilesDeleted < 3 {
		t.Fatalf("t1's purge ended %+v, want SUCCEEDED with its 3 data files deleted", job)
	}

	// purge-plan's failure path: t4's metadata file is gone.
	s3direct := awsconfig.S3(ecfg, awsconfig.Endpoints{S3: info.S3Endpoint, Region: oracleRegion, AccessKey: server.AccessKey, SecretKey: server.SecretKey})
	listed, err := s3direct.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(server.DefaultBucket), Prefix: aws.String("demo/lp/t4")})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range listed.Contents {
		if _, err := s3direct.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(server.DefaultBucket), Key: o.Key}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := plan.Plan(ctx, j4); err != nil || !res.Stop {
		t.Fatalf("plan of a job whose metadata is gone: %+v %v", res, err)
	}

	// reconcile on t2's job: its execution is missing (started again),
	// then failed (restarted under a new name), then failed past the
	// attempts (the job FAILS: marker, tombstone and claim go).
	reconcile.MaxAttempts = 2
	sfn.mu.Lock()
	delete(sfn.status, purge.ExecutionARN(oracleMachine, j2.JobID))
	sfn.mu.Unlock()
	for range 3 {
		if _, err := reconcile.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		sfn.mu.Lock()
		for exec := range sfn.status {
			sfn.status[exec] = "FAILED"
		}
		sfn.mu.Unlock()
	}
	_ = json.Unmarshal(call(api, "GET", "/lifecycle/v1/catalogs/demo/purge-jobs/"+j2.JobID, nil, 200), &job)
	if job.State != "FAILED" {
		t.Fatalf("t2's purge is %s after reconcile, want FAILED", job.State)
	}
	// The outbox relay, as the reconcile function's main runs it after
	// the sweep, and as the outbox function runs it on the stream.
	relay := func(fn string) int {
		t.Helper()
		st, bus, err := outboxenv.Outbox(ctx, envs[fn])
		if err != nil {
			t.Fatal(err)
		}
		n, err := outbox.Drain(ctx, st, bus)
		if err != nil {
			t.Fatalf("%s relay: %v", fn, err)
		}
		return n
	}
	if n := relay("ReconcileFn"); n == 0 {
		t.Fatal("the reconcile relay found no event to publish")
	}

	// reconcile's orphan sweep and the delete step of an orphans job: a
	// metadata file whose request never made it current (its intent is two
	// hours old) goes through the queue like a purge.
	orphan := "s3://" + server.DefaultBucket + "/demo/lp/lost-1/metadata/00000-x.metadata.json"
	if _, err := s3direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(server.DefaultBucket),
		Key: aws.String("demo/lp/lost-1/metadata/00000-x.metadata.json"), Body: bytes.NewReader([]byte("{}"))}); err != nil {
		t.Fatal(err) // as the API function wrote it (engines may not)
	}
	if err := srv.Catalog.Store().PutIntent(ctx, store.Intent{ID: "oracle", Catalog: "demo", Files: []string{orphan},
		Created: time.Now().Add(-2 * time.Hour).UnixNano()}); err != nil {
		t.Fatal(err)
	}
	rep, err := reconcile.Reconcile(ctx)
	if err != nil || len(rep.Orphans.Jobs) != 1 {
		t.Fatalf("orphan sweep: %+v %v, want one job", rep.Orphans, err)
	}
	oj := purge.Input{Catalog: "demo", JobID: rep.Orphans.Jobs[0]}
	if res, err := plan.Plan(ctx, oj); err != nil || !res.Planned || res.Enqueued != 1 {
		t.Fatalf("plan of the orphans job: %+v %v", res, err)
	}
	deliver(1)
	finalize(oj)
	_ = json.Unmarshal(call(api, "GET", "/lifecycle/v1/catalogs/demo/purge-jobs/"+oj.JobID, nil, 200), &job)
	if job.State != "SUCCEEDED" || job.FilesDeleted != 1 {
		t.Fatalf("orphans job ended %+v, want SUCCEEDED with the file deleted", job)
	}
	if n := relay("OutboxFn"); n == 0 {
		t.Fatal("the outbox function found no event to publish")
	}

	// retention: the sweep, its clock ten days on, drops an expired day of
	// a table with a P7D policy (a manifest, a list and a metadata file
	// written), then expires the two snapshots before its drop: the commit
	// creates a job of kind expire with its batch, and the sweep starts the
	// machine on it; the job then goes through plan, the queue and delete
	// like a purge (the data file, its manifest, the two manifest lists).
	var created struct {
		Metadata struct {
			Location string `json:"location"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(call(api, "POST", "/v1/demo/namespaces/lp/tables", map[string]any{"name": "ev",
		"schema":         json.RawMessage(`{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"ts","type":"timestamptz","required":false}]}`),
		"partition-spec": map[string]any{"spec-id": 0, "fields": []any{map[string]any{"source-id": 1, "field-id": 1000, "name": "ts_day", "transform": "day"}}},
	}, 200), &created)
	evLoc := created.Metadata.Location
	daySpec := iceberg.NewPartitionSpec(iceberg.PartitionField{SourceIDs: []int{1}, FieldID: 1000, Name: "ts_day", Transform: iceberg.DayTransform{}})
	evSchema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz})
	later := time.Now().Add(10 * 24 * time.Hour)
	var evbuf bytes.Buffer
	ew, err := iceberg.NewManifestWriter(2, &evbuf, daySpec, evSchema, 1)
	if err != nil {
		t.Fatal(err)
	}
	evData := evLoc + "/data/ts_day=old/00000.parquet"
	edf, err := iceberg.NewDataFileBuilder(daySpec, iceberg.EntryContentData, evData, iceberg.ParquetFile,
		map[int]any{1000: iceberg.Date(time.Now().Unix()/86400 - 20)}, map[int]string{1000: "date"}, nil, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := ew.Add(iceberg.NewManifestEntry(iceberg.EntryStatusADDED, new(int64(1)), nil, nil, edf.Build())); err != nil {
		t.Fatal(err)
	}
	put(evData, []byte("data"))
	if err := ew.Close(); err != nil {
		t.Fatal(err)
	}
	emf, err := ew.ToManifestFile(evLoc+"/metadata/m-ev.avro", int64(evbuf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	put(evLoc+"/metadata/m-ev.avro", evbuf.Bytes())
	var evUpdates []any
	evManifests := []iceberg.ManifestFile{emf}
	for _, sn := range []struct{ id int64 }{{1}, {2}} {
		var lb bytes.Buffer
		var parent *int64
		if sn.id > 1 {
			parent = new(sn.id - 1)
		}
		if err := iceberg.WriteManifestList(2, &lb, sn.id, parent, new(sn.id), 0, evManifests); err != nil {
			t.Fatal(err)
		}
		// The next list carries the manifest with its sequence number assigned.
		if evManifests, err = iceberg.ReadManifestList(bytes.NewReader(lb.Bytes())); err != nil {
			t.Fatal(err)
		}
		lp := fmt.Sprintf("%s/metadata/snap-ev-%d.avro", evLoc, sn.id)
		put(lp, lb.Bytes())
		snap := map[string]any{"snapshot-id": sn.id, "sequence-number": sn.id, "timestamp-ms": time.Now().UnixMilli(), "manifest-list": lp,
			"summary": map[string]string{"operation": "append"}, "schema-id": 0}
		if parent != nil {
			snap["parent-snapshot-id"] = *parent
		}
		evUpdates = append(evUpdates, map[string]any{"action": "add-snapshot", "snapshot": snap})
	}
	evUpdates = append(evUpdates, map[string]any{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 2})
	call(api, "POST", "/v1/demo/namespaces/lp/tables/ev", map[string]any{"requirements": []any{}, "updates": evUpdates}, 200)
	if _, err := srv.Partitions.SetRetention(ctx, "demo", catalog.Ident{Namespace: []string{"lp"}, Name: "ev"}, "ts_day", "P7D"); err != nil {
		t.Fatal(err)
	}
	retention, err := partitionsenv.Partitions(ctx, envs["RetentionFn"])
	if err != nil {
		t.Fatal(err)
	}
	sweep, err := retention.SweepRetention(ctx, later, 0)
	if err != nil || sweep.Dropped != 1 || sweep.SnapshotsExpired != 2 || len(sweep.ExpireJobs) != 1 || len(sweep.Failed) > 0 {
		t.Fatalf("retention sweep: %+v %v, want a drop and an expire job", sweep, err)
	}
	ej := purge.Input{Catalog: "demo", JobID: sweep.ExpireJobs[0]}
	if res, err := plan.Plan(ctx, ej); err != nil || !res.Planned || res.Enqueued != 1 {
		t.Fatalf("plan of the expire job: %+v %v", res, err)
	}
	deliver(1)
	finalize(ej)
	_ = json.Unmarshal(call(api, "GET", "/lifecycle/v1/catalogs/demo/purge-jobs/"+ej.JobID, nil, 200), &job)
	if job.State != "SUCCEEDED" || job.FilesDeleted != 4 {
		t.Fatalf("expire job ended %+v, want SUCCEEDED with 4 files deleted", job)
	}

	// Every call of every function, against its role: in the stack that
	// made its bucket, and in the one over existing buckets (the local
	// server's among them) with a customer managed key, where each call
	// also needs the KMS actions its service asks for on its behalf.
	for fn, r := range recs {
		reqs, errs := r.take()
		stmts, byoStmts := enginePolicy(t), enginePolicyIn(t, byoResources)
		if fn != "engine" {
			stmts, byoStmts = roleStatements(t, fn), roleStatementsIn(t, byoResources, fn)
		}
		localPolicy(t, stmts).check(t, fn, reqs, errs)
		localPolicy(t, byoStmts).check(t, fn+" (existing buckets, customer managed key)", append(reqs, kmsRequests(reqs, byoKey)...), errs)
	}
	// And the run reached what the narrowed grants are about.
	for fn, actions := range map[string][]string{
		"DeleteFn":    {"s3:DeleteObject", "s3:ListBucket", "sqs:ChangeMessageVisibility", "dynamodb:Query", "dynamodb:PutItem"},
		"ReconcileFn": {"states:DescribeExecution", "states:StartExecution", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:PutItem", "events:PutEvents"},
		"PurgePlanFn": {"dynamodb:BatchWriteItem", "s3:GetObject", "dynamodb:PutItem"},
		"OutboxFn":    {"dynamodb:Query", "dynamodb:DeleteItem", "events:PutEvents"},
		"ApiFn":       {"s3:PutObject"},
		"DropFn":      {"states:StartExecution", "dynamodb:PutItem"},
		"RetentionFn": {"states:StartExecution", "dynamodb:BatchWriteItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "s3:PutObject", "s3:GetObject"},
	} {
		reqs, _ := recs[fn].take()
		for _, a := range actions {
			if !slices.ContainsFunc(reqs, func(r iamRequest) bool { return r.Action == a }) {
				t.Errorf("%s never called %s: the scenario missed a path", fn, a)
			}
		}
	}
}
