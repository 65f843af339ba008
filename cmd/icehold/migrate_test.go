package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

// icehold migrate ownership against a store holding entries from before the
// ownership index: the older of two entries on one location claims it, the
// younger is reported as owning nothing; a second run claims nothing more.
func TestMigrateOwnership(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{DeleteWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	meta := createTable(t, srv, "old")
	// Two legacy entries (no claim) on one metadata file, the "copy" younger.
	st := srv.Catalog.Store()
	for i, name := range []string{"legacy", "legacy_copy"} {
		e := store.TableEntry{Namespace: []string{"ops"}, Name: name, MetadataLocation: meta, TableUUID: "u",
			CreatedAt: time.Date(2026, 1, 1+i, 0, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)}
		if _, err := st.WriteTables(ctx, "demo", []store.TableWrite{{Entry: e}}); err != nil {
			t.Fatal(err)
		}
	}
	// The original owner lets go of the location (a drop that keeps files).
	if _, err := srv.Catalog.DropTable(ctx, "demo", catalog.Ident{Namespace: []string{"ops"}, Name: "old"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", server.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", server.SecretKey)
	args := []string{"ownership", "--table", server.TableName, "--region", server.Region,
		"--dynamodb-endpoint", srv.Info.DynamoDB, "--s3-endpoint", srv.Info.S3Endpoint}
	for run, wantTables := range []int{1, 0} {
		var out bytes.Buffer
		if err := execute(ctx, append([]string{"migrate"}, args...), &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		var rep catalog.OwnershipReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("report %s: %v", out.String(), err)
		}
		if rep.Tables != wantTables || len(rep.Conflicts) != 1 || !strings.Contains(rep.Conflicts[0], "legacy_copy of catalog demo owns nothing: location") {
			t.Errorf("run %d: %+v, want %d claimed and the copy reported", run, rep, wantTables)
		}
	}
	for name, owns := range map[string]bool{"legacy": true, "legacy_copy": false} {
		e, err := st.GetTable(ctx, "demo", []string{"ops"}, name)
		if err != nil || (e.Hold != nil) != owns {
			t.Errorf("%s: hold %+v (%v), want owning %v", name, e.Hold, err, owns)
		}
	}
	t.Setenv("ICEHOLD_TABLE", "")
	if err := execute(ctx, []string{"migrate", "ownership"}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("no --table: no error")
	}
}

// createTable makes ops.<name> through the API and returns its metadata location.
func createTable(t *testing.T, srv *server.Server, name string) string {
	t.Helper()
	ctx := context.Background()
	_, _ = srv.Catalog.CreateNamespace(ctx, "demo", []string{"ops"}, nil)
	schema := []byte(`{"name":"` + name + `","schema":{"type":"struct","schema-id":0,"fields":[{"id":1,"name":"x","type":"long","required":false}]}}`)
	var req catalog.CreateTableRequest
	if err := json.Unmarshal(schema, &req); err != nil {
		t.Fatal(err)
	}
	res, err := srv.Catalog.CreateTable(ctx, "demo", []string{"ops"}, req)
	if err != nil {
		t.Fatal(err)
	}
	return res.MetadataLocation
}

// icehold migrate children against namespaces from before the counter: a
// namespace whose counter says 0 but holds a table and a child namespace is
// counted 2, so dropping the table and the child lets it drop (uncounted,
// the decrements would leave it at -2 and it could never be dropped).
func TestMigrateChildren(t *testing.T) {
	ctx := context.Background()
	srv, err := server.Start(ctx, server.Options{DeleteWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	createTable(t, srv, "t")
	if _, err := srv.Catalog.CreateNamespace(ctx, "demo", []string{"ops", "kid"}, nil); err != nil {
		t.Fatal(err)
	}
	st := srv.Catalog.Store()
	if err := st.SetChildren(ctx, "demo", []string{"ops"}, 0); err != nil { // as before the counter
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", server.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", server.SecretKey)
	var out bytes.Buffer
	if err := execute(ctx, []string{"migrate", "children", "--table", server.TableName, "--region", server.Region,
		"--endpoint-url", srv.Info.DynamoDB}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"namespaces"`) {
		t.Errorf("report: %s", out.String())
	}
	if err := srv.Catalog.DropNamespace(ctx, "demo", []string{"ops"}); !errors.Is(err, catalog.ErrNamespaceNotEmpty) {
		t.Fatalf("drop of a namespace holding a table: %v, want not empty", err)
	}
	if _, err := srv.Catalog.DropTable(ctx, "demo", catalog.Ident{Namespace: []string{"ops"}, Name: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Catalog.DropNamespace(ctx, "demo", []string{"ops", "kid"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Catalog.DropNamespace(ctx, "demo", []string{"ops"}); err != nil {
		t.Errorf("drop of the emptied namespace: %v", err)
	}
}

// icehold migrate status names the migrations a store has had and the
// command each pending one needs.
func TestMigrateStatus(t *testing.T) {
	ctx := context.Background()
	srv := migrateServer(t)
	status := func() (rep struct{ Done, Pending []string }) {
		t.Helper()
		if err := runMigrateCmd(t, srv, "status", &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// The local server runs both at start.
	if rep := status(); len(rep.Done) != 2 || len(rep.Pending) != 0 {
		t.Errorf("status of a started local store: %+v, want both done", rep)
	}
	ep := awsconfig.Endpoints{DynamoDB: srv.Info.DynamoDB, Region: server.Region, AccessKey: server.AccessKey, SecretKey: server.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	// As a store from before the ownership index: its marker absent.
	if _, err := awsconfig.DynamoDB(cfg, ep).DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(server.TableName), Key: map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "MIGRATION"}, "sk": &ddbtypes.AttributeValueMemberS{Value: catalog.OwnershipMigration},
	}}); err != nil {
		t.Fatal(err)
	}
	if rep := status(); len(rep.Done) != 1 || len(rep.Pending) != 1 || !strings.Contains(rep.Pending[0], "icehold migrate ownership") {
		t.Errorf("status without the ownership marker: %+v, want it pending with its command", rep)
	}
}

// icehold migrate teardown-check passes on a store with nothing in flight and
// fails naming each unfinished job and soft-deleted table otherwise (what a
// cdk destroy would strand).
func TestMigrateTeardownCheck(t *testing.T) {
	ctx := context.Background()
	srv := migrateServer(t)
	check := func() (catalog.TeardownReport, error) {
		t.Helper()
		var rep catalog.TeardownReport
		err := runMigrateCmd(t, srv, "teardown-check", &rep)
		return rep, err
	}
	if rep, err := check(); err != nil || !rep.Empty() {
		t.Fatalf("a store with nothing in flight: %+v %v, want empty and no error", rep, err)
	}
	createTable(t, srv, "kept")
	createTable(t, srv, "purged")
	// The purge's plan waits until the test ends: its job is unfinished
	// whenever the check runs.
	hold := make(chan struct{})
	defer close(hold) // before srv.Close, which waits for the pipeline
	srv.Purge.SetCrash(func(point string) error {
		if point == "plan.start" {
			<-hold
		}
		return nil
	})
	drop := func(path string) http.Header {
		t.Helper()
		req, _ := http.NewRequest("DELETE", srv.Info.RESTURL+path, nil)
		req.Header.Set("Authorization", "Bearer "+srv.Info.AdminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 204 {
			t.Fatalf("DELETE %s: %v %v", path, err, res)
		}
		return res.Header
	}
	drop("/v1/demo/namespaces/ops/tables/kept") // soft (the demo catalog's default)
	createTable(t, srv, "held")
	drop("/v1/demo/namespaces/ops/tables/held")
	heldUUID := ""
	if recs, err := srv.Catalog.Store().SoftDeletedByName(ctx, "demo", []string{"ops"}, "held"); err == nil && len(recs) == 1 {
		heldUUID = recs[0].Entry.TableUUID
	}
	if _, err := srv.SoftDelete.SetLegalHold(ctx, "demo", heldUUID, "", true); err != nil {
		t.Fatal(err)
	}
	job := drop("/v1/demo/namespaces/ops/tables/purged?purgeRequested=true").Get("Icehold-Purge-Job")
	rep, err := check()
	if err == nil || !strings.Contains(err.Error(), "strand 1 unfinished jobs") || !strings.Contains(err.Error(), "and 1 soft-deleted") {
		t.Errorf("check with a job in flight and a soft-deleted table: %v", err)
	}
	if len(rep.Jobs) != 1 || !strings.Contains(rep.Jobs[0], job) || !strings.Contains(rep.Jobs[0], "ops.purged") {
		t.Errorf("unfinished jobs %v, want %s of ops.purged", rep.Jobs, job)
	}
	if len(rep.SoftDeleted) != 1 || !strings.Contains(rep.SoftDeleted[0], "table ops.kept") {
		t.Errorf("soft-deleted %v, want ops.kept", rep.SoftDeleted)
	}
	if len(rep.Held) != 1 || !strings.Contains(rep.Held[0], "table ops.held") {
		t.Errorf("legal-held %v, want ops.held (listed apart: it strands nothing)", rep.Held)
	}
}

// migrateServer is a local server for the migrate commands, with the local
// account's keys in the environment (the commands sign as the operator).
func migrateServer(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.Start(context.Background(), server.Options{DeleteWorkers: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", server.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", server.SecretKey)
	return srv
}

// runMigrateCmd runs `icehold migrate SUB` against srv's store, decodes its
// JSON report into report and returns the command's error.
func runMigrateCmd(t *testing.T, srv *server.Server, sub string, report any) error {
	t.Helper()
	var out bytes.Buffer
	err := execute(context.Background(), []string{"migrate", sub, "--table", server.TableName, "--region", server.Region,
		"--endpoint-url", srv.Info.DynamoDB}, &out, io.Discard)
	if jerr := json.Unmarshal(out.Bytes(), report); jerr != nil {
		t.Fatalf("migrate %s report %q: %v (%v)", sub, out.String(), jerr, err)
	}
	return err
}
