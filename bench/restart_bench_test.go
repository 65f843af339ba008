package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
)

const journalPath = "dynamodb.journal"

// restartOptions: the local server on dir, its background work off.
func restartOptions(dir string, compactAt int64) server.Options {
	return server.Options{
		Dir: dir, DeleteWorkers: -1, ReconcileEvery: time.Hour, HoldExpiryEvery: time.Hour, RetentionEvery: -1,
		DemoProperties: map[string]string{}, JournalCompactAt: compactAt,
	}
}

// journalSize is the DynamoDB journal's size.
func journalSize(b *testing.B, dir string) int64 {
	st, err := os.Stat(filepath.Join(dir, journalPath))
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

// restartState makes a state directory whose journal (no snapshot yet)
// holds tables table creates in namespace bench, the first dropped of them
// dropped again. One create and one drop go through the catalog; the
// others are the journal lines those appended, with the table's name and
// uuids replaced: the requests the catalog would make, without the minutes
// minidyn takes to run 10,000 transactions (each copies the whole table
// for its rollback). Only the first table has its metadata file in S3; a
// restart reads none.
func restartState(b *testing.B, tables, dropped int) string {
	b.Helper()
	dir := b.TempDir()
	ctx := authz.WithPrincipal(context.Background(), server.AdminPrincipal)
	srv, err := server.Start(ctx, restartOptions(dir, -1))
	if err != nil {
		b.Fatal(err)
	}
	ns := []string{"bench"}
	if _, err := srv.Catalog.CreateNamespace(ctx, server.DefaultCatalog, ns, nil); err != nil {
		b.Fatal(err)
	}
	journal := func(from int64) []byte {
		raw, err := os.ReadFile(filepath.Join(dir, journalPath))
		if err != nil {
			b.Fatal(err)
		}
		return raw[from:]
	}
	before := journalSize(b, dir)
	first := journal(0)
	_, err = srv.Catalog.CreateTable(ctx, server.DefaultCatalog, ns, catalog.CreateTableRequest{Name: "t00000", Schema: benchSchema})
	if err != nil {
		b.Fatal(err)
	}
	create := journal(before)
	var drop []byte
	if dropped > 0 {
		before = journalSize(b, dir)
		if _, err := srv.Catalog.DropTable(ctx, server.DefaultCatalog, catalog.Ident{Namespace: ns, Name: "t00000"}); err != nil {
			b.Fatal(err)
		}
		drop = journal(before)
	}
	srv.Close()
	f, err := os.OpenFile(filepath.Join(dir, journalPath), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	// Every uuid the create and the drop wrote (the table's, its location
	// claim's, its metadata file's, the requests' tokens) is new per table;
	// those of before (the catalog's) stay.
	keep := map[string]bool{}
	for _, id := range uuidRE.FindAll(first, -1) {
		keep[string(id)] = true
	}
	for i := 1; i < tables; i++ {
		name, ids := fmt.Appendf(nil, "t%05d", i), map[string][]byte{}
		like := func(lines []byte) []byte {
			return uuidRE.ReplaceAllFunc(bytes.ReplaceAll(lines, []byte("t00000"), name), func(id []byte) []byte {
				if keep[string(id)] {
					return id
				}
				if ids[string(id)] == nil {
					ids[string(id)] = []byte(uuid.NewString())
				}
				return ids[string(id)]
			})
		}
		if _, err := w.Write(like(create)); err != nil {
			b.Fatal(err)
		}
		if i < dropped {
			if _, err := w.Write(like(drop)); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// countTables lists namespace bench through the catalog.
func countTables(b *testing.B, dir string) int {
	b.Helper()
	ctx := authz.WithPrincipal(context.Background(), server.AdminPrincipal)
	srv, err := server.Start(ctx, restartOptions(dir, 0))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	n, token := 0, ""
	for {
		page, next, err := srv.Catalog.ListTables(ctx, server.DefaultCatalog, []string{"bench"}, token, 1000)
		if err != nil {
			b.Fatal(err)
		}
		n += len(page)
		if token = next; token == "" {
			return n
		}
	}
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// restart is server.Start then Close on dir: the median of runs.
func restart(b *testing.B, dir string, compactAt int64, runs int) time.Duration {
	b.Helper()
	var took []time.Duration
	for range runs {
		t0 := time.Now()
		srv, err := server.Start(context.Background(), restartOptions(dir, compactAt))
		if err != nil {
			b.Fatal(err)
		}
		srv.Close()
		took = append(took, time.Since(t0))
	}
	return median(took)
}

// restartAndLoad is restart, and the first answer: one LoadTable (its
// item, then its metadata file) after the start.
func restartAndLoad(b *testing.B, dir string) time.Duration {
	b.Helper()
	ctx := authz.WithPrincipal(context.Background(), server.AdminPrincipal)
	t0 := time.Now()
	srv, err := server.Start(ctx, restartOptions(dir, 0))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := srv.Catalog.LoadTable(ctx, server.DefaultCatalog, catalog.Ident{Namespace: []string{"bench"}, Name: "t00000"}, false); err != nil {
		srv.Close()
		b.Fatal(err)
	}
	took := time.Since(t0)
	srv.Close()
	return took
}

// snapshotRuns: restarts per state from its snapshot.
const snapshotRuns = 9

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[len(d)/2]
}

// restartEnv makes the bench binary start the local server on a state
// directory, say READY and exit: the restart a user of `make run` waits
// for, process start included (restartCompactEnv: the compaction option).
const (
	restartEnv        = "ICEHOLD_BENCH_RESTART_DIR"
	restartCompactEnv = "ICEHOLD_BENCH_RESTART_COMPACT_AT"
)

func startOnce(dir string) {
	compactAt, _ := strconv.ParseInt(os.Getenv(restartCompactEnv), 10, 64)
	if _, err := server.Start(context.Background(), restartOptions(dir, compactAt)); err != nil {
		log.Fatal(err)
	}
	fmt.Println("READY")
	os.Exit(0) // no Close: as a kill would leave it
}

// restartProcess runs the bench binary as startOnce on dir until READY:
// the median of runs.
func restartProcess(b *testing.B, dir string, compactAt int64, runs int) time.Duration {
	b.Helper()
	var took []time.Duration
	for range runs {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), restartEnv+"="+dir, restartCompactEnv+"="+strconv.FormatInt(compactAt, 10))
		cmd.Stderr = os.Stderr
		t0 := time.Now()
		out, err := cmd.Output()
		if err != nil || !bytes.Contains(out, []byte("READY")) {
			b.Fatalf("restart of %s: %v %s", dir, err, out)
		}
		took = append(took, time.Since(t0))
	}
	return median(took)
}

// Restart time is flat (issue 13): the DynamoDB journal is compacted into a
// snapshot, and a start decodes none of the snapshot's items until a
// request names them (docs/design/local.md, "The DynamoDB journal: snapshot +
// tail"). Baseline: the journal alone, replayed in full at every start.
func BenchmarkRestart(b *testing.B) {
	type row struct {
		name              string
		tables, dropped   int
		journal, snap     time.Duration
		load              time.Duration // snapshot + tail, and a first LoadTable
		procJ, procS      time.Duration // the same as a process restart
		first             time.Duration // the first start on the journal: replay, then compaction
		journalMB, snapMB float64
		dir               string
	}
	rows := []*row{
		{name: "10 tables", tables: 10},
		{name: "10,000 tables", tables: 10_000},
		{name: "10,000 created, 9,990 dropped", tables: 10_000, dropped: 9_990},
	}
	for range b.N {
		for _, r := range rows {
			dir := restartState(b, r.tables, r.dropped)
			r.journalMB = float64(journalSize(b, dir)) / (1 << 20)
			runs := 3
			if r.tables >= 10_000 {
				runs = 1 // seconds each: once is enough for the baseline
			}
			r.journal = restart(b, dir, -1, runs)
			r.procJ = restartProcess(b, dir, -1, runs)
			t0 := time.Now()
			srv, err := server.Start(context.Background(), restartOptions(dir, 0))
			if err != nil {
				b.Fatal(err)
			}
			srv.Close() // compacts, if the start did not
			r.first = time.Since(t0)
			if n := countTables(b, dir); n != r.tables-r.dropped {
				b.Fatalf("%s: %d tables listed", r.name, n)
			}
			st, err := os.Stat(filepath.Join(dir, "dynamodb.snapshot"))
			if err != nil {
				b.Fatal(err)
			}
			r.snapMB = float64(st.Size()) / (1 << 20)
			r.dir = dir
		}
		// Round robin over the states, so that the machine's load (shared)
		// weighs on each alike.
		snap, proc, load := make([][]time.Duration, len(rows)), make([][]time.Duration, len(rows)), make([][]time.Duration, len(rows))
		for range snapshotRuns {
			for i, r := range rows {
				snap[i] = append(snap[i], restart(b, r.dir, 0, 1))
				proc[i] = append(proc[i], restartProcess(b, r.dir, 0, 1))
				if r.dropped == 0 {
					load[i] = append(load[i], restartAndLoad(b, r.dir))
				}
			}
		}
		for i, r := range rows {
			r.snap, r.procS = median(snap[i]), median(proc[i])
			if len(load[i]) > 0 {
				r.load = median(load[i])
			}
		}
	}
	fmt.Printf("\n== local restart: server.Start + Close in process, and a process start until it serves ==\n")
	fmt.Printf("== (snapshot: median of %d, round robin; journal only: median of 3 at 10 tables, once at 10,000) ==\n", snapshotRuns)
	fmt.Printf("%-30s %11s %11s %11s %11s %11s %11s %9s %9s\n", "", "in process", "", "", "process", "", "first start", "snapshot", "journal")
	fmt.Printf("%-30s %11s %11s %11s %11s %11s %11s %9s %9s\n", "state", "snapshot", "+ a first", "journal", "snapshot", "journal", "(compacts)", "size", "size")
	fmt.Printf("%-30s %11s %11s %11s %11s %11s %11s %9s %9s\n", "", "+ tail", "LoadTable", "only", "+ tail", "only", "", "", "")
	mb := func(v float64) string { return fmt.Sprintf("%.1f MB", v) }
	for _, r := range rows {
		load := "-"
		if r.load > 0 {
			load = ms(r.load)
		}
		fmt.Printf("%-30s %11s %11s %11s %11s %11s %11s %9s %9s\n", r.name, ms(r.snap), load, ms(r.journal), ms(r.procS), ms(r.procJ), ms(r.first), mb(r.snapMB), mb(r.journalMB))
	}
	x := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	for _, r := range rows[1:] {
		fmt.Printf("ratio %s / 10 tables: in process %.2f (journal only %.2f), process %.2f (journal only %.2f); target ≤ 1.5\n",
			r.name, x(r.snap, rows[0].snap), x(r.journal, rows[0].journal), x(r.procS, rows[0].procS), x(r.procJ, rows[0].procJ))
	}
	fmt.Printf("(a start reads the snapshot but decodes an item only when a request names it: dynamodb_lazy.go)\n")
	fmt.Printf("(journal only replays the whole history; before this change a replay also ran each transaction\n")
	fmt.Printf(" through minidyn, which copies the table per transaction: 6,378 creates took 6 min 32 s)\n")
	b.ReportMetric(x(rows[1].procS, rows[0].procS), "process-restart-ratio")
	b.ReportMetric(x(rows[1].snap, rows[0].snap), "restart-ratio")
}
