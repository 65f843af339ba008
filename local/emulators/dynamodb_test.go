package emulators

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// do sends one request through the journal and returns minidyn's answer.
func do(t testing.TB, d *DynamoDB, op, body string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", op, body, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func open(t testing.TB, dir string, compactAt int64) *DynamoDB {
	t.Helper()
	d, err := OpenDynamoDB(dir, DynamoDBOptions{CompactAt: compactAt})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const keySchema = `"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"S"}` +
	`%s],"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],"BillingMode":"PAY_PER_REQUEST"`

// work writes with every journaled operation: tables (one with a global
// index, one deleted again), puts, ADD counters, conditional transactions
// with a condition check and a delete, batches and deletes. Round r adds
// its own items and counts the counters up once more.
func work(t testing.TB, d *DynamoDB, r int) {
	t.Helper()
	if r == 0 {
		do(t, d, "CreateTable", `{"TableName":"main",`+fmt.Sprintf(keySchema, "")+`}`)
		do(t, d, "CreateTable", `{"TableName":"indexed",`+fmt.Sprintf(keySchema, `,{"AttributeName":"owner","AttributeType":"S"}`)+
			`,"GlobalSecondaryIndexes":[{"IndexName":"by_owner","KeySchema":[{"AttributeName":"owner","KeyType":"HASH"}],"Projection":{"ProjectionType":"ALL"}}]}`)
		do(t, d, "CreateTable", `{"TableName":"gone",`+fmt.Sprintf(keySchema, "")+`}`)
		do(t, d, "PutItem", `{"TableName":"gone","Item":{"pk":{"S":"x"},"sk":{"S":"x"}}}`)
		do(t, d, "DeleteTable", `{"TableName":"gone"}`)
		do(t, d, "PutItem", `{"TableName":"main","Item":{"pk":{"S":"counter"},"sk":{"S":"c"},"n":{"N":"0"}}}`)
	}
	key := func(pk, sk string) string { return fmt.Sprintf(`{"pk":{"S":%q},"sk":{"S":%q}}`, pk, sk) }
	do(t, d, "UpdateItem", `{"TableName":"main","Key":`+key("counter", "c")+`,"UpdateExpression":"ADD n :one","ExpressionAttributeValues":{":one":{"N":"1"}}}`)
	var puts []string
	for i := range 30 {
		puts = append(puts, fmt.Sprintf(`{"PutRequest":{"Item":{"pk":{"S":"batch"},"sk":{"S":"%d-%02d"},"v":{"L":[{"N":"%d"},{"BOOL":true},{"M":{"b":{"B":"AAE="}}}]}}}}`, r, i, i))
	}
	do(t, d, "BatchWriteItem", `{"RequestItems":{"main":[`+strings.Join(puts[:25], ",")+`]}}`)
	do(t, d, "BatchWriteItem", `{"RequestItems":{"main":[`+strings.Join(puts[25:], ",")+`]}}`)
	do(t, d, "TransactWriteItems", `{"TransactItems":[`+
		`{"Put":{"TableName":"main","Item":{"pk":{"S":"tx"},"sk":{"S":"`+strconv.Itoa(r)+`"},"ss":{"SS":["a","b"]}},"ConditionExpression":"attribute_not_exists(pk)"}},`+
		`{"Update":{"TableName":"main","Key":`+key("counter", "c")+`,"UpdateExpression":"ADD n :two","ConditionExpression":"attribute_exists(pk)","ExpressionAttributeValues":{":two":{"N":"2"}}}},`+
		`{"ConditionCheck":{"TableName":"main","Key":`+key("batch", fmt.Sprintf("%d-00", r))+`,"ConditionExpression":"attribute_exists(pk)"}},`+
		`{"Delete":{"TableName":"main","Key":`+key("batch", fmt.Sprintf("%d-01", r))+`}}]}`)
	do(t, d, "DeleteItem", `{"TableName":"main","Key":`+key("batch", fmt.Sprintf("%d-02", r))+`}`)
	do(t, d, "PutItem", `{"TableName":"indexed","Item":{"pk":{"S":"i"},"sk":{"S":"`+strconv.Itoa(r)+`"},"owner":{"S":"o`+strconv.Itoa(r%2)+`"}}}`)
}

// dump is everything a client can read: every item of each table, the
// global index, and that the deleted table is gone.
func dump(t testing.TB, d *DynamoDB) string {
	t.Helper()
	var out []string
	for _, table := range []string{"main", "indexed"} {
		out = append(out, do(t, d, "Scan", `{"TableName":"`+table+`"}`))
	}
	out = append(out, do(t, d, "Query", `{"TableName":"indexed","IndexName":"by_owner","KeyConditionExpression":"#o = :o",`+
		`"ExpressionAttributeNames":{"#o":"owner"},"ExpressionAttributeValues":{":o":{"S":"o1"}}}`))
	out = append(out, strconv.Itoa(d.call("DescribeTable", []byte(`{"TableName":"gone"}`)).Code))
	return strings.Join(out, "\n")
}

// crash drops d as a kill -9 would: no compaction on close.
func crash(d *DynamoDB) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_ = d.journal.Close()
	d.journal = nil
}

