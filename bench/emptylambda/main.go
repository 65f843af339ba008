// Command emptylambda is a Go Lambda that does nothing: BenchmarkColdStart
// builds it as the functions are built and sets their init beside its.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context) error { return nil })
}
