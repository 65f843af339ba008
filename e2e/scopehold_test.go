package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	icecat "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/softdelete"
)

// A legal hold on a namespace (here the parent of the tables' namespace)
// or on the catalog holds every table under it on every deleting path, as
// the table's own does: drop with purge and purge-now are 409
// LegalHoldException, the hold-expiry sweep keeps the soft-deleted record,
// snapshot expiry deletes nothing. Lifting the scope's hold lets each go.
func TestScopeLegalHoldStopsEveryDelete(t *testing.T) {
	srv := localOnly(t)
	ctx := context.Background()
	for _, scope := range []string{"namespace", "catalog"} {
		t.Run(scope, func(t *testing.T) {
			catProps := map[string]string{"soft-delete.hold-period": "PT1H"}
			var nsProps iceberg.Properties
			if scope == "catalog" {
				catProps["icehold.legal-hold"] = "true"
			} else {
				nsProps = iceberg.Properties{"icehold.legal-hold": "true"}
			}
			name, cat := softCatalog(t, catProps)
			parent := uniq("scope")
			if err := cat.CreateNamespace(ctx, table.Identifier{parent}, nsProps); err != nil {
				t.Fatal(err)
			}
			if err := cat.CreateNamespace(ctx, table.Identifier{parent, "sub"}, nil); err != nil {
				t.Fatal(err)
			}
			nsPath := parent + "%1Fsub"
			tpath := "/v1/" + name + "/namespaces/" + nsPath + "/tables/"
			props := iceberg.Properties{table.MaxSnapshotAgeMsKey: "3600000", table.MinSnapshotsToKeepKey: "1"}
			mk := func(tbl string) *table.Table {
				t.Helper()
				out, err := cat.CreateTable(ctx, table.Identifier{parent, "sub", tbl}, eventSchema, icecat.WithPartitionSpec(&eventSpec), icecat.WithProperties(props))
				if err != nil {
					t.Fatal(err)
				}
				out = appendRows(t, out, rows(t, 0, 6, false))
				return appendRows(t, out, rows(t, 6, 6, false))
			}
			purged, expiring := mk("purged"), mk("expiring")
			mk("now")
			mk("swept")
			for _, tbl := range []string{"now", "swept"} {
				mustCall(t, 204, "DELETE", tpath+tbl, shared.Token, nil)
			}
			nsIdent := catalog.Ident{Namespace: []string{parent, "sub"}, Name: "expiring"}
			sweep := func() {
				t.Helper()
				s := &softdelete.Service{Catalog: srv.Catalog, Purge: srv.Purge, Now: func() time.Time { return time.Now().Add(2 * time.Hour) }}
				if _, err := s.Expire(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}
			left := func() map[string]bool {
				out := map[string]bool{}
				for _, r := range softDeleted(t, name, "") {
					out[r.Name] = true
				}
				return out
			}

			// Held: nothing of any table goes.
			if st, body := call(t, "DELETE", tpath+"purged?purgeRequested=true", shared.Token, nil); st != 409 || !strings.Contains(string(body), "LegalHoldException") {
				t.Errorf("drop with purge under a %s hold: %d %s, want 409 LegalHoldException", scope, st, body)
			}
			if st, _ := call(t, "GET", tpath+"purged", shared.Token, nil); st != 200 {
				t.Errorf("the table refused a drop with purge: GET %d", st)
			}
			if st, body := call(t, "POST", lifecycleTablePath(name, nsPath, "now")+"/purge-now", shared.Token, map[string]any{}); st != 409 || !strings.Contains(string(body), "LegalHoldException") {
				t.Errorf("purge-now under a %s hold: %d %s, want 409 LegalHoldException", scope, st, body)
			}
			sweep()
			if l := left(); !l["now"] || !l["swept"] {
				t.Errorf("after the hold-expiry sweep past their purge time under a %s hold: soft-deleted %v, want now and swept", scope, l)
			}
			res, err := srv.Partitions.ExpireSnapshots(ctx, name, nsIdent, expiring.Metadata().TableUUID().String(), time.Now().Add(2*time.Hour))
			if err != nil || res.Snapshots != 0 || res.Job != "" {
				t.Errorf("snapshot expiry under a %s hold: %+v %v, want nothing expired", scope, res, err)
			}
			if tbl, err := cat.LoadTable(ctx, table.Identifier{parent, "sub", "expiring"}); err != nil || len(tbl.Metadata().Snapshots()) != 2 {
				t.Errorf("snapshots under a %s hold: %v, want 2", scope, err)
			}

			// The teardown check lists the records apart, as it does
			// records held by their own hold: they must stay.
			rep, err := srv.Catalog.Teardown(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, tbl := range []string{"now", "swept"} {
				id := name + ": table " + parent + ".sub." + tbl + " "
				held := slices.ContainsFunc(rep.Held, func(l string) bool { return strings.HasPrefix(l, id) })
				stranded := slices.ContainsFunc(rep.SoftDeleted, func(l string) bool { return strings.HasPrefix(l, id) })
				if !held || stranded {
					t.Errorf("teardown check under a %s hold: %s legal-held %v, soft-deleted %v", scope, tbl, held, stranded)
				}
			}
			if t.Failed() {
				return
			}

			// Lifted: each proceeds.
			if scope == "catalog" {
				mustCall(t, 200, "POST", "/lifecycle/v1/catalogs/"+name+"/properties", shared.Token, map[string]any{"removals": []string{"icehold.legal-hold"}})
			} else {
				mustCall(t, 200, "POST", "/v1/"+name+"/namespaces/"+parent+"/properties", shared.Token, map[string]any{"removals": []string{"icehold.legal-hold"}})
			}
			mustCall(t, 204, "DELETE", tpath+"purged?purgeRequested=true", shared.Token, nil)
			if st, _ := call(t, "GET", tpath+"purged", shared.Token, nil); st != 404 {
				t.Errorf("%s dropped with purge: GET %d", purged.Identifier(), st)
			}
			mustCall(t, 202, "POST", lifecycleTablePath(name, nsPath, "now")+"/purge-now", shared.Token, map[string]any{})
			sweep()
			if l := left(); len(l) != 0 {
				t.Errorf("after the hold-expiry sweep, the hold lifted: soft-deleted %v, want none", l)
			}
			res, err = srv.Partitions.ExpireSnapshots(ctx, name, nsIdent, expiring.Metadata().TableUUID().String(), time.Now().Add(2*time.Hour))
			if err != nil || res.Snapshots != 1 {
				t.Errorf("snapshot expiry, the hold lifted: %+v %v, want 1 snapshot expired", res, err)
			}
		})
	}
}

// A DeleteObjects call that deletes most of its keys and refuses one with
// an unexpected per-key error (not a throttle, not a missing key) fails
// the batch, which is retried from its checkpoint once the fault clears:
// the keys the failed call deleted are then reported deleted again (S3,
// and the emulator, report a missing key as deleted), so the job counts
// every file deleted once and none missing.
func TestPartlyRefusedDeleteCountsEveryFileOnce(t *testing.T) {
	embeddedAWS(t)
	srv := localOnly(t)
	cat := client(t, shared.Token)
	ns := newNamespace(t, "refused")
	tbl := writtenTable(t, cat, ns, "t", nil, false)
	data, meta := reachable(t, tbl)
	var refused string
	for p := range data {
		refused = p[strings.Index(p[len("s3://"):], "/")+len("s3://")+1:]
		break
	}
	srv.S3Emulator.SetKeyFault(&emulators.KeyFault{Match: func(k string) bool { return k == refused }, Code: "AccessDenied"})
	defer srv.S3Emulator.SetKeyFault(nil)
	job := dropPurge(t, ns, "t")
	dead := waitJob(t, job.ID, "DEAD_LETTERED", time.Minute)
	if dead.LastError == nil || !strings.Contains(*dead.LastError, "AccessDenied") {
		t.Fatalf("the refused batch: %+v", dead)
	}
	waitFor(t, "the refused batch in the DLQ", time.Minute, func() bool { return dlqDepth(t) >= dead.BatchesDead })
	srv.S3Emulator.SetKeyFault(nil)
	if err := srv.Redrive(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, job.ID, "SUCCEEDED", time.Minute)
	if want := int64(len(data) + len(meta)); done.FilesDeleted != want || done.FilesMissing != 0 {
		t.Errorf("after the redrive: %d deleted, %d missing; want %d deleted, none missing", done.FilesDeleted, done.FilesMissing, want)
	}
	assertGone(t, data, meta)
}
