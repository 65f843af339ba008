package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/local/server"
)

// awsCLI runs the AWS CLI against one of the local server's endpoints and
// decodes its JSON answer (nil for none).
func awsCLI(t *testing.T, endpoint string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command("aws", append([]string{"--endpoint-url", endpoint, "--output", "json"}, args...)...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION="+server.Region,
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	if len(strings.TrimSpace(string(out))) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("aws %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return m
}

// needAWSCLI skips without the aws binary (it is on every CI machine: there
// its absence fails).
func needAWSCLI(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("aws"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the aws CLI is not on PATH (CI=true requires it)")
		}
		t.Skip("the aws CLI is not on PATH")
	}
}

// The operator's flows of docs/operations.md, with the real AWS CLI against
// the local server (the same commands as against AWS, plus --endpoint-url):
// a purge whose deletes a bucket policy denies dead-letters; get-queue-
// attributes shows the DLQ depth; start-message-move-task (the console's DLQ
// redrive) moves the batches back once the policy is gone and the job ends
// SUCCEEDED; list-executions, describe-execution and get-execution-history
// show its execution; dynamodb query reads its record.
func TestOperatorFlowsWithTheAWSCLI(t *testing.T) {
	needAWSCLI(t)
	if awstest.External() != "" {
		// moto 5.2 answers StartMessageMoveTask with an internal error.
		awstest.Skip(t, "the redrive needs the embedded SQS")
	}
	srv := localOnly(t)
	info := srv.Info
	cat := client(t, shared.Token)
	ns := newNamespace(t, "operator")
	tbl := writtenTable(t, cat, ns, "t", nil, false)
	data, meta := reachable(t, tbl)

	policy, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []map[string]any{{
		"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
		"Resource": "arn:aws:s3:::" + info.Bucket + "/*/" + ns + "/*",
	}}})
	awsCLI(t, info.S3Endpoint, "s3api", "put-bucket-policy", "--bucket", info.Bucket, "--policy", string(policy))
	policyOn := true
	defer func() {
		if policyOn {
			awsCLI(t, info.S3Endpoint, "s3api", "delete-bucket-policy", "--bucket", info.Bucket)
		}
	}()
	job := dropPurge(t, ns, "t")
	dead := waitJob(t, job.ID, "DEAD_LETTERED", time.Minute)
	if dead.LastError == nil || !strings.Contains(*dead.LastError, "AccessDenied") {
		t.Fatalf("dead-lettered job lacks its reason: %+v", dead)
	}

	// The DLQ depth, as the dashboard's alarm reads it.
	deadline := time.Now().Add(time.Minute)
	for {
		a := awsCLI(t, info.SQS, "sqs", "get-queue-attributes", "--queue-url", info.DeleteDLQ,
			"--attribute-names", "ApproximateNumberOfMessages", "QueueArn")["Attributes"].(map[string]any)
		if a["QueueArn"] != info.DLQARN {
			t.Fatalf("DLQ arn %v, want %s", a["QueueArn"], info.DLQARN)
		}
		if fmt.Sprint(a["ApproximateNumberOfMessages"]) == fmt.Sprint(dead.BatchesTotal) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("DLQ depth %v, want %d", a["ApproximateNumberOfMessages"], dead.BatchesTotal)
		}
		time.Sleep(100 * time.Millisecond)
	}

	awsCLI(t, info.S3Endpoint, "s3api", "delete-bucket-policy", "--bucket", info.Bucket)
	policyOn = false
	task := awsCLI(t, info.SQS, "sqs", "start-message-move-task", "--source-arn", info.DLQARN)
	if task["TaskHandle"] == nil {
		t.Fatalf("start-message-move-task answered %v", task)
	}
	done := waitJob(t, job.ID, "SUCCEEDED", time.Minute)
	if done.BatchesDead != 0 || done.FilesDeleted != int64(len(data)+len(meta)) {
		t.Errorf("after the redrive: %+v, want %d files deleted and no dead batch", done, len(data)+len(meta))
	}
	assertGone(t, data, meta)
	tasks := awsCLI(t, info.SQS, "sqs", "list-message-move-tasks", "--source-arn", info.DLQARN)["Results"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["Status"] != "COMPLETED" {
		t.Errorf("list-message-move-tasks: %v, want one COMPLETED task", tasks)
	}
	queues := awsCLI(t, info.SQS, "sqs", "list-queues")["QueueUrls"].([]any)
	if !slices.Contains(queues, any(info.DeleteQueue)) || !slices.Contains(queues, any(info.DeleteDLQ)) {
		t.Errorf("list-queues: %v, want the delete queue and its DLQ", queues)
	}

	// The execution of the purge: the job's id is its name.
	machines := awsCLI(t, info.StepFns, "stepfunctions", "list-state-machines")["stateMachines"].([]any)
	if len(machines) != 1 || machines[0].(map[string]any)["stateMachineArn"] != info.Machine {
		t.Fatalf("list-state-machines: %v, want %s", machines, info.Machine)
	}
	var execARN string
	for _, x := range awsCLI(t, info.StepFns, "stepfunctions", "list-executions", "--state-machine-arn", info.Machine,
		"--status-filter", "SUCCEEDED")["executions"].([]any) {
		if x := x.(map[string]any); strings.HasPrefix(x["name"].(string), job.ID) {
			execARN = x["executionArn"].(string)
		}
	}
	if execARN == "" {
		t.Fatalf("list-executions shows no SUCCEEDED execution of job %s", job.ID)
	}
	if d := awsCLI(t, info.StepFns, "stepfunctions", "describe-execution", "--execution-arn", execARN); d["status"] != "SUCCEEDED" ||
		!strings.Contains(d["input"].(string), job.ID) {
		t.Errorf("describe-execution: %v", d)
	}
	events := awsCLI(t, info.StepFns, "stepfunctions", "get-execution-history", "--execution-arn", execARN, "--reverse-order",
		"--max-items", "1")["events"].([]any)
	if len(events) != 1 || events[0].(map[string]any)["type"] != "ExecutionSucceeded" {
		t.Errorf("the last history event: %v, want ExecutionSucceeded", events)
	}

	// The job's record, straight from the table.
	tables := awsCLI(t, info.DynamoDB, "dynamodb", "list-tables")["TableNames"].([]any)
	if !slices.Contains(tables, any(info.Table)) {
		t.Errorf("list-tables: %v, want %s", tables, info.Table)
	}
	if d := awsCLI(t, info.DynamoDB, "dynamodb", "describe-table", "--table-name", info.Table)["Table"].(map[string]any); d["TableStatus"] != "ACTIVE" {
		t.Errorf("describe-table: %v", d)
	}
	keys, _ := json.Marshal(map[string]any{":pk": map[string]string{"S": "JOB#" + shared.Catalog}, ":sk": map[string]string{"S": "J#" + job.ID}})
	q := awsCLI(t, info.DynamoDB, "dynamodb", "query", "--table-name", info.Table,
		"--key-condition-expression", "pk = :pk AND sk = :sk", "--expression-attribute-values", string(keys))
	items := q["Items"].([]any)
	if len(items) != 1 || fmt.Sprint(q["Count"]) != "1" {
		t.Fatalf("dynamodb query of the job record: %v", q)
	}
	if state := items[0].(map[string]any)["state"]; fmt.Sprint(state) != "map[S:SUCCEEDED]" {
		t.Errorf("the job record's state: %v, want SUCCEEDED", state)
	}
}
