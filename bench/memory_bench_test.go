package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/lambdaenv/purgeenv"
	"github.com/icehold/icehold/shared/store"
)

// childEnv makes the bench binary host the emulators and the catalog for the
// memory benchmark, so the measuring process holds only the delete function.
const childEnv = "ICEHOLD_BENCH_HOST"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		host()
		return
	}
	if dir := os.Getenv(restartEnv); dir != "" {
		startOnce(dir)
		return
	}
	os.Exit(m.Run())
}

// logFailer turns helper failures in the host into a dead host.
type logFailer struct{}

func (logFailer) Helper()                      {}
func (logFailer) Fatal(args ...any)            { log.Fatal(args...) }
func (logFailer) Fatalf(f string, args ...any) { log.Fatalf(f, args...) }

func host() {
	srv, err := server.Start(context.Background(), server.Options{
		TimeScale: 0.01, Visibility: time.Minute, ReconcileEvery: time.Hour, DeleteWorkers: -1,
	})
	if err != nil {
		log.Fatal(err)
	}
	e := env{srv: srv}
	e.call(logFailer{}, "POST", "/v1/demo/namespaces", map[string]any{"namespace": []string{"mem"}})
	http.HandleFunc("/synth", func(w http.ResponseWriter, r *http.Request) {
		files, _ := strconv.Atoi(r.URL.Query().Get("files"))
		per, _ := strconv.Atoi(r.URL.Query().Get("per"))
		e.synthTable(logFailer{}, "mem", r.URL.Query().Get("name"), files, per, true)
	})
	ctl, err := listenLocal()
	if err != nil {
		log.Fatal(err)
	}
	info, _ := json.Marshal(srv.Info)
	fmt.Printf("READY %s %s\n", ctl.Addr(), info)
	log.Fatal(http.Serve(ctl, nil))
}

// peakRSS reads the process's peak resident set (VmHWM) in bytes.
func peakRSS() uint64 {
	raw, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resetPeakRSS starts a new VmHWM measurement (Linux: clear_refs 5).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// The delete function's peak RSS is flat in table size: it streams manifests.
// The emulators and the catalog run in a child process; this process runs
// only the delete function's handler on the queue, as Lambda would.
func BenchmarkDeleteFunctionMemory(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "READY ") {
		b.Fatalf("bench host did not start: %q %v", line, err)
	}
	parts := strings.SplitN(strings.TrimSpace(line), " ", 3)
	ctl := "http://" + parts[1]
	var info server.Info
	if err := json.Unmarshal([]byte(parts[2]), &info); err != nil {
		b.Fatal(err)
	}
	e := env{srv: &server.Server{Info: info}}
	lenv := info.FunctionEnv()
	svc, err := purgeenv.Purge(context.Background(), lenv)
	if err != nil {
		b.Fatal(err)
	}
	svc.Metrics = nil
	lease, _ := purgeenv.SQS(context.Background(), lenv)
	handler := svc.DeleteHandler(lease, purgeenv.Queue(lenv))

	measure := func(name string, files, per int) uint64 {
		res, err := http.Get(fmt.Sprintf("%s/synth?name=%s&files=%d&per=%d", ctl, name, files, per))
		if err != nil || res.StatusCode != 200 {
			b.Fatalf("synth: %v %v", err, res)
		}
		res.Body.Close()
		e.call(b, "DELETE", "/v1/demo/namespaces/mem/tables/"+name+"?purgeRequested=true", nil)
		ctx, cancel := context.WithCancel(context.Background())
		poller := &emulators.Poller{Client: lease, QueueURL: lenv.Queue.URL, Workers: 1, BatchSize: 1,
			Handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
				out, err := handler(ctx, mustJSON(ev))
				if err != nil {
					return events.SQSEventResponse{}, err
				}
				return out.(events.SQSEventResponse), nil
			}}
		done := make(chan struct{})
		resetPeakRSS()
		go func() { poller.Run(ctx); close(done) }()
		for {
			var page struct {
				Jobs []struct {
					Table, State string
				} `json:"jobs"`
			}
			_ = json.Unmarshal(e.call(b, "GET", "/lifecycle/v1/catalogs/demo/purge-jobs?table="+name, nil), &page)
			if len(page.Jobs) == 1 && page.Jobs[0].State == store.JobSucceeded {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		peak := peakRSS()
		cancel()
		<-done
		return peak
	}
	var small, large uint64
	for range b.N {
		small = measure("small", 5_000, 5_000)
		large = measure("large", 500_000, 10_000)
	}
	ratio := float64(large) / float64(small)
	fmt.Printf("\n== delete function peak RSS (its own process; emulators elsewhere) ==\n")
	fmt.Printf("%-20s %12s %12s\n", "", "peak RSS", "previous")
	fmt.Printf("%-20s %12s %12s\n", "5,000 files", mib(small), prevMiB(previous.rssSmall))
	fmt.Printf("%-20s %12s %12s\n", "500,000 files", mib(large), prevMiB(previous.rssLarge))
	fmt.Printf("ratio 500,000 / 5,000: %.2f (target ≤ 1.5; previous (%s): %.2f)\n", ratio, previous.commit, previous.rssLarge/previous.rssSmall)
	b.ReportMetric(ratio, "rss-ratio")
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func listenLocal() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
