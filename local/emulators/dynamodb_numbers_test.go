package emulators

import (
	"fmt"
	"strings"
	"testing"
)

// minidyn evaluates expressions on float64: a number past 2^53 in an
// update or a condition came back rounded (an Iceberg snapshot id stored
// by a SET was off by a few hundred) or compared equal to its neighbours.
// DynamoDB keeps 38 digits; the emulator refuses what it would round
// rather than store or compare a number DynamoDB never would (an update
// rounds every number of the item it writes back, so an item may hold
// none).
func TestNumbersExpressionsWouldRoundAreRefused(t *testing.T) {
	d := open(t, t.TempDir(), 0)
	do(t, d, "CreateTable", `{"TableName":"main",`+fmt.Sprintf(keySchema, "")+`}`)
	key := `{"pk":{"S":"a"},"sk":{"S":"b"}}`
	do(t, d, "PutItem", `{"TableName":"main","Item":{"pk":{"S":"a"},"sk":{"S":"b"},"id":{"N":"12"}}}`)
	for _, c := range []struct {
		name, op, body string
		refused        bool
	}{
		{"a SET of a large number", "UpdateItem", `{"TableName":"main","Key":` + key + `,"UpdateExpression":"SET n = :v","ExpressionAttributeValues":{":v":{"N":"2756004841962297871"}}}`, true},
		{"one inside a list", "UpdateItem", `{"TableName":"main","Key":` + key + `,"UpdateExpression":"SET w = :v","ExpressionAttributeValues":{":v":{"L":[{"N":"1"},{"N":"-2756004841962297871"}]}}}`, true},
		{"a condition on one", "DeleteItem", `{"TableName":"main","Key":` + key + `,"ConditionExpression":"id = :v","ExpressionAttributeValues":{":v":{"N":"2756004841962297872"}}}`, true},
		{"one in a transaction", "TransactWriteItems", `{"TransactItems":[{"Update":{"TableName":"main","Key":` + key + `,"UpdateExpression":"SET n = :v","ExpressionAttributeValues":{":v":{"N":"9007199254740993"}}}}]}`, true},
		{"an item holding one (an update would round it, updated or not)", "PutItem", `{"TableName":"main","Item":{"pk":{"S":"a"},"sk":{"S":"b"},"id":{"N":"2756004841962297871"}}}`, true},
		{"2^53 itself", "UpdateItem", `{"TableName":"main","Key":` + key + `,"UpdateExpression":"SET n = :v","ExpressionAttributeValues":{":v":{"N":"9007199254740992"}}}`, false},
		{"small numbers and decimals", "UpdateItem", `{"TableName":"main","Key":` + key + `,"UpdateExpression":"SET n = :v, f = :f","ExpressionAttributeValues":{":v":{"N":"1796534774640"},":f":{"N":"0.1"}}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := send(d, c.op, c.body)
			if c.refused && (status != 400 || !strings.Contains(body, "ValidationException")) {
				t.Errorf("%d %s, want a ValidationException", status, body)
			}
			if !c.refused && status != 200 {
				t.Errorf("%d %s, want 200", status, body)
			}
		})
	}
	// Nothing refused changed the item.
	if got := do(t, d, "GetItem", `{"TableName":"main","Key":`+key+`}`); !strings.Contains(got, `"id":{"N":"12"}`) || strings.Contains(got, `"w"`) {
		t.Errorf("the item after the refusals: %s", got)
	}
	_ = d.Close()
}
