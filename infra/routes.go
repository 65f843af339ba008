package infra

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/jsii-runtime-go"
)

// The REST API sends a request to the resource that matches its path
// most specifically (a literal part before a {param}, a {param} before a
// greedy {proxy+}), then to that resource's method for the verb or its ANY.
// AWS documents neither that order for REST APIs nor whether a request
// whose resource has no method for its verb goes back up to a {proxy+}
// above it (docs/design/infra.md, The API's edge): the tree is laid out so that
// no request depends on either. Every resource a
// route makes also takes ANY, and a {proxy+} below it unless a {param}
// child already takes any segment there, both for the catalog function,
// which answers what no route names 404/405 in the ErrorModel
// (infra/routing_test.go walks the template).

// iamMethod is how every method of a function is called: SigV4.
var iamMethod = &awsapigateway.MethodOptions{AuthorizationType: awsapigateway.AuthorizationType_IAM}

// route adds a method on a path of the API and records the path and method
// for catchAll.
func (s *Stack) route(path, method string, integration awsapigateway.Integration, options *awsapigateway.MethodOptions) {
	s.API.Root().ResourceForPath(jsii.String(path)).AddMethod(jsii.String(method), integration, options)
	if s.routed == nil {
		s.routed = map[string][]string{}
	}
	path = strings.Trim(path, "/")
	s.routed[path] = append(s.routed[path], method)
}

// catchAll gives every resource below the root (the routes' and those
// between them) an ANY method and, where no {param} child takes any segment,
// a {proxy+} with an ANY method, all invoking the catalog function.
func (s *Stack) catchAll() {
	// No permission per method: the root {proxy+} method's (any method, any
	// path of the stage) already lets API Gateway invoke the function, and
	// Lambda bounds a function's policy at 20 KB (two statements a method).
	uri := fmt.Sprintf("arn:%s:apigateway:%s:lambda:path/2015-03-31/functions/%s/invocations",
		*awscdk.Aws_PARTITION(), *awscdk.Aws_REGION(), *s.APIFn.FunctionArn())
	catalogFn := awsapigateway.NewIntegration(&awsapigateway.IntegrationProps{
		Type: awsapigateway.IntegrationType_AWS_PROXY, IntegrationHttpMethod: jsii.String("POST"), Uri: jsii.String(uri),
	})
	paths := map[string]bool{}
	for p := range s.routed {
		parts := strings.Split(p, "/")
		for i := range parts {
			paths[strings.Join(parts[:i+1], "/")] = true
		}
	}
	variable := map[string]bool{} // paths with a {param} child
	for p := range paths {
		if i := strings.LastIndexByte(p, '/'); i >= 0 && strings.HasPrefix(p[i+1:], "{") {
			variable[p[:i]] = true
		} else if i < 0 && strings.HasPrefix(p, "{") {
			variable[""] = true
		}
	}
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range paths {
			if !yield(p) {
				return
			}
		}
	}) {
		res := s.API.Root().ResourceForPath(jsii.String(p))
		if !slices.Contains(s.routed[p], "ANY") {
			res.AddMethod(jsii.String("ANY"), catalogFn, iamMethod)
		}
		if !variable[p] {
			res.AddProxy(&awsapigateway.ProxyResourceOptions{AnyMethod: jsii.Bool(false)}).
				AddMethod(jsii.String("ANY"), catalogFn, iamMethod)
		}
	}
}
