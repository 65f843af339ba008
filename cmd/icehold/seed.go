package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/lambdaenv/softdeleteenv"
	"github.com/icehold/icehold/shared/store"
)

// The state the sample events in events/ name, apart from what the api
// samples make themselves (namespace sales and its table orders): the
// other samples work in namespace samples, so the api samples' renames and
// drops never take their tables away.
const seedNamespace = "samples"

// seedTable is a table of namespace samples, with its partition spec.
type seedTable struct {
	name, spec string
}

var seedTables = []seedTable{
	{"orders", ""}, // drop/drop-with-purge.json purges it
	{"events", `,"partition-spec":{"spec-id":0,"fields":[{"source-id":1,"field-id":1000,"name":"team_id","transform":"identity"},` +
		`{"source-id":2,"field-id":1001,"name":"ts_day","transform":"day"}]}`}, // partition-drop/*.json
	{"restorable", ""}, // soft-dropped: undrop/*.json list and restore it
}

// seedJob is a purge job with the id a sample names, made as a drop with
// purge makes it but left unstarted, so the samples play the workflow's
// steps on it by hand (a running server's reconcile starts its workflow
// about a minute later, as after a crash between drop and start).
type seedJob struct {
	id, table, samples string
	step               string // "": as the drop leaves it; awaited: as its plan step left it, one batch to wait for; batch: planned, its batch 0 enqueued; finalize: planned, no batch, finalize next
}

var seedJobs = []seedJob{
	{"pj-0019dd1c7a2b0-5f1e2d3c4b", "planned", "purge-plan/*.json", ""},
	{"pj-0019dd1c7a2b1-5f1e2d3c4b", "awaited", "purge-progress/progress.json", "awaited"},
	{"pj-0019dd1c7a2b2-5f1e2d3c4b", "finalized", "delete/finalize.json", "finalize"},
	{"pj-0019dd1c7a2b3-5f1e2d3c4b", "failed", "delete/finalize-failed.json", ""},
	{"pj-0019dd1c7a2b4-5f1e2d3c4b", "batched", "delete/batch.json", "batch"},
}

func seedCmd(conn *connOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "seed",
		Short: "Make the state the sample events name (once, on a fresh make run)",
		Long: `Makes what the sample events in events/ act on, apart from what the api
samples make themselves: namespace samples with the tables the drop,
partition-drop and undrop samples name, and the purge jobs the purge-plan,
purge-progress and delete samples name (unstarted, so the samples play the
workflow's steps; the server's reconcile starts them about a minute later).
Then every sample runs in file order: make invoke-all. Running it again
makes only what is missing.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := conn.localInfo()
			if err != nil {
				return err
			}
			if info == nil {
				return fmt.Errorf("no local server in %s: start it first (make run)", conn.stateDir())
			}
			return seedSamples(cmd.Context(), info, cmd.OutOrStdout())
		},
	}
}

// seedSamples makes the samples' state on the local server; what exists is kept.
func seedSamples(ctx context.Context, info *server.Info, out io.Writer) error {
	ctx = authz.WithPrincipal(ctx, server.AdminPrincipal)
	env := info.FunctionEnv()
	svc, err := purgeenv.Purge(ctx, env)
	if err != nil {
		return err
	}
	soft, err := softdeleteenv.SoftDelete(ctx, env)
	if err != nil {
		return err
	}
	cat, ns := info.Catalog, []string{seedNamespace}
	if _, err := svc.Catalog.CreateNamespace(ctx, cat, ns, map[string]string{"owner": "samples"}); err != nil && !errors.Is(err, catalog.ErrNamespaceExists) {
		return err
	}
	create := func(t seedTable) (bool, error) {
		var req catalog.CreateTableRequest
		body := `{"name":"` + t.name + `","schema":{"type":"struct","schema-id":0,"fields":[` +
			`{"id":1,"name":"team_id","type":"long","required":false},{"id":2,"name":"ts","type":"timestamptz","required":false}]}` + t.spec + `}`
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			return false, err
		}
		_, err := svc.Catalog.CreateTable(ctx, cat, ns, req)
		if errors.Is(err, catalog.ErrTableExists) {
			return false, nil
		}
		return err == nil, err
	}
	for _, t := range seedTables {
		made, err := create(t)
		if err != nil {
			return fmt.Errorf("seed %s.%s: %w", seedNamespace, t.name, err)
		}
		if made && t.name == "restorable" {
			if _, err := soft.Drop(ctx, cat, catalog.Ident{Namespace: ns, Name: t.name}); err != nil {
				return fmt.Errorf("seed: soft-drop %s.%s: %w", seedNamespace, t.name, err)
			}
		}
		if made {
			fmt.Fprintf(out, "table %s.%s\n", seedNamespace, t.name)
		}
	}
	for _, sj := range seedJobs {
		if _, err := svc.Store.GetJob(ctx, cat, sj.id); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if _, err := create(seedTable{name: sj.table}); err != nil {
			return fmt.Errorf("seed %s.%s: %w", seedNamespace, sj.table, err)
		}
		id := catalog.Ident{Namespace: ns, Name: sj.table}
		e, err := svc.Catalog.Entry(ctx, cat, id)
		if err != nil {
			return fmt.Errorf("seed job %s: %w", sj.id, err)
		}
		j := store.Job{ID: sj.id, Execution: sj.id, Kind: store.KindPurge, Catalog: cat, Namespace: ns, Table: sj.table, TableUUID: e.TableUUID,
			MetadataLocation: e.MetadataLocation, State: store.JobPending, Attempts: 1, CreatedBy: server.AdminPrincipal}
		switch sj.step {
		case "awaited":
			// Unplanned, so the workflow plans it afresh when it starts
			// (the plan sets batches_total).
			j.State, j.BatchesTotal = store.JobRunning, 1
		case "finalize":
			// Started and planned, so finalize ends it whether or not the
			// workflow the drop's event starts got to it first.
			j.State, j.Planned = store.JobRunning, true
		case "batch":
			// Batch 0 names no manifest: the delete step has nothing to delete.
			j.State, j.BatchesTotal, j.Planned = store.JobRunning, 1, true
		}
		if err := svc.Store.DropForPurge(ctx, e, j, true); err != nil {
			return fmt.Errorf("seed job %s: %w", sj.id, err)
		}
		if sj.step == "batch" {
			if err := svc.Store.PutBatches(ctx, []store.Batch{{JobID: sj.id, Number: 0}}); err != nil {
				return fmt.Errorf("seed job %s: %w", sj.id, err)
			}
		}
		fmt.Fprintf(out, "purge job %s of %s.%s (%s) for %s\n", sj.id, seedNamespace, sj.table, j.State, sj.samples)
	}
	return nil
}
