package emulators

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// send is do without the status check: the status and the body.
func send(d *DynamoDB, op, body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// inMinidyn counts the items minidyn holds for table.
func inMinidyn(d *DynamoDB, table string) int {
	mu := minidynMu(d.inner)
	mu.Lock()
	defer mu.Unlock()
	return len(minidynTables(d.inner)[table].Data)
}

// lazyState: tables "main" (item lines), "indexed" (a global index: loaded
// whole at a start) and "hashonly" (a hash key alone), 12 partitions of
// 25 items, compacted into a snapshot.
func lazyState(t *testing.T) string {
	dir := t.TempDir()
	d := open(t, dir, 0)
	do(t, d, "CreateTable", `{"TableName":"main",`+fmt.Sprintf(keySchema, "")+`}`)
	do(t, d, "CreateTable", `{"TableName":"indexed",`+fmt.Sprintf(keySchema, `,{"AttributeName":"owner","AttributeType":"S"}`)+
		`,"GlobalSecondaryIndexes":[{"IndexName":"by_owner","KeySchema":[{"AttributeName":"owner","KeyType":"HASH"}],"Projection":{"ProjectionType":"ALL"}}]}`)
	do(t, d, "CreateTable", `{"TableName":"hashonly","AttributeDefinitions":[{"AttributeName":"id","AttributeType":"S"}],"KeySchema":[{"AttributeName":"id","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}`)
	for p := range 12 {
		for i := range 25 {
			do(t, d, "PutItem", fmt.Sprintf(`{"TableName":"main","Item":{"pk":{"S":"P#%02d"},"sk":{"S":"%s#%03d"},"n":{"N":"%d"},"m":{"M":{"tag":{"S":"t\"%d"}}}}}`,
				p, []string{"a", "b", "ab"}[i%3], i, i, i%4))
		}
		do(t, d, "PutItem", fmt.Sprintf(`{"TableName":"indexed","Item":{"pk":{"S":"P#%02d"},"sk":{"S":"x"},"owner":{"S":"o%d"}}}`, p, p%2))
		do(t, d, "PutItem", fmt.Sprintf(`{"TableName":"hashonly","Item":{"id":{"S":"h%02d"},"v":{"N":"%d"}}}`, p, p))
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyDir copies a state directory.
func copyDir(t *testing.T, dir string) string {
	to := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir+"/.", to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return to
}

// lazyDump is every item of the three tables.
func lazyDump(t *testing.T, d *DynamoDB) string {
	var out []string
	for _, table := range []string{"main", "indexed", "hashonly"} {
		out = append(out, do(t, d, "Scan", `{"TableName":"`+table+`"}`))
	}
	return strings.Join(out, "\n")
}

func q(expr string, values map[string]string, extra string) string {
	var vs []string
	for k, v := range values {
		vs = append(vs, fmt.Sprintf(`%q:{"S":%q}`, k, v))
	}
	return fmt.Sprintf(`{"TableName":"main","KeyConditionExpression":%q,"ExpressionAttributeValues":{%s}%s}`, expr, strings.Join(vs, ","), extra)
}

// After a start, the items of a snapshot's item lines are loaded as
// requests name them, and every answer is the answer of a start that
// loaded everything: each key condition, paging, conditions on items not
// loaded yet, transactions, batches, item counts; and what a compaction of
// a half-loaded state, or a crash, leaves is the same state again.
func TestItemLinesAnswerAsAFullLoad(t *testing.T) {
	dir := lazyState(t)
	lazy, full := open(t, dir, 0), open(t, copyDir(t, dir), 0)
	if n := inMinidyn(lazy, "main"); n != 0 {
		t.Fatalf("a start loaded %d items of main", n)
	}
	if n := inMinidyn(lazy, "indexed"); n != 12 {
		t.Fatalf("a start loaded %d items of the indexed table, want all 12", n)
	}
	lazyDump(t, full) // loads everything
	pk := func(p int) string { return fmt.Sprintf("P#%02d", p) }
	key := func(p int, sk string) string { return fmt.Sprintf(`{"pk":{"S":%q},"sk":{"S":%q}}`, pk(p), sk) }
	cases := []struct{ name, op, body string }{
		{"get", "GetItem", `{"TableName":"main","Key":` + key(0, "a#000") + `}`},
		{"get missing", "GetItem", `{"TableName":"main","Key":` + key(0, "zz") + `}`},
		{"get hash only", "GetItem", `{"TableName":"hashonly","Key":{"id":{"S":"h03"}}}`},
		{"query partition", "Query", q("pk = :p", map[string]string{":p": pk(1)}, "")},
		{"query =", "Query", q("pk = :p AND sk = :s", map[string]string{":p": pk(2), ":s": "b#001"}, "")},
		{"query <", "Query", q("pk = :p AND sk < :s", map[string]string{":p": pk(3), ":s": "ab#005"}, "")},
		{"query <=", "Query", q("pk = :p AND sk <= :s", map[string]string{":p": pk(3), ":s": "ab#005"}, "")},
		{"query >", "Query", q("pk = :p AND sk > :s", map[string]string{":p": pk(4), ":s": "b#010"}, "")},
		{"query >=", "Query", q("pk = :p AND sk >= :s", map[string]string{":p": pk(4), ":s": "b#010"}, "")},
		{"query between", "Query", q("pk = :p AND sk BETWEEN :a AND :b", map[string]string{":p": pk(5), ":a": "a#003", ":b": "ab#020"}, "")},
		{"query begins_with", "Query", q("pk = :p AND begins_with(sk, :s)", map[string]string{":p": pk(6), ":s": "ab"}, "")},
		{"query sort key first, aliases", "Query", q("begins_with(#s, :s) AND #p = :p", map[string]string{":p": pk(7), ":s": "b#"}, `,"ExpressionAttributeNames":{"#p":"pk","#s":"sk"}`)},
		{"query backwards, a page", "Query", q("pk = :p", map[string]string{":p": pk(8)}, `,"ScanIndexForward":false,"Limit":4`)},
		{"query after a key", "Query", q("pk = :p AND sk > :s", map[string]string{":p": pk(9), ":s": "a"}, `,"Limit":3,"ExclusiveStartKey":`+key(9, "a#003"))},
		{"query filtered", "Query", q("pk = :p", map[string]string{":p": pk(10), ":z": "x"}, `,"FilterExpression":"n > :n OR m.tag = :z","ExpressionAttributeValues":{":p":{"S":"P#10"},":n":{"N":"20"},":z":{"S":"x"}}`)},
		{"query on the index", "Query", `{"TableName":"indexed","IndexName":"by_owner","KeyConditionExpression":"#o = :o","ExpressionAttributeNames":{"#o":"owner"},"ExpressionAttributeValues":{":o":{"S":"o1"}}}`},
		{"put over an item not loaded, refused", "PutItem", `{"TableName":"main","Item":` + key(11, "a#000")[:len(key(11, "a#000"))-1] + `,"n":{"N":"-1"}},"ConditionExpression":"attribute_not_exists(pk)"}`},
		{"update an item not loaded", "UpdateItem", `{"TableName":"main","Key":` + key(11, "b#001") + `,"UpdateExpression":"ADD n :one","ExpressionAttributeValues":{":one":{"N":"1"}},"ReturnValues":"ALL_NEW"}`},
		{"delete an item not loaded", "DeleteItem", `{"TableName":"main","Key":` + key(11, "ab#002") + `,"ReturnValues":"ALL_OLD"}`},
		{"transaction, its check on an item not loaded fails", "TransactWriteItems", `{"TransactItems":[` +
			`{"ConditionCheck":{"TableName":"main","Key":` + key(11, "a#003") + `,"ConditionExpression":"attribute_not_exists(pk)"}},` +
			`{"Put":{"TableName":"main","Item":{"pk":{"S":"new"},"sk":{"S":"1"}}}}]}`},
		{"transaction", "TransactWriteItems", `{"TransactItems":[` +
			`{"ConditionCheck":{"TableName":"main","Key":` + key(11, "a#003") + `,"ConditionExpression":"attribute_exists(pk)"}},` +
			`{"Update":{"TableName":"main","Key":` + key(11, "b#004") + `,"UpdateExpression":"ADD n :one","ConditionExpression":"n = :four","ExpressionAttributeValues":{":one":{"N":"1"},":four":{"N":"4"}}}},` +
			`{"Delete":{"TableName":"main","Key":` + key(11, "ab#005") + `}},` +
			`{"Put":{"TableName":"main","Item":{"pk":{"S":"new"},"sk":{"S":"1"}}}}]}`},
		{"batch get", "BatchGetItem", `{"RequestItems":{"main":{"Keys":[` + key(0, "b#001") + `,` + key(1, "b#001") + `]},"hashonly":{"Keys":[{"id":{"S":"h07"}}]}}}`},
		{"batch write", "BatchWriteItem", `{"RequestItems":{"main":[{"DeleteRequest":{"Key":` + key(0, "ab#002") + `}},{"PutRequest":{"Item":` + key(1, "ab#005") + `}}]}}`},
		{"query after the writes", "Query", q("pk = :p", map[string]string{":p": pk(11)}, "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lc, lb := send(lazy, tc.op, tc.body)
			fc, fb := send(full, tc.op, tc.body)
			if lc != fc || lb != fb {
				t.Fatalf("loaded on demand: %d %s\nloaded whole: %d %s", lc, lb, fc, fb)
			}
		})
	}
	if n := inMinidyn(lazy, "main"); n >= 12*25 {
		t.Fatalf("the requests loaded all %d items of main", n)
	}
	for _, table := range []string{"main", "indexed", "hashonly"} {
		var l, f struct{ Table struct{ ItemCount int } }
		_ = json.Unmarshal([]byte(do(t, lazy, "DescribeTable", `{"TableName":"`+table+`"}`)), &l)
		_ = json.Unmarshal([]byte(do(t, full, "DescribeTable", `{"TableName":"`+table+`"}`)), &f)
		if l.Table.ItemCount != f.Table.ItemCount || f.Table.ItemCount == 0 {
			t.Fatalf("%s: ItemCount %d, loaded whole %d", table, l.Table.ItemCount, f.Table.ItemCount)
		}
	}
	// A compaction of the half-loaded state, then a start on it.
	want := lazyDump(t, full)
	if err := lazy.Close(); err != nil {
		t.Fatal(err)
	}
	lazy = open(t, dir, 0)
	defer lazy.Close()
	if got := lazyDump(t, lazy); got != want {
		t.Fatalf("after a compaction of a half-loaded state:\n got %s\nwant %s", got, want)
	}
}

// Random requests on random keys, with restarts (clean and kill -9) in
// between, answer alike whether items were loaded on demand or whole.
func TestItemLinesRandomly(t *testing.T) {
	dir := lazyState(t)
	fullDir := copyDir(t, dir)
	lazy, full := open(t, dir, 4096), open(t, fullDir, 4096)
	rng := rand.New(rand.NewPCG(13, 13))
	for i := range 600 {
		p, sk := fmt.Sprintf("P#%02d", rng.IntN(13)), fmt.Sprintf("%s#%03d", []string{"a", "b", "ab", "c"}[rng.IntN(4)], rng.IntN(30))
		key := fmt.Sprintf(`{"pk":{"S":%q},"sk":{"S":%q}}`, p, sk)
		var op, body string
		switch rng.IntN(7) {
		case 0:
			op, body = "GetItem", `{"TableName":"main","Key":`+key+`}`
		case 1:
			op, body = "PutItem", fmt.Sprintf(`{"TableName":"main","Item":{"pk":{"S":%q},"sk":{"S":%q},"n":{"N":"%d"}},"ConditionExpression":"attribute_not_exists(pk)"}`, p, sk, i)
		case 2:
			op, body = "UpdateItem", `{"TableName":"main","Key":`+key+`,"UpdateExpression":"ADD n :one","ExpressionAttributeValues":{":one":{"N":"1"}},"ReturnValues":"ALL_NEW"}`
		case 3:
			op, body = "DeleteItem", `{"TableName":"main","Key":`+key+`,"ReturnValues":"ALL_OLD"}`
		case 4:
			op, body = "Query", q("pk = :p AND begins_with(sk, :s)", map[string]string{":p": p, ":s": sk[:rng.IntN(3)]}, "")
		case 5:
			op, body = "Query", q("pk = :p AND sk >= :s", map[string]string{":p": p, ":s": sk}, `,"Limit":2`)
		case 6:
			switch rng.IntN(20) {
			case 0:
				_ = lazy.Close()
				_ = full.Close()
			case 1:
				crash(lazy)
				crash(full)
			default:
				continue
			}
			lazy, full = open(t, dir, 4096), open(t, fullDir, 4096)
			lazyDump(t, full)
			continue
		}
		lc, lb := send(lazy, op, body)
		fc, fb := send(full, op, body)
		if lc != fc || lb != fb {
			t.Fatalf("request %d %s %s:\nloaded on demand: %d %s\nloaded whole: %d %s", i, op, body, lc, lb, fc, fb)
		}
	}
	if got, want := lazyDump(t, lazy), lazyDump(t, full); got != want {
		t.Fatalf("end state:\n got %s\nwant %s", got, want)
	}
	_ = lazy.Close()
	_ = full.Close()
}

// Requests on many partitions at once, while compactions (every 2 KiB of
// journal) rewrite the item lines: each item is loaded once and counted
// up exactly as often as it was asked to be.
func TestItemLinesConcurrently(t *testing.T) {
	dir := lazyState(t)
	d := open(t, dir, 2048)
	var wg sync.WaitGroup
	for p := range 12 {
		wg.Go(func() {
			for round := range 3 {
				for i := range 25 {
					sk := fmt.Sprintf("%s#%03d", []string{"a", "b", "ab"}[i%3], i)
					key := fmt.Sprintf(`{"pk":{"S":"P#%02d"},"sk":{"S":%q}}`, p, sk)
					if round == 1 {
						send(d, "Query", q("pk = :p AND begins_with(sk, :s)", map[string]string{":p": fmt.Sprintf("P#%02d", p), ":s": sk[:1]}, ""))
					}
					if c, b := send(d, "UpdateItem", `{"TableName":"main","Key":`+key+`,"UpdateExpression":"ADD n :one","ExpressionAttributeValues":{":one":{"N":"1"}}}`); c != http.StatusOK {
						t.Errorf("update %s: %d %s", key, c, b)
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			send(d, "Scan", `{"TableName":"hashonly"}`)
			send(d, "DescribeTable", `{"TableName":"main"}`)
		}
	})
	wg.Wait()
	crash(d)
	d = open(t, dir, 0)
	defer d.Close()
	var out struct {
		Items []struct {
			SK struct{ S string } `json:"sk"`
			N  struct{ N string } `json:"n"`
		}
	}
	if err := json.Unmarshal([]byte(do(t, d, "Scan", `{"TableName":"main"}`)), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 12*25 {
		t.Fatalf("%d items, want %d", len(out.Items), 12*25)
	}
	for _, it := range out.Items {
		var i int
		_, _ = fmt.Sscanf(it.SK.S[strings.IndexByte(it.SK.S, '#')+1:], "%d", &i)
		if it.N.N != fmt.Sprint(i+3) {
			t.Fatalf("%s: n = %s, want %d", it.SK.S, it.N.N, i+3)
		}
	}
}

// A request loads what it names and no more: one key, a key range, a
// partition; a Scan of another table loads none of main's.
func TestItemLinesLoadOnlyWhatIsNamed(t *testing.T) {
	d := open(t, lazyState(t), 0)
	defer d.Close()
	steps := []struct {
		name, op, body string
		loaded         int
	}{
		{"one key", "GetItem", `{"TableName":"main","Key":{"pk":{"S":"P#00"},"sk":{"S":"b#001"}}}`, 1},
		{"a missing key", "GetItem", `{"TableName":"main","Key":{"pk":{"S":"P#00"},"sk":{"S":"b#002"}}}`, 1},
		{"a key range", "Query", q("pk = :p AND begins_with(sk, :s)", map[string]string{":p": "P#01", ":s": "ab"}, ""), 1 + 8},
		{"a partition", "Query", q("pk = :p", map[string]string{":p": "P#02"}, ""), 1 + 8 + 25},
		{"another table", "Scan", `{"TableName":"hashonly"}`, 1 + 8 + 25},
		{"the table", "Scan", `{"TableName":"main"}`, 12 * 25},
	}
	for _, s := range steps {
		do(t, d, s.op, s.body)
		if n := inMinidyn(d, "main"); n != s.loaded {
			t.Fatalf("after %s: %d items of main loaded, want %d", s.name, n, s.loaded)
		}
	}
}

// A request naming one key twice (refused by DynamoDB, but after the
// load) loads it once: the count of lines left stays right, and the other
// items still load when named.
func TestItemLinesKeyNamedTwice(t *testing.T) {
	d := open(t, lazyState(t), 0)
	defer d.Close()
	key := `{"pk":{"S":"P#00"},"sk":{"S":"a#000"}}`
	send(d, "BatchGetItem", `{"RequestItems":{"main":{"Keys":[`+key+`,`+key+`]}}}`)
	d.lmu.Lock()
	left := d.lazy.left
	d.lmu.Unlock()
	if want := 12*25 + 12 - 1; left != want { // main's and hashonly's lines
		t.Fatalf("%d lines left, want %d", left, want)
	}
	got := do(t, d, "GetItem", `{"TableName":"main","Key":{"pk":{"S":"P#11"},"sk":{"S":"a#024"}}}`)
	if !strings.Contains(got, `"a#024"`) {
		t.Fatalf("an item not loaded yet is not found: %s", got)
	}
}

// Items loaded one request at a time keep only their own memory: each load
// once kept a 256-value slab alive for an item of ten (38 KB an item; a
// restarted server grew by 300 MB as it listed 10,000 tables).
func TestItemLinesKeepNoMoreThanTheirItems(t *testing.T) {
	d := open(t, lazyState(t), 0)
	defer d.Close()
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for p := range 12 {
		for i := range 25 {
			sk := fmt.Sprintf("%s#%03d", []string{"a", "b", "ab"}[i%3], i)
			do(t, d, "GetItem", fmt.Sprintf(`{"TableName":"main","Key":{"pk":{"S":"P#%02d"},"sk":{"S":%q}}}`, p, sk))
		}
	}
	grew := int64(heap()) - int64(before)
	if n := inMinidyn(d, "main"); n != 12*25 {
		t.Fatalf("%d items loaded", n)
	}
	if grew > 2<<20 {
		t.Fatalf("300 items of about 200 bytes of JSON each grew the heap by %d KB", grew>>10)
	}
	t.Logf("300 items loaded one by one: heap +%d KB", grew>>10)
}
