package emulators

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Consumed capacity as DynamoDB reports it: per 4 KB read (halved when
// eventually consistent), per KB written (the larger of before and after),
// twice in a transaction.
func TestConsumedCapacity(t *testing.T) {
	d := open(t, "", 0)
	do(t, d, "CreateTable", `{"TableName":"main",`+fmt.Sprintf(keySchema, "")+`}`)
	item := func(sk string, pad int) string {
		return fmt.Sprintf(`{"pk":{"S":"p"},"sk":{"S":%q},"pad":{"S":%q}}`, sk, strings.Repeat("x", pad))
	}
	key := func(sk string) string { return fmt.Sprintf(`{"pk":{"S":"p"},"sk":{"S":%q}}`, sk) }
	cases := []struct {
		name, op, body string
		read, write    float64
	}{
		{"put 100 B", "PutItem", `{"TableName":"main","Item":` + item("a", 100) + `}`, 0, 1},
		{"put 1.5 KB", "PutItem", `{"TableName":"main","Item":` + item("b", 1500) + `}`, 0, 2},
		{"shrink 1.5 KB to 100 B: the larger counts", "PutItem", `{"TableName":"main","Item":` + item("b", 100) + `}`, 0, 2},
		{"put 5 KB", "PutItem", `{"TableName":"main","Item":` + item("c", 5000) + `}`, 0, 5},
		{"strong read of 5 KB", "GetItem", `{"TableName":"main","Key":` + key("c") + `,"ConsistentRead":true}`, 2, 0},
		{"eventual read of 5 KB", "GetItem", `{"TableName":"main","Key":` + key("c") + `}`, 1, 0},
		{"projected read counts the whole item", "GetItem", `{"TableName":"main","Key":` + key("c") + `,"ConsistentRead":true,"ProjectionExpression":"pk"}`, 2, 0},
		{"read of no item", "GetItem", `{"TableName":"main","Key":` + key("none") + `,"ConsistentRead":true}`, 1, 0},
		{"query sums before rounding", "Query", `{"TableName":"main","KeyConditionExpression":"pk = :p","ExpressionAttributeValues":{":p":{"S":"p"}},"ConsistentRead":true}`, 2, 0},
		{"update", "UpdateItem", `{"TableName":"main","Key":` + key("a") + `,"UpdateExpression":"SET n = :n","ExpressionAttributeValues":{":n":{"N":"1"}}}`, 0, 1},
		{"transaction", "TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"main","Item":` + item("d", 10) + `}},{"ConditionCheck":{"TableName":"main","Key":` + key("a") + `,"ConditionExpression":"attribute_exists(pk)"}}]}`, 0, 4},
		{"delete 5 KB", "DeleteItem", `{"TableName":"main","Key":` + key("c") + `}`, 0, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := c.body[:len(c.body)-1] + `,"ReturnConsumedCapacity":"TOTAL"}`
			var out struct{ ConsumedCapacity json.RawMessage }
			if err := json.Unmarshal([]byte(do(t, d, c.op, body)), &out); err != nil {
				t.Fatal(err)
			}
			var caps []struct{ ReadCapacityUnits, WriteCapacityUnits float64 }
			raw := string(out.ConsumedCapacity)
			if !strings.HasPrefix(raw, "[") {
				raw = "[" + raw + "]"
			}
			if err := json.Unmarshal([]byte(raw), &caps); err != nil || len(caps) != 1 {
				t.Fatalf("ConsumedCapacity %s: %v", out.ConsumedCapacity, err)
			}
			if caps[0].ReadCapacityUnits != c.read || caps[0].WriteCapacityUnits != c.write {
				t.Errorf("read %v write %v, want %v %v", caps[0].ReadCapacityUnits, caps[0].WriteCapacityUnits, c.read, c.write)
			}
		})
	}
	// Not asked: not answered.
	if strings.Contains(do(t, d, "GetItem", `{"TableName":"main","Key":`+key("a")+`}`), "ConsumedCapacity") {
		t.Error("capacity answered without ReturnConsumedCapacity")
	}
}
