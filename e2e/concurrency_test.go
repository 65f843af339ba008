package e2e

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
)

// 50 committers race on one table. Each commit is one conditional write on
// the metadata pointer: losers get 409 CommitFailedException, retry from a
// fresh load, and no committed snapshot is ever lost.
func TestConcurrentCommitters(t *testing.T) {
	const committers = 50
	ctx := context.Background()
	cat := client(t, shared.Token)
	ns := table.Identifier{uniq("race")}
	if err := cat.CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{ns[0], "t"}
	base, err := cat.CreateTable(ctx, ident, eventSchema)
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu        sync.Mutex
		committed = map[int64]bool{}
		conflicts int
		firstWins int
		wg        sync.WaitGroup
	)
	for i := range committers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tbl := base // the first attempt of everyone starts from the same base
			for attempt := 0; attempt < 500; attempt++ {
				tx := tbl.NewTransaction()
				if err := tx.AppendTable(ctx, rows(t, i, 1, false), 10, nil); err != nil {
					t.Errorf("committer %d: append: %v", i, err)
					return
				}
				out, err := tx.Commit(ctx)
				if err == nil {
					mu.Lock()
					committed[out.CurrentSnapshot().SnapshotID] = true
					if attempt == 0 {
						firstWins++
					}
					mu.Unlock()
					return
				}
				if !errors.Is(err, table.ErrCommitFailed) {
					t.Errorf("committer %d: err = %v, want CommitFailedException", i, err)
					return
				}
				mu.Lock()
				conflicts++
				mu.Unlock()
				// Back off exponentially with jitter before the retry, as
				// Iceberg clients do (commit.retry.min-wait-ms 100): without
				// it 50 committers redo about 1,250 appends, each writing
				// files, and take minutes on 2 cores.
				time.Sleep(time.Duration(rand.Int64N(int64(100*time.Millisecond) << min(attempt, 6))))
				if tbl, err = cat.LoadTable(ctx, ident); err != nil {
					t.Errorf("committer %d: reload: %v", i, err)
					return
				}
			}
			t.Errorf("committer %d never won", i)
		}()
	}
	wg.Wait()

	final, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	history := map[int64]bool{}
	for _, s := range final.Metadata().Snapshots() {
		history[s.SnapshotID] = true
	}
	if len(committed) != committers {
		t.Fatalf("%d committers succeeded, want %d", len(committed), committers)
	}
	for id := range committed {
		if !history[id] {
			t.Errorf("committed snapshot %d is missing from the history: a lost update", id)
		}
	}
	if len(history) != committers {
		t.Errorf("history has %d snapshots, want %d", len(history), committers)
	}
	if n := countRows(t, final); n != committers {
		t.Errorf("table has %d rows, want %d", n, committers)
	}
	if firstWins != 1 {
		t.Errorf("%d commits from the shared base succeeded, want exactly 1", firstWins)
	}
	t.Logf("%d commits, %d conflicts answered 409", committers, conflicts)
}
