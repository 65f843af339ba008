package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/icehold/icehold/bench/s3model"
	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// The purge against S3's physics (SPEC §8): bench/s3model in front of the
// embedded S3 (30 ms a DeleteObjects, 10 ms a GET, 3,500 key deletions a
// second per partition directory, SlowDown beyond). The delete function runs
// as its deployed concurrency: fleetSize independent "processes", each with
// its own SDK clients, its own pacer and its own queue poller, as the event
// source mapping runs them in AWS.
const (
	modelFiles = 1_000_000
	modelDirs  = 10
	fleetSize  = 50 // infra/access.go: deleteMaxConcurrency, the mapping's MaximumConcurrency
	// The baselines run on slices: the 250-key loop on 100,000 keys;
	// iceberg-go's PurgeFiles (a HEAD and a DELETE per file, 16 at a time)
	// on 2,000 files; the per-process pacers (what icehold did before the
	// shared schedule) on 200,000 files cut in 50 batches, one per process.
	baselineKeys = 100_000
	sliceFiles   = 2_000
	aloneFiles   = 200_000
	ceiling      = modelDirs * s3model.DefaultRate
)

type modelEnv struct {
	env
	model *s3model.Model
	url   string
	cfg   aws.Config
}

func startModel(b *testing.B) modelEnv {
	b.Helper()
	srv, err := server.Start(context.Background(), server.Options{
		TimeScale: 0.01, Visibility: time.Minute, ReconcileEvery: time.Hour, DeleteWorkers: -1,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	model := s3model.New(srv.S3Emulator, srv.S3Emulator.Store)
	hs := httptest.NewServer(model)
	b.Cleanup(hs.Close)
	m := modelEnv{env: env{srv: srv}, model: model, url: hs.URL}
	ep := m.endpoints()
	m.cfg, _ = awsconfig.Load(context.Background(), ep)
	m.s3 = awsconfig.S3(m.cfg, ep)
	return m
}

func (m modelEnv) endpoints() awsconfig.Endpoints {
	i := m.srv.Info
	return awsconfig.Endpoints{S3: m.url, Region: i.Region, AccessKey: i.AccessKey, SecretKey: i.SecretKey}
}

// fleet is the delete function at its deployed concurrency.
type fleet struct {
	pacers []*purge.Pacer
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// startFleet starts n delete "processes" reading the queue through the
// model; shared: their pacers book on the store's per-prefix schedules (what
// lambdaenv wires in AWS); otherwise each paces alone (its own AIMD). The
// local server's own delete function (the state machine's finalize) is
// pointed at the model too, with a pacer of its own.
func (m modelEnv) startFleet(b *testing.B, n int, shared bool) *fleet {
	b.Helper()
	lenv := m.srv.Info.FunctionEnv()
	lenv.Endpoints.S3 = m.url
	lenv.IOProps["s3.endpoint"] = m.url
	if shared {
		lenv.DeletePace = purge.DefaultKeyRate
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &fleet{stop: cancel}
	for range n {
		svc, err := purgeenv.Purge(ctx, lenv)
		if err != nil {
			b.Fatal(err)
		}
		svc.Metrics = nil
		if svc.Pacer == nil {
			svc.Pacer = purge.NewPacer() // its own, not the package's default one all "processes" here would share
		}
		f.pacers = append(f.pacers, svc.Pacer)
		lease, err := purgeenv.SQS(ctx, lenv)
		if err != nil {
			b.Fatal(err)
		}
		p := &emulators.Poller{Client: lease, QueueURL: lenv.Queue.URL, Workers: 1, BatchSize: 1, Timeout: 5 * time.Minute,
			Handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				return svc.HandleSQS(ctx, lease, purgeenv.Queue(lenv), ev)
			}}
		f.wg.Add(1)
		go func() { defer f.wg.Done(); p.Run(ctx) }()
	}
	fin := m.srv.Purge // the state machine's invocations of the delete function: finalize
	fin.S3 = m.s3
	fin.IOProps["s3.endpoint"] = m.url // the plan reads manifest lists through the model too
	fin.Pacer = purge.NewPacer()
	if shared {
		fin.Pacer = purge.NewSharedPacer(m.srv.Catalog.Store(), purge.DefaultKeyRate)
	}
	return f
}

func (f *fleet) close() { f.stop(); f.wg.Wait() }

func (f *fleet) cuts() (n int64) {
	for _, p := range f.pacers {
		n += p.Cuts()
	}
	return n
}

// modelRun is one row of the table.
type modelRun struct {
	name    string
	files   int64 // data files the row deletes
	elapsed time.Duration
	stats   s3model.Stats
	left    int64   // data objects still there afterwards
	ceiling float64 // files/s S3 admitted at most (0: the model's default over modelDirs)
	check   string  // lost or double-counted batches
	note    string
	// The first and last key S3 admitted, from the row's start.
	first, last time.Duration
	phases      string
	variant     bool // a pacing variant, not a baseline
}

// span records when the model admitted the row's first and last key.
func (r *modelRun) span(m modelEnv, t0 time.Time) {
	first, last := m.model.Span()
	if !first.IsZero() {
		r.first, r.last = first.Sub(t0), last.Sub(t0)
	}
}

func (r modelRun) rate() float64 { return float64(r.files-r.left) / r.elapsed.Seconds() }

func (r modelRun) fraction() float64 {
	if r.ceiling > 0 {
		return r.rate() / r.ceiling
	}
	return r.rate() / ceiling
}

// left counts the objects under a prefix.
func (m modelEnv) left(b *testing.B, prefix string) int64 {
	b.Helper()
	key := strings.TrimPrefix(prefix, "s3://"+m.srv.Info.Bucket+"/")
	var n int64
	after := ""
	for {
		list, err := m.srv.S3Emulator.Store.ListObjects(m.srv.Info.Bucket, emulators.ListOptions{Prefix: key, After: after, MaxKeys: 1000})
		if err != nil {
			b.Fatal(err)
		}
		n += int64(len(list.Objects))
		if !list.IsTruncated {
			return n
		}
		after = list.Last
	}
}

// purgeOnModel drops a table and waits for its job (at most limit), then
// checks the counters: every batch done exactly once, every file counted
// exactly once, nothing left in S3.
func (m modelEnv) purgeOnModel(b *testing.B, name, loc string, files int64, limit time.Duration) modelRun {
	b.Helper()
	st := m.srv.Catalog.Store()
	before := m.model.Stats()
	m.model.StartSpan()
	t0 := time.Now()
	m.call(b, "DELETE", "/v1/demo/namespaces/model/tables/"+name+"?purgeRequested=true", nil)
	dropped := time.Since(t0)
	var planned time.Duration
	var job store.Job
	for {
		jobs, _, err := st.ListJobs(context.Background(), "demo", "", 1000)
		if err != nil {
			b.Fatal(err)
		}
		for _, j := range jobs {
			if j.Table == name {
				job = j
			}
		}
		if job.Planned && planned == 0 {
			planned = time.Since(t0)
		}
		if store.Terminal(job.State) || time.Since(t0) > limit {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := modelRun{files: files, elapsed: time.Since(t0), stats: m.model.Stats().Sub(before)}
	r.span(m, t0)
	r.phases = fmt.Sprintf("dropped +%s, planned +%s, ", dropped.Round(10*time.Millisecond), planned.Round(10*time.Millisecond))
	r.left = m.left(b, loc+"/data/")
	done := 0
	for tok := ""; ; {
		page, next, err := st.ListBatches(context.Background(), job.ID, tok, 1000)
		if err != nil {
			b.Fatal(err)
		}
		for _, bt := range page {
			if bt.Done {
				done++
			}
		}
		if tok = next; tok == "" {
			break
		}
	}
	lost := job.BatchesTotal - done
	double := job.BatchesDone - done
	// files-deleted also counts the metadata layer finalize deletes.
	dataFiles := job.FilesDeleted - int64(job.FinalizeTotal)
	r.check = fmt.Sprintf("%d / %d", lost, max(double, 0))
	switch {
	case job.State != store.JobSucceeded:
		r.note = fmt.Sprintf("job %s after %s: %d of %d batches done, %d dead; %s", job.State, limit, job.BatchesDone, job.BatchesTotal, job.BatchesDead, job.LastError)
	case dataFiles != files || lost != 0 || double != 0 || job.BatchesDead != 0 || r.left != 0:
		r.note = fmt.Sprintf("MISMATCH: files-deleted %d (%d data) of %d, batches %d done (%d records) of %d, %d dead, %d objects left",
			job.FilesDeleted, dataFiles, files, job.BatchesDone, done, job.BatchesTotal, job.BatchesDead, r.left)
	default:
		r.note = fmt.Sprintf("files-deleted %d = %d data + %d metadata; batches %d of %d, each done once; %sS3 admitted keys from +%s to +%s",
			job.FilesDeleted, dataFiles, job.FinalizeTotal, done, job.BatchesTotal, r.phases, r.first.Round(10*time.Millisecond), r.last.Round(10*time.Millisecond))
	}
	return r
}

// loopOnModel is the 250-key baseline (bench's baseline, on the model): n
// keys over the same partition directories, DeleteObjects of perCall keys
// from workers goroutines, the SDK's standard retries (what Iceberg's
// S3FileIO relies on); keys refused per key are not retried, as S3FileIO
// reports them and moves on.
func (m modelEnv) loopOnModel(b *testing.B, n, perCall, workers int) modelRun {
	b.Helper()
	prefix := fmt.Sprintf("loop-%d-%d", perCall, workers)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/p=%d/%08d.parquet", prefix, i%modelDirs, i)
		m.put(b, "s3://"+m.srv.Info.Bucket+"/"+keys[i], nil)
	}
	client := s3.NewFromConfig(m.cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(m.url); o.UsePathStyle = true })
	before := m.model.Stats()
	m.model.StartSpan()
	t0 := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	work := make(chan []string)
	left := int64(0)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for chunk := range work {
				ids := make([]s3types.ObjectIdentifier, len(chunk))
				for i, k := range chunk {
					ids[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
				}
				out, err := client.DeleteObjects(context.Background(), &s3.DeleteObjectsInput{Bucket: aws.String(m.srv.Info.Bucket),
					Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
				mu.Lock()
				if err != nil {
					left += int64(len(chunk))
				} else {
					left += int64(len(out.Errors))
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i += perCall {
		work <- keys[i:min(i+perCall, n)]
	}
	close(work)
	wg.Wait()
	r := modelRun{files: int64(n), elapsed: time.Since(t0), stats: m.model.Stats().Sub(before)}
	r.span(m, t0)
	r.left = m.left(b, "s3://"+m.srv.Info.Bucket+"/"+prefix+"/")
	r.check = "n/a"
	if r.left != left {
		r.note = fmt.Sprintf("%d keys reported failed, %d left", left, r.left)
	}
	return r
}

// purgeFilesOnModel runs iceberg-go's Table.PurgeFiles (a Go user's way to
// purge: walk the location, read every manifest, then a HEAD and a DELETE
// per file, 16 at a time) on a table of sliceFiles files.
func (m modelEnv) purgeFilesOnModel(b *testing.B) modelRun {
	b.Helper()
	meta := m.synthLayout(b, "model", "slice", sliceFiles, 10_000, modelDirs, true)
	md, err := m.srv.Catalog.ReadMetadata(context.Background(), meta)
	if err != nil {
		b.Fatal(err)
	}
	props := m.srv.Info.FunctionEnv().IOProps
	props["s3.endpoint"] = m.url
	tbl := table.New([]string{"model", "slice"}, md, meta, icebergio.LoadFSFunc(props, md.Location()), nil)
	before := m.model.Stats()
	t0 := time.Now()
	err = tbl.PurgeFiles(context.Background())
	r := modelRun{files: sliceFiles, elapsed: time.Since(t0), stats: m.model.Stats().Sub(before), check: "n/a"}
	r.left = m.left(b, md.Location()+"/data/")
	if err != nil {
		r.note = "PurgeFiles: " + strings.SplitN(err.Error(), "\n", 2)[0]
	}
	return r
}

// locationOf is a table's location from its metadata file's path.
func locationOf(meta string) string { return meta[:strings.LastIndex(meta, "/metadata/")] }

func BenchmarkPurgeS3Model(b *testing.B) {
	// One heap holds what AWS keeps apart: the emulators (a million
	// objects in S3), DynamoDB and fifty delete functions. Collecting it
	// less often keeps the simulation's own pauses from bunching the
	// fleet's calls (in AWS each invocation has its own small heap).
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	m := startModel(b)
	m.call(b, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"model"}})
	var rows []modelRun
	var cuts, halvedCuts int64
	var seed time.Duration
	b.ResetTimer()
	for range b.N {
		rows = rows[:0]
		// PurgeFiles first, while the bucket is small (as in earlier runs,
		// when the emulator's listing walked the whole bucket per call).
		pf := m.purgeFilesOnModel(b)
		pf.name = fmt.Sprintf("iceberg-go Table.PurgeFiles, %d-file slice", sliceFiles)

		// icehold at the deployed concurrency, pacing shared through the store.
		t0 := time.Now()
		meta := m.synthLayout(b, "model", "big", modelFiles, 10_000, modelDirs, true)
		seed = time.Since(t0)
		f := m.startFleet(b, fleetSize, true)
		big := m.purgeOnModel(b, "big", locationOf(meta), modelFiles, 5*time.Minute)
		cuts = f.cuts()
		f.close()
		big.name = fmt.Sprintf("icehold, %d files, %d processes, shared pace", modelFiles, fleetSize)
		rows = append(rows, big)

		// The same fleet with each process pacing alone (before this change).
		m.srv.Purge.BatchFiles = aloneFiles / fleetSize // 50 batches: one per process, as above
		meta = m.synthLayout(b, "model", "alone", aloneFiles, 2_000, modelDirs, true)
		f = m.startFleet(b, fleetSize, false)
		alone := m.purgeOnModel(b, "alone", locationOf(meta), aloneFiles, 90*time.Second)
		f.close()
		m.srv.Purge.BatchFiles = 0
		alone.name = fmt.Sprintf("icehold, %d files, each process paced alone", aloneFiles)
		alone.variant = true

		// A bucket S3 has not scaled yet: half the documented rate. The
		// shared pace aims at 95% of 3,500 and has to find 1,750 itself.
		m.srv.Purge.BatchFiles = aloneFiles / fleetSize
		meta = m.synthLayout(b, "model", "halved", aloneFiles, 2_000, modelDirs, true)
		m.model.SetRate(s3model.DefaultRate / 2)
		f = m.startFleet(b, fleetSize, true)
		halved := m.purgeOnModel(b, "halved", locationOf(meta), aloneFiles, 90*time.Second)
		halvedCuts = f.cuts()
		f.close()
		m.model.SetRate(s3model.DefaultRate)
		m.srv.Purge.BatchFiles = 0
		halved.name = fmt.Sprintf("icehold, %d files, shared pace, S3 at 1,750/s", aloneFiles)
		halved.ceiling = ceiling / 2
		halved.variant = true

		loop2 := m.loopOnModel(b, baselineKeys, 250, 2)
		loop2.name = fmt.Sprintf("baseline: 250-key loop, %d keys, 2 workers", baselineKeys)
		loop50 := m.loopOnModel(b, baselineKeys, 250, fleetSize)
		loop50.name = fmt.Sprintf("baseline: 250-key loop, %d keys, %d workers", baselineKeys, fleetSize)
		rows = append(rows, loop2, loop50, pf, alone, halved)
	}
	b.StopTimer()
	fmt.Printf("\n== purge against S3's limits (bench/s3model: 30 ms a DeleteObjects, 10 ms a GET, %d key deletions/s per prefix, SlowDown beyond) ==\n", s3model.DefaultRate)
	fmt.Printf("%d files over %d partition directories; ceiling %d × %d = %d files/s\n", modelFiles, modelDirs, modelDirs, s3model.DefaultRate, int(ceiling))
	fmt.Printf("%-50s %8s %9s %14s %8s %8s %9s %7s\n", "", "files/s", "req/file", "SlowDown 503/key", "ceiling", "left", "lost/dbl", "time")
	header := false
	for _, r := range rows {
		if r.variant && !header {
			fmt.Printf("pacing variants (%d files, %d batches: one per process):\n", aloneFiles, fleetSize)
			header = true
		}
		fmt.Printf("%-50s %8.0f %9.5f %14s %8.3f %8d %9s %7s\n", r.name, r.rate(), float64(r.stats.Requests)/float64(r.files),
			fmt.Sprintf("%d/%d", r.stats.SlowCalls, r.stats.SlowKeys), r.fraction(), r.left, r.check, r.elapsed.Round(100*time.Millisecond))
	}
	fmt.Printf("files/s: files gone from S3 per second, drop to job SUCCEEDED for icehold; ceiling: that over %d × the per-prefix rate;\n", modelDirs)
	fmt.Printf("SlowDown: calls answered 503 / keys answered SlowDown in a result (icehold retries them); left: files still in S3;\n")
	fmt.Printf("lost/dbl: batches never done / done twice, from the job's counters and the batch records\n")
	for _, r := range rows {
		if r.note != "" {
			fmt.Printf("  %s: %s\n", r.name, r.note)
		}
	}
	fmt.Printf("fleet-wide rate cuts: %d at full rate, %d at half; target ≥ 0.8 of the ceiling, 0 lost or double-counted (seeding %d files: %s, not counted)\n",
		cuts, halvedCuts, modelFiles, seed.Round(100*time.Millisecond))
	b.ReportMetric(rows[0].rate()/ceiling, "ceiling-fraction")
	b.ReportMetric(rows[0].rate(), "files/s")
}
