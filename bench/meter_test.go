package bench

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"
)

// meter counts what the product asks of AWS, as AWS bills it: every SDK
// call by a middleware on the clients (DynamoDB with the capacity it
// reports through ReturnConsumedCapacity, SQS, Step Functions), and every
// S3 request at the embedded S3, whichever client sent it (iceberg-go's
// FileIO builds its own).
type meter struct {
	mu sync.Mutex
	u  usage
}

// usage is a count of calls by "Service Operation", and DynamoDB's units.
type usage struct {
	calls    map[string]int
	rcu, wcu float64
}

func (u usage) minus(v usage) usage {
	out := usage{calls: map[string]int{}, rcu: u.rcu - v.rcu, wcu: u.wcu - v.wcu}
	for k, n := range u.calls {
		if d := n - v.calls[k]; d != 0 {
			out.calls[k] = d
		}
	}
	return out
}

// sum counts the calls whose name starts with prefix.
func (u usage) sum(prefix string) int {
	n := 0
	for k, c := range u.calls {
		if strings.HasPrefix(k, prefix) {
			n += c
		}
	}
	return n
}

func (u usage) names() []string { return slices.Sorted(maps.Keys(u.calls)) }

func (m *meter) snapshot() usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return usage{calls: maps.Clone(m.u.calls), rcu: m.u.rcu, wcu: m.u.wcu}
}

func (m *meter) add(name string, rcu, wcu float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.u.calls == nil {
		m.u.calls = map[string]int{}
	}
	m.u.calls[name]++
	m.u.rcu += rcu
	m.u.wcu += wcu
}

// middleware is the SDK middleware: DynamoDB calls ask for their consumed
// capacity; every call is counted once (retries, which AWS bills too, go
// through the stack's later steps and are not seen apart).
func (m *meter) middleware(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("icehold-bench-meter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			askCapacity(in.Parameters)
			out, md, err := next.HandleInitialize(ctx, in)
			service, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
			if service == "S3" {
				return out, md, err // counted at the S3 endpoint
			}
			name := service + " " + op
			if r, ok := out.Result.(*sqs.ReceiveMessageOutput); ok && len(r.Messages) == 0 {
				name += " (empty)" // the event source mapping's idle polling: a fixed cost
			}
			rcu, wcu := capacityOf(out.Result)
			m.add(name, rcu, wcu)
			return out, md, err
		}), middleware.After)
}

func askCapacity(params any) {
	total := ddbtypes.ReturnConsumedCapacityTotal
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.PutItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.UpdateItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.DeleteItemInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.QueryInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.ScanInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.TransactWriteItemsInput:
		in.ReturnConsumedCapacity = total
	case *dynamodb.BatchWriteItemInput:
		in.ReturnConsumedCapacity = total
	}
}

func capacityOf(result any) (rcu, wcu float64) {
	var caps []ddbtypes.ConsumedCapacity
	switch out := result.(type) {
	case *dynamodb.GetItemOutput:
		caps = ptrs(out.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		caps = ptrs(out.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		caps = ptrs(out.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		caps = ptrs(out.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		caps = ptrs(out.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		caps = ptrs(out.ConsumedCapacity)
	case *dynamodb.TransactWriteItemsOutput:
		caps = out.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		caps = out.ConsumedCapacity
	}
	for _, c := range caps {
		if c.ReadCapacityUnits != nil {
			rcu += *c.ReadCapacityUnits
		}
		if c.WriteCapacityUnits != nil {
			wcu += *c.WriteCapacityUnits
		}
	}
	return rcu, wcu
}

func ptrs(c *ddbtypes.ConsumedCapacity) []ddbtypes.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []ddbtypes.ConsumedCapacity{*c}
}

// observeS3 is the embedded S3's observer: one count per request, by the
// class S3 prices it in.
func (m *meter) observeS3(r *http.Request) {
	q := r.URL.Query()
	key := strings.Trim(r.URL.Path, "/")
	_, key, _ = strings.Cut(key, "/") // bucket/key, path-style
	op := r.Method
	switch {
	case r.Method == http.MethodGet && (key == "" || q.Has("list-type")):
		op = "LIST"
	case r.Method == http.MethodPost && q.Has("delete"):
		op = "DeleteObjects"
	}
	m.add("S3 "+op, 0, 0)
}
