package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
)

// What `make run` runs: the server on 127.0.0.1:8181 answers /v1/config with
// the admin token it wrote to local.json, and prints how to connect.
func TestMakeRunServesConfig(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- execute(ctx, []string{"local", "--dir", dir}, &out, io.Discard) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("local server: %v", err)
			}
		}
	}
	defer stop()

	var info server.Info
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "local.json"))
		if err == nil && json.Unmarshal(raw, &info) == nil {
			break
		}
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("local server stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no local.json")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.RESTURL != "http://127.0.0.1:8181" || info.AdminToken == "" || info.S3Endpoint == "" || info.Bucket == "" || info.Region == "" || info.Catalog != "demo" {
		t.Errorf("local.json lacks connection details: %+v", info)
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:8181/v1/config?warehouse=demo", nil)
	req.Header.Set("Authorization", "Bearer "+info.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var cfg struct {
		Defaults  map[string]string `json:"defaults"`
		Overrides map[string]string `json:"overrides"`
	}
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&cfg) != nil {
		t.Fatalf("config: status %d", res.StatusCode)
	}
	if cfg.Overrides["prefix"] != "demo" || cfg.Defaults["s3.endpoint"] != info.S3Endpoint || cfg.Defaults["s3.delete-enabled"] != "false" {
		t.Errorf("config does not hand out the local S3 settings: %+v", cfg)
	}
	stop() // the start-up text is read only once the server is done writing
	for _, want := range []string{info.AdminToken, "PyIceberg", "Spark", "iceberg-go"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("start-up text does not mention %q", want)
		}
	}
}

// A port another program holds stops make run with the flag that moves it.
func TestBusyPortNamesTheFlag(t *testing.T) {
	isolate(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	_, _, err = cli("local", "--dir", t.TempDir(), "--ports", strconv.Itoa(port))
	for _, want := range []string{"address already in use", "--ports " + strconv.Itoa(port), "--ports BASE", "make run PORTS=BASE"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a busy port: %v, want it to say %q", err, want)
		}
	}
}

// local env's exports reach every AWS service of the server on its one
// edge port, under the deployed stack's names; local run runs a schedule
// now and says what it did.
func TestLocalEnvAndRun(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := server.Start(ctx, server.Options{Dir: dir, DeleteWorkers: -1, ReconcileEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	out, _, err := cli("local", "env", "--dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		kv, ok := strings.CutPrefix(line, "export ")
		k, v, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 {
			t.Fatalf("not an export: %q", line)
		}
		env[k] = v
	}
	if env["AWS_ENDPOINT_URL"] != srv.Info.AWSEndpoint || env["ICEHOLD_URL"] != srv.Info.RESTURL || env["ICEHOLD_TOKEN"] != srv.Info.AdminToken || env["AWS_REGION"] == "" {
		t.Fatalf("local env: %v, want the server's %+v", env, srv.Info)
	}
	ep := awsconfig.Endpoints{DynamoDB: env["AWS_ENDPOINT_URL"], SQS: env["AWS_ENDPOINT_URL"], SFN: env["AWS_ENDPOINT_URL"], S3: env["AWS_ENDPOINT_URL"],
		Region: env["AWS_REGION"], AccessKey: env["AWS_ACCESS_KEY_ID"], SecretKey: env["AWS_SECRET_ACCESS_KEY"]}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := awsconfig.DynamoDB(cfg, ep).ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil || !slices.Contains(tables.TableNames, "Icehold-Catalog") {
		t.Errorf("dynamodb on the edge port: %v %v, want Icehold-Catalog", tables, err)
	}
	queues, err := awsconfig.SQS(cfg, ep).ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("Icehold-DeleteDLQ")})
	if err != nil || len(queues.QueueUrls) != 1 {
		t.Errorf("sqs on the edge port: %v %v, want the DLQ", queues, err)
	}
	machines, err := awsconfig.SFN(cfg, ep).ListStateMachines(ctx, &sfn.ListStateMachinesInput{})
	if err != nil || len(machines.StateMachines) != 1 || aws.ToString(machines.StateMachines[0].Name) != "Icehold-purge" {
		t.Errorf("stepfunctions on the edge port: %v %v, want Icehold-purge", machines, err)
	}
	if _, err := awsconfig.S3(cfg, ep).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(srv.Info.Bucket)}); err != nil {
		t.Errorf("s3 on the edge port: %v", err)
	}

	for _, name := range server.Schedules {
		out, _, err := cli("local", "run", name, "--dir", dir)
		if err != nil || !strings.HasPrefix(out, name+" ran: ") {
			t.Errorf("local run %s: %v\n%s", name, err, out)
		}
	}
	if _, _, err := cli("local", "run", "nightly", "--dir", dir); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "retention, hold-expiry, reconcile, orphans") {
		t.Errorf("local run of an unknown schedule: %v, want a usage error naming the schedules", err)
	}
	// The route takes the admin token only.
	alice, err := srv.AddToken("user:alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli("local", "run", "retention", "--dir", dir, "--token", alice); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("local run with a non-admin token: %v, want 403", err)
	}
}