// The state after a restart is the state before, whatever was on disk: the
// journal alone, a snapshot alone, a snapshot and its tail, a journal
// compacted while it was written, and a journal from before snapshots.
func TestRestartKeepsState(t *testing.T) {
	for _, tc := range []struct {
		name      string
		compactAt int64
		stop      func(*DynamoDB)
		files     []string // in the directory after the stop
	}{
		{"journal only", -1, func(d *DynamoDB) { _ = d.Close() }, []string{journalFile}},
		{"snapshot from a clean stop", 0, func(d *DynamoDB) { _ = d.Close() }, []string{journalFile, snapshotFile}},
		{"journal only, killed", 0, crash, []string{journalFile}},
		{"compacted while written, killed", 2000, crash, []string{journalFile, snapshotFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := open(t, dir, tc.compactAt)
			for r := range 4 {
				work(t, d, r)
			}
			want := dump(t, d)
			tc.stop(d)
			if got := files(t, dir); !slices.Equal(got, tc.files) {
				t.Fatalf("files %v, want %v", got, tc.files)
			}
			for restart := range 2 {
				d = open(t, dir, tc.compactAt)
				if got := dump(t, d); got != want {
					t.Fatalf("restart %d:\n got %s\nwant %s", restart, got, want)
				}
				_ = d.Close()
			}
			// And it goes on: writes after the restart survive the next.
			d = open(t, dir, tc.compactAt)
			work(t, d, 4)
			want = dump(t, d)
			tc.stop(d)
			d = open(t, dir, tc.compactAt)
			defer d.Close()
			if got := dump(t, d); got != want {
				t.Fatalf("after more writes:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func files(t testing.TB, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A journal written before snapshots (no generation header, a torn last
// line) is replayed, then compacted; the torn line is cut off before
// anything is appended after it.
func TestJournalWithoutHeader(t *testing.T) {
	dir := t.TempDir()
	d := open(t, dir, -1)
	work(t, d, 0)
	want := dump(t, d)
	crash(d)
	path := filepath.Join(dir, journalFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(raw), "\n") // the header
	if err := os.WriteFile(path, []byte(rest+`{"t":"PutItem","b":{"TableName":"ma`), 0o644); err != nil {
		t.Fatal(err)
	}
	d = open(t, dir, -1)
	if got := dump(t, d); got != want {
		t.Fatalf("old journal:\n got %s\nwant %s", got, want)
	}
	work(t, d, 1)
	want = dump(t, d)
	crash(d)
	d = open(t, dir, 0)
	if got := dump(t, d); got != want {
		t.Fatalf("appended after a torn line:\n got %s\nwant %s", got, want)
	}
	_ = d.Close()
	if got := files(t, dir); !slices.Equal(got, []string{journalFile, snapshotFile}) {
		t.Fatalf("files %v", got)
	}
}

// Damage is refused, not started from (that would silently drop state): a
// journal continuing a snapshot that is gone, a snapshot without its end
// mark, a whole journal line that does not decode.
func TestDamageRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(dir string) error
	}{
		{"snapshot gone", func(dir string) error { return os.Remove(filepath.Join(dir, snapshotFile)) }},
		{"snapshot cut short", func(dir string) error {
			path := filepath.Join(dir, snapshotFile)
			st, err := os.Stat(path)
			if err != nil {
				return err
			}
			return os.Truncate(path, st.Size()-2)
		}},
		{"journal line damaged", func(dir string) error {
			f, err := os.OpenFile(filepath.Join(dir, journalFile), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString("{\"t\":\"PutItem\",\n")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := open(t, dir, 0)
			work(t, d, 0)
			_ = d.Close()
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			if _, err := OpenDynamoDB(dir, DynamoDBOptions{}); err == nil {
				t.Fatal("started from damaged state")
			}
		})
	}
}

// compactionSteps: every step of a compaction, in order.
var compactionSteps = []string{
	"snapshot.tmp half", "snapshot.tmp synced", "snapshot renamed", "snapshot synced",
	"journal.tmp synced", "journal renamed", "compacted",
}

func TestCompactionSteps(t *testing.T) {
	var seen []string
	d, err := OpenDynamoDB(t.TempDir(), DynamoDBOptions{step: func(s string) { seen = append(seen, s) }})
	if err != nil {
		t.Fatal(err)
	}
	work(t, d, 0)
	seen = nil
	_ = d.Close()
	if !slices.Equal(seen, compactionSteps) {
		t.Fatalf("steps %q, want %q", seen, compactionSteps)
	}
}

const (
	childDir  = "ICEHOLD_DDB_CHILD_DIR"
	childStep = "ICEHOLD_DDB_CHILD_STEP"
)

// child runs this test binary as TestChild with env.
func child(env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestChild is the process the crash tests kill. With a step: it compacts
// the journal and SIGKILLs itself at that step. Without: it counts up in
// transactions and prints each acknowledged count, until killed.
func TestChild(t *testing.T) {
	dir := os.Getenv(childDir)
	if dir == "" {
		t.Skip("the crash tests' child process")
	}
	if step := os.Getenv(childStep); step != "" {
		kill := func(s string) {
			if s == step {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute) // SIGKILL lands before this ends
			}
		}
		d, err := OpenDynamoDB(dir, DynamoDBOptions{CompactAt: -1, step: kill})
		if err != nil {
			t.Fatal(err)
		}
		d.mu.Lock()
		err = d.compactLocked()
		t.Fatalf("compaction ended (%v) before step %q", err, step)
	}
	d := open(t, dir, 4096)
	do(t, d, "CreateTable", `{"TableName":"main",`+fmt.Sprintf(keySchema, "")+`}`)
	do(t, d, "PutItem", `{"TableName":"main","Item":{"pk":{"S":"counter"},"sk":{"S":"c"},"n":{"N":"0"}}}`)
	for i := 1; ; i++ {
		do(t, d, "TransactWriteItems", fmt.Sprintf(`{"TransactItems":[`+
			`{"Update":{"TableName":"main","Key":{"pk":{"S":"counter"},"sk":{"S":"c"}},"UpdateExpression":"ADD n :one","ExpressionAttributeValues":{":one":{"N":"1"}}}},`+
			`{"Put":{"TableName":"main","Item":{"pk":{"S":"k"},"sk":{"S":"%06d"},"pad":{"S":"%0200d"}},"ConditionExpression":"attribute_not_exists(pk)"}}]}`, i, i))
		fmt.Printf("ok %d\n", i)
	}
}

// kill -9 at each step of a compaction (the process kills itself there)
// loses nothing and applies nothing twice (ADD counters, conditional
// transactions), for a first compaction and for one that replaces an
// older snapshot.
func TestKill9AtEachCompactionStep(t *testing.T) {
	for _, older := range []bool{false, true} {
		for _, step := range compactionSteps {
			t.Run(fmt.Sprintf("older snapshot %v/%s", older, step), func(t *testing.T) {
				dir := t.TempDir()
				d := open(t, dir, 0)
				work(t, d, 0)
				if older {
					_ = d.Close() // a snapshot, and an empty journal of generation 2
					d = open(t, dir, -1)
				}
				work(t, d, 1)
				want := dump(t, d)
				crash(d) // the child compacts
				cmd := child(childDir+"="+dir, childStep+"="+step)
				err := cmd.Run()
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("child was not killed at %q: %v", step, err)
				}
				for restart := range 2 {
					d = open(t, dir, 0)
					if got := dump(t, d); got != want {
						t.Fatalf("restart %d after a kill at %q:\n got %s\nwant %s", restart, step, got, want)
					}
					work(t, d, 2+restart)
					want = dump(t, d)
					_ = d.Close()
				}
			})
		}
	}
}

// A kill -9 from outside while the child writes and compacts every few
// writes (wherever it lands: mid-append, mid-snapshot, between renames):
// every acknowledged transaction is there once, at most one more (the one
// in flight) is, and nothing is applied twice.
func TestKill9WhileCompacting(t *testing.T) {
	dir := t.TempDir()
	cmd := child(childDir + "=" + dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "ok "); ok {
			acked, _ = strconv.Atoi(n)
		}
		if acked == 300 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	_ = cmd.Wait()
	if acked < 300 {
		t.Fatalf("child stopped after %d writes", acked)
	}
	d := open(t, dir, 0)
	defer d.Close()
	var counter struct{ Item map[string]struct{ N string } }
	_ = json.Unmarshal([]byte(do(t, d, "GetItem", `{"TableName":"main","Key":{"pk":{"S":"counter"},"sk":{"S":"c"}}}`)), &counter)
	n, _ := strconv.Atoi(counter.Item["n"].N)
	var items struct{ Items []json.RawMessage }
	_ = json.Unmarshal([]byte(do(t, d, "Query", `{"TableName":"main","KeyConditionExpression":"pk = :k","ExpressionAttributeValues":{":k":{"S":"k"}}}`)), &items)
	t.Logf("acknowledged %d, counter %d, items %d, files %v", acked, n, len(items.Items), files(t, dir))
	if n < acked || n > acked+1 || len(items.Items) != n {
		t.Fatalf("acknowledged %d transactions; counter %d, items %d", acked, n, len(items.Items))
	}
}
