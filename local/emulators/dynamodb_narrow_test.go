package emulators

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Requests run on narrowed views of their tables answer exactly as on the
// whole tables: random queries (every key condition, pages, backwards,
// filters), writes (conditional, with return values) and transactions
// (some refused by a condition), on a table of strings, a hash-only one and
// one with a global index (left whole), in memory and journaled with
// restarts; then the tables hold the same items.
func TestNarrowedRequestsAnswerAlike(t *testing.T) {
	for _, journaled := range []bool{false, true} {
		t.Run(fmt.Sprintf("journaled %v", journaled), func(t *testing.T) {
			var narrow, wide *DynamoDB
			var nDir, wDir string
			reopen := func() {
				var err error
				if narrow, err = OpenDynamoDB(nDir, DynamoDBOptions{CompactAt: 8192}); err != nil {
					t.Fatal(err)
				}
				if wide, err = OpenDynamoDB(wDir, DynamoDBOptions{CompactAt: 8192, wide: true}); err != nil {
					t.Fatal(err)
				}
			}
			if journaled {
				nDir, wDir = t.TempDir(), t.TempDir()
			}
			reopen()
			both := func(op, body string) {
				t.Helper()
				nc, nb := send(narrow, op, body)
				wc, wb := send(wide, op, body)
				if nc != wc || nb != wb {
					t.Fatalf("%s %s:\nnarrowed: %d %s\nwhole: %d %s", op, body, nc, nb, wc, wb)
				}
			}
			both("CreateTable", `{"TableName":"main",`+fmt.Sprintf(keySchema, "")+`}`)
			both("CreateTable", `{"TableName":"hashonly","AttributeDefinitions":[{"AttributeName":"id","AttributeType":"S"}],"KeySchema":[{"AttributeName":"id","KeyType":"HASH"}],"BillingMode":"PAY_PER_REQUEST"}`)
			both("CreateTable", `{"TableName":"indexed",`+fmt.Sprintf(keySchema, `,{"AttributeName":"owner","AttributeType":"S"}`)+
				`,"GlobalSecondaryIndexes":[{"IndexName":"by_owner","KeySchema":[{"AttributeName":"owner","KeyType":"HASH"}],"Projection":{"ProjectionType":"ALL"}}]}`)
			rng := rand.New(rand.NewPCG(7, 7))
			pks := []string{"P", "P.x", "PX", "Q", "P#1"} // "P.x" shares minidyn's key prefix "P."
			for i := range 1500 {
				p, sk := pks[rng.IntN(len(pks))], fmt.Sprintf("%s%02d", []string{"a", "b", "ab"}[rng.IntN(3)], rng.IntN(12))
				key := fmt.Sprintf(`{"pk":{"S":%q},"sk":{"S":%q}}`, p, sk)
				switch rng.IntN(10) {
				case 0:
					both("PutItem", fmt.Sprintf(`{"TableName":"main","Item":{"pk":{"S":%q},"sk":{"S":%q},"n":{"N":"%d"}},"ConditionExpression":"attribute_not_exists(pk)","ReturnValues":"ALL_OLD"}`, p, sk, i))
				case 1:
					both("PutItem", fmt.Sprintf(`{"TableName":"main","Item":{"pk":{"S":%q},"sk":{"S":%q},"n":{"N":"%d"}},"ReturnValues":"ALL_OLD"}`, p, sk, i))
				case 2:
					both("UpdateItem", `{"TableName":"main","Key":`+key+`,"UpdateExpression":"ADD n :one","ExpressionAttributeValues":{":one":{"N":"1"}},"ReturnValues":"ALL_NEW"}`)
				case 3:
					both("DeleteItem", `{"TableName":"main","Key":`+key+`,"ConditionExpression":"attribute_exists(pk)","ReturnValues":"ALL_OLD"}`)
				case 4:
					other := fmt.Sprintf(`{"pk":{"S":%q},"sk":{"S":"b%02d"}}`, pks[rng.IntN(len(pks))], rng.IntN(12))
					cond := []string{"attribute_exists(pk)", "attribute_not_exists(pk)"}[rng.IntN(2)]
					both("TransactWriteItems", `{"TransactItems":[`+
						`{"ConditionCheck":{"TableName":"main","Key":`+other+`,"ConditionExpression":"`+cond+`"}},`+
						`{"Update":{"TableName":"main","Key":`+key+`,"UpdateExpression":"ADD n :two","ExpressionAttributeValues":{":two":{"N":"2"}}}},`+
						fmt.Sprintf(`{"Put":{"TableName":"hashonly","Item":{"id":{"S":"h%d"},"v":{"N":"%d"}}}},`, rng.IntN(5), i)+
						fmt.Sprintf(`{"Put":{"TableName":"indexed","Item":{"pk":{"S":%q},"sk":{"S":"x"},"owner":{"S":"o%d"}}}}]}`, p, i%3))
				case 5:
					both("Query", q("pk = :p AND begins_with(sk, :s)", map[string]string{":p": p, ":s": sk[:rng.IntN(2)+1]}, ""))
				case 6:
					both("Query", q("pk = :p AND sk BETWEEN :a AND :b", map[string]string{":p": p, ":a": "a03", ":b": sk}, fmt.Sprintf(`,"Limit":%d,"ScanIndexForward":%v`, 1+rng.IntN(4), rng.IntN(2) == 0)))
				case 7:
					both("Query", q("pk = :p", map[string]string{":p": p}, `,"Limit":3,"ExclusiveStartKey":`+key))
				case 8:
					both("Query", `{"TableName":"hashonly","KeyConditionExpression":"id = :i","ExpressionAttributeValues":{":i":{"S":"h`+fmt.Sprint(rng.IntN(5))+`"}}}`)
					both("Query", `{"TableName":"indexed","IndexName":"by_owner","KeyConditionExpression":"#o = :o","ExpressionAttributeNames":{"#o":"owner"},"ExpressionAttributeValues":{":o":{"S":"o1"}}}`)
				case 9:
					both("GetItem", `{"TableName":"main","Key":`+key+`}`)
					if journaled && rng.IntN(15) == 0 {
						if rng.IntN(2) == 0 {
							_, _ = narrow.Close(), wide.Close()
						} else {
							crash(narrow)
							crash(wide)
						}
						reopen()
					}
				}
			}
			// A Scan's order is DynamoDB's to choose (the narrowing one
			// holds items in key order, minidyn by its joined key): the
			// same items.
			for _, table := range []string{"main", "hashonly", "indexed"} {
				body := `{"TableName":"` + table + `"}`
				if n, w := scanned(t, narrow, body), scanned(t, wide, body); n != w {
					t.Fatalf("Scan %s:\nnarrowed: %s\nwhole: %s", body, n, w)
				}
			}
			_, _ = narrow.Close(), wide.Close()
		})
	}
}

// scanned is a Scan's items, sorted.
func scanned(t *testing.T, d *DynamoDB, body string) string {
	t.Helper()
	var out struct{ Items []json.RawMessage }
	if err := json.Unmarshal([]byte(do(t, d, "Scan", body)), &out); err != nil {
		t.Fatal(err)
	}
	items := make([]string, len(out.Items))
	for i, it := range out.Items {
		items[i] = string(it)
	}
	slices.Sort(items)
	return strings.Join(items, "\n")
}
