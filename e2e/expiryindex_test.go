package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/store"
)

// putExpiryEntry writes an item of the hold-expiry index straight into the
// store, as one left behind by an earlier version would be.
func putExpiryEntry(t *testing.T, srv *server.Server, sk string, attrs map[string]string) {
	t.Helper()
	ctx := context.Background()
	ep := awsconfig.Endpoints{DynamoDB: srv.Info.DynamoDB, Region: srv.Info.Region, AccessKey: srv.Info.AccessKey, SecretKey: srv.Info.SecretKey}
	cfg, err := awsconfig.Load(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	item := map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "SOFTEXP"}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk},
	}
	for k, v := range attrs {
		item[k] = &ddbtypes.AttributeValueMemberS{Value: v}
	}
	if _, err := awsconfig.DynamoDB(cfg, ep).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(server.TableName), Item: item}); err != nil {
		t.Fatal(err)
	}
}

// Defect: the hold-expiry sweep counted and kept index entries whose record
// was gone; 250 of them ahead of a due record kept it from expiring in every
// run (bounded at 100). Stale entries are removed and count towards no bound.
func TestHoldExpiryRemovesStaleEntries(t *testing.T) {
	localOnly(t)
	ctx := context.Background()
	srv, _ := ownServer(t, server.Options{Dir: memoryDir, DeleteWorkers: -1, ReconcileEvery: time.Hour})
	st := srv.Catalog.Store()
	if _, err := srv.Catalog.CreateCatalog(authz.WithPrincipal(ctx, "local:admin"), "stale", "s3://icehold-warehouse/stale",
		map[string]string{"soft-delete.enabled": "true", "soft-delete.purge-on-expiry": "false"}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Catalog.CreateNamespace(ctx, "stale", []string{"ns"}, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 250 {
		uuid := fmt.Sprintf("gone-%04d", i)
		putExpiryEntry(t, srv, store.ExpiryTime(start.Add(-time.Hour))+"#stale#"+uuid, map[string]string{"catalog": "stale", "table_uuid": uuid})
	}
	drop := func(name string, purgeAt time.Time, held bool) {
		e := store.TableEntry{Namespace: []string{"ns"}, Name: name, MetadataLocation: "s3://icehold-warehouse/stale/" + name + "/m.json", TableUUID: "u-" + name}
		if _, err := st.WriteTables(ctx, "stale", []store.TableWrite{{Entry: e}}); err != nil {
			t.Fatal(err)
		}
		if err := st.SoftDelete(ctx, "stale", e, store.SoftDeleted{PurgeAt: store.ExpiryTime(purgeAt), LegalHold: held}); err != nil {
			t.Fatal(err)
		}
	}
	drop("due", start, false)
	drop("held", start.Add(-time.Hour), true)
	heldEntry(t, srv, st)

	sweep := &softdelete.Service{Catalog: srv.Catalog, Now: func() time.Time { return start.Add(2 * time.Hour) }}
	for run := 1; ; run++ {
		rep, err := sweep.Expire(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: %+v", run, rep)
		if !rep.More {
			break
		}
		if run == 5 {
			t.Fatal("the sweep does not get past the stale entries")
		}
	}
	left, _, err := st.ListSoftDeleted(ctx, "stale", nil, "", 10)
	if err != nil || len(left) != 1 || left[0].Entry.Name != "held" || !left[0].LegalHold {
		t.Errorf("records left: %+v (%v), want only the held one", left, err)
	}
	if due, _, err := st.ExpiredBefore(ctx, start.AddDate(10, 0, 0), "", 10); err != nil || len(due) != 0 {
		t.Errorf("index entries left: %+v (%v)", due, err)
	}
}

// heldEntry writes an index entry for the held record (which has none: a
// stale one, from a hold set by an earlier version).
func heldEntry(t *testing.T, srv *server.Server, st *store.Store) {
	t.Helper()
	recs, err := st.SoftDeletedByName(context.Background(), "stale", []string{"ns"}, "held")
	if err != nil || len(recs) != 1 {
		t.Fatalf("held record: %+v (%v)", recs, err)
	}
	r := recs[0]
	putExpiryEntry(t, srv, r.PurgeAt+"#stale#"+r.Entry.TableUUID+"#"+r.Generation,
		map[string]string{"catalog": "stale", "table_uuid": r.Entry.TableUUID, "generation": r.Generation})
}
