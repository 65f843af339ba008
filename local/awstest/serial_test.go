package awstest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/awsconfig"
)

// cutting serves DynamoDB from the embedded emulator and cuts the answer to
// the first try of every request, as moto's server does now and then under
// load: the request takes effect, then the connection closes, with half
// the answer sent (half) or none of it.
type cutting struct {
	next http.Handler
	half bool
	mu   sync.Mutex
	seen map[string]bool
	cuts int
}

func (c *cutting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	key := r.Header.Get("X-Amz-Target") + string(body)
	c.mu.Lock()
	first := !c.seen[key]
	c.seen[key] = true
	if first {
		c.cuts++
	}
	c.mu.Unlock()
	if !first {
		c.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	if c.half {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(rec.Body.Len()))
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes()[:rec.Body.Len()/2])
		w.(http.Flusher).Flush()
	}
	panic(http.ErrAbortHandler) // the connection closes
}

// Every answer cut once, in the headers or in the body: each call through
// SerialDynamoDB still answers what DynamoDB would have, and each write
// takes effect once (a conditional put that took effect is not refused by
// its own retry, an ADD counts once).
func TestSerialDynamoDBMakesCutAnswersWhole(t *testing.T) {
	for _, half := range []bool{true, false} {
		t.Run("half the answer "+strconv.FormatBool(half), func(t *testing.T) {
			emu, err := emulators.NewDynamoDB("")
			if err != nil {
				t.Fatal(err)
			}
			cut := &cutting{next: emu, half: half, seen: map[string]bool{}}
			upstream := httptest.NewServer(cut)
			defer upstream.Close()
			target, _ := url.Parse(upstream.URL)
			proxy := httptest.NewServer(SerialDynamoDB(target))
			defer proxy.Close()
			ep := awsconfig.Endpoints{DynamoDB: proxy.URL, Region: Region, AccessKey: AccessKey, SecretKey: SecretKey}
			cfg, err := awsconfig.Load(context.Background(), ep)
			if err != nil {
				t.Fatal(err)
			}
			db := awsconfig.DynamoDB(cfg, ep)
			runCutCalls(t, db)
			if cut.cuts < 10 {
				t.Errorf("only %d answers were cut", cut.cuts)
			}
		})
	}
}

func runCutCalls(t *testing.T, db *dynamodb.Client) {
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": s("p"), "sk": s(sk)}
	}
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("t"), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}}})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) { // sent again after a cut: the table exists (the store takes that as done)
		t.Fatalf("create table: %v", err)
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: map[string]types.AttributeValue{"pk": s("p"), "sk": s("a"), "v": s("1")},
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	step("conditional put", err)
	up, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key("c"), UpdateExpression: aws.String("ADD n :one"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")}, ReturnValues: types.ReturnValueAllNew})
	step("update ADD", err)
	if got := up.Attributes["n"]; got == nil || got.(*types.AttributeValueMemberN).Value != "1" {
		t.Errorf("update ADD 1 answered %v, want n = 1", up.Attributes)
	}
	upd, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key("c"), UpdateExpression: aws.String("ADD n :one SET w = :w"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1"), ":w": s("x")}, ReturnValues: types.ReturnValueUpdatedOld})
	step("update UPDATED_OLD", err)
	if got := upd.Attributes["n"]; len(upd.Attributes) != 1 || got.(*types.AttributeValueMemberN).Value != "1" {
		t.Errorf("UPDATED_OLD answered %v, want n = 1 alone", upd.Attributes)
	}
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("t"), Item: map[string]types.AttributeValue{"pk": s("p"), "sk": s("b")}, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
		{Update: &types.Update{TableName: aws.String("t"), Key: key("c"), UpdateExpression: aws.String("ADD n :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": n("1")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("t"), Key: key("a"), ConditionExpression: aws.String("attribute_exists(pk)")}},
	}})
	step("transaction", err)
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: map[string]types.AttributeValue{"pk": s("p"), "sk": s("a"), "v": s("2")},
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Errorf("a put whose condition fails: %v, want ConditionalCheckFailed", err)
	}
	del, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: key("b"), ReturnValues: types.ReturnValueAllOld,
		ConditionExpression: aws.String("attribute_exists(pk)")})
	step("conditional delete", err)
	if del.Attributes["sk"] == nil {
		t.Errorf("delete ALL_OLD answered %v, want the item", del.Attributes)
	}
	_, err = db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"t": {
		{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": s("p"), "sk": s("d")}}},
		{DeleteRequest: &types.DeleteRequest{Key: key("zz")}},
	}}})
	step("batch write", err)
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key("c"), ConsistentRead: aws.Bool(true)})
	step("get", err)
	if v := got.Item["n"]; v == nil || v.(*types.AttributeValueMemberN).Value != "3" {
		t.Errorf("the counter is %v after three ADD 1, want 3 (each write once)", got.Item)
	}
	q, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("t"), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("p")}})
	step("query", err)
	var sks []string
	for _, it := range q.Items {
		sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
	}
	if strings.Join(sks, ",") != "a,c,d" {
		t.Errorf("query: %v, want a,c,d", sks)
	}
}
