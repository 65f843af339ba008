package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/icehold/icehold/shared/router"
)

// The front door (docs/design/infra.md, The API's edge): an HTTP API with
// IAM authorization by default (icehold:api=http), the REST API where an
// operator needs what only it offers (icehold:api=rest: WAF, a private
// endpoint, a resource policy, gateway responses), or both while clients
// move from the REST API to the HTTP API (icehold:api=both). Both route
// the same requests to the same functions, with SigV4 (service
// execute-api), throttling and a JSON access log in the same log group.

// restAPI is the REST API: explicit routes (lifecycleRoute, catchAll),
// gateway responses in the ErrorModel, the OAuth2 token endpoint's refusal
// as a mock integration.
func (s *Stack) restAPI(st awscdk.Stack, p Props) {
	s.API = awsapigateway.NewLambdaRestApi(st, jsii.String("Api"), &awsapigateway.LambdaRestApiProps{
		Handler: s.APIFn,
		// Routes are explicit so the lifecycle operations can have their own
		// functions; everything else goes to the catalog function.
		Proxy: jsii.Bool(false),
		// Gzip answers travel base64 through the proxy integration.
		BinaryMediaTypes: jsii.Strings("*/*"),
		DefaultMethodOptions: &awsapigateway.MethodOptions{
			AuthorizationType: awsapigateway.AuthorizationType_IAM,
		},
		DeployOptions: &awsapigateway.StageOptions{
			StageName: jsii.String("v1"), TracingEnabled: jsii.Bool(true),
			// Every method of the stage: a runaway client gets 429s (the
			// Throttled gateway response) before it takes the account's
			// Lambda concurrency.
			ThrottlingRateLimit:  jsii.Number(p.APIRate),
			ThrottlingBurstLimit: jsii.Number(p.APIBurst),
			AccessLogDestination: awsapigateway.NewLogGroupLogDestination(s.AccessLogs),
			AccessLogFormat:      awsapigateway.AccessLogFormat_Custom(jsii.String(accessLogFormat(restLogFields))),
		},
	})
	// One name for the URL everywhere: the output CatalogUri, not also
	// the Endpoint<hash> output LambdaRestApi adds.
	s.API.Node().TryRemoveChild(jsii.String("Endpoint"))
	s.API.Root().AddMethod(jsii.String("ANY"), nil, nil)
	gatewayErrors(s.API)
	s.API.Root().AddProxy(&awsapigateway.ProxyResourceOptions{AnyMethod: jsii.Bool(true)})
	s.oauthTokens()
}

// httpRoutes gives the HTTP API a route for every route of the router, to
// the function lifecycleRoute named for it or else the catalog function;
// a $default route takes every other request to the catalog function,
// which answers 404/405 in the ErrorModel. An HTTP API picks a route that
// matches the whole path before one with a greedy variable before
// $default ("Create routes for HTTP APIs", Routing API requests), and
// infra/routing_test.go checks that no request's route depends on more.
func (s *Stack) httpRoutes(p Props) {
	api := s.HTTPAPI
	apiID := api.Ref()
	integrations := map[awslambda.IFunction]string{}
	target := func(fn awslambda.IFunction) *string {
		if id, ok := integrations[fn]; ok {
			return jsii.String("integrations/" + id)
		}
		name := *fn.Node().Id()
		integ := awsapigatewayv2.NewCfnIntegration(api, jsii.String(name), &awsapigatewayv2.CfnIntegrationProps{
			ApiId: apiID, IntegrationType: jsii.String("AWS_PROXY"), IntegrationUri: fn.FunctionArn(),
			PayloadFormatVersion: jsii.String("2.0"),
			// An HTTP API waits 30 s at most; the functions stop at 29.
			TimeoutInMillis: jsii.Number(30_000),
		})
		// One permission a function for the whole API (any stage, method
		// and path): a function's policy is bounded at 20 KB.
		awslambda.NewCfnPermission(api, jsii.String("Invoke"+name), &awslambda.CfnPermissionProps{
			Action: jsii.String("lambda:InvokeFunction"), FunctionName: fn.FunctionName(),
			Principal: jsii.String("apigateway.amazonaws.com"),
			SourceArn: awscdk.Stack_Of(api).FormatArn(&awscdk.ArnComponents{
				Service: jsii.String("execute-api"), Resource: apiID, ResourceName: jsii.String("*"),
				ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
			}),
		})
		integrations[fn] = *integ.Ref()
		return jsii.String("integrations/" + *integ.Ref())
	}
	route := func(key string, fn awslambda.IFunction, auth string) {
		awsapigatewayv2.NewCfnRoute(api, jsii.String(key), &awsapigatewayv2.CfnRouteProps{
			ApiId: apiID, RouteKey: jsii.String(key), AuthorizationType: jsii.String(auth), Target: target(fn),
		})
	}
	keys := map[string]bool{}
	for _, r := range router.Routes() {
		keys[HTTPRouteKey(r.Method, r.Pattern)] = true
	}
	for k := range s.fnRoutes {
		if !keys[k] {
			panic(fmt.Sprintf("infra: %s has a function but is no route of the router", k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		fn := s.fnRoutes[k]
		if fn == nil {
			fn = s.APIFn
		}
		route(k, fn, "AWS_IAM")
	}
	route("$default", s.APIFn, "AWS_IAM")
	// OAuth2 clients send no SigV4: behind IAM authorization they would
	// read a bare 403. The catalog function answers them in RFC 6749's
	// shape (router.OAuthRefusal), as the local router does.
	route("POST "+oauthTokensPath, s.APIFn, "NONE")

	awsapigatewayv2.NewCfnStage(api, jsii.String("DefaultStage"), &awsapigatewayv2.CfnStageProps{
		// The $default stage serves at the API's root: rawPath is the
		// request's path (a named stage would prefix it).
		ApiId: apiID, StageName: jsii.String("$default"), AutoDeploy: jsii.Bool(true),
		// Every route: a runaway client gets 429s before it takes the
		// account's Lambda concurrency.
		DefaultRouteSettings: &awsapigatewayv2.CfnStage_RouteSettingsProperty{
			ThrottlingRateLimit: jsii.Number(p.APIRate), ThrottlingBurstLimit: jsii.Number(p.APIBurst),
		},
		AccessLogSettings: &awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
			DestinationArn: s.AccessLogs.LogGroupArn(), Format: jsii.String(accessLogFormat(httpLogFields)),
		},
	})
}

// oauthTokensPath is the Iceberg REST spec's OAuth2 token endpoint, which
// icehold does not offer.
const oauthTokensPath = "/v1/oauth/tokens"

// HTTPRouteKey is an HTTP API's route key for a route of the router: the
// router's wildcard for the rest of the path, {name...}, is the HTTP API's
// greedy {name+}.
func HTTPRouteKey(method, pattern string) string {
	return method + " " + strings.ReplaceAll(pattern, "...}", "+}")
}

// lambdaRoute sends a route of the router (path without its leading slash)
// to a function of its own rather than the catalog function, on each API.
func (s *Stack) lambdaRoute(path, method string, fn awslambda.IFunction) {
	if s.fnRoutes == nil {
		s.fnRoutes = map[string]awslambda.IFunction{}
	}
	s.fnRoutes[HTTPRouteKey(method, "/"+path)] = fn
	if s.API != nil {
		s.route(path, method, awsapigateway.NewLambdaIntegration(fn, nil), iamMethod)
	}
}

// executeAPIArns are the ARNs engines are allowed execute-api:Invoke on:
// every stage, method and path of each API.
func (s *Stack) executeAPIArns() []string {
	var out []string
	if s.API != nil {
		out = append(out, *s.API.ArnForExecuteApi(nil, nil, nil))
	}
	if s.HTTPAPI != nil {
		out = append(out, *awscdk.Stack_Of(s.HTTPAPI).FormatArn(&awscdk.ArnComponents{
			Service: jsii.String("execute-api"), Resource: s.HTTPAPI.Ref(), ResourceName: jsii.String("*"),
			ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		}))
	}
	return out
}

// catalogURIs are the outputs naming the catalog's URL: CatalogUri, the
// one clients use (the HTTP API's unless icehold:api=rest), and during a
// switch (icehold:api=both) RestCatalogUri, the REST API clients move
// from.
func (s *Stack) catalogURIs(st awscdk.Stack) {
	const what = "the Iceberg REST catalog (SigV4, service execute-api): engines' uri, the CLI's --url"
	if s.HTTPAPI == nil {
		awscdk.NewCfnOutput(st, jsii.String("CatalogUri"), &awscdk.CfnOutputProps{Value: s.API.Url(), Description: jsii.String(what)})
		return
	}
	awscdk.NewCfnOutput(st, jsii.String("CatalogUri"), &awscdk.CfnOutputProps{Value: s.HTTPAPI.AttrApiEndpoint(), Description: jsii.String(what)})
	if s.API != nil {
		awscdk.NewCfnOutput(st, jsii.String("RestCatalogUri"), &awscdk.CfnOutputProps{Value: s.API.Url(),
			Description: jsii.String("the REST API, serving until the next deploy without icehold:api=both: move every client to CatalogUri")})
	}
}

// The access log: one JSON object per request: who (the IAM ARN API
// Gateway authenticated), what (method, path, the resource or route it
// matched), the answer (status, bytes, latency, API Gateway's own error).
// Every value is a string, so a field API Gateway leaves empty ("-") keeps
// the line valid JSON. The two APIs name the matched route differently.
var (
	commonLogFields = map[string]string{
		"requestId": "$context.requestId", "time": "$context.requestTime", "ip": "$context.identity.sourceIp",
		"caller": "$context.identity.userArn", "method": "$context.httpMethod", "path": "$context.path",
		"status": "$context.status", "bytes": "$context.responseLength",
		"latencyMs": "$context.responseLatency", "integrationStatus": "$context.integrationStatus",
		"error": "$context.error.messageString",
	}
	restLogFields = logFields("resource", "$context.resourcePath")
	httpLogFields = logFields("route", "$context.routeKey")
)

// logFields are the common fields and the one naming what matched.
func logFields(k, v string) map[string]string {
	m := maps.Clone(commonLogFields)
	m[k] = v
	return m
}

func accessLogFormat(fields map[string]string) string {
	raw, _ := json.Marshal(fields) // sorted keys: a stable template
	// messageString is quoted and escaped by API Gateway itself.
	return strings.Replace(string(raw), `"$context.error.messageString"`, `$context.error.messageString`, 1)
}

// gatewayErrors shapes the errors the REST API answers itself (before or
// instead of a function: a body past the invoke limit, a missing or bad
// signature, throttling, a failed or timed-out integration) as the Iceberg
// ErrorModel the functions answer, so a client sees one error shape. An
// HTTP API has no gateway responses: docs/operations.md lists its bodies.
func gatewayErrors(api awsapigateway.RestApi) {
	for _, g := range []struct {
		id     string
		typ    awsapigateway.ResponseType
		status string
		errTyp string
		hint   string
	}{
		{"TooLarge", awsapigateway.ResponseType_REQUEST_TOO_LARGE(), "413", "RequestEntityTooLargeException", "request bodies are limited to about 4.6 MB"},
		{"NoCredentials", awsapigateway.ResponseType_MISSING_AUTHENTICATION_TOKEN(), "403", "NotAuthorizedException", "sign requests with SigV4 (service execute-api)"},
		{"BadSignature", awsapigateway.ResponseType_INVALID_SIGNATURE(), "403", "NotAuthorizedException", "the SigV4 signature does not match"},
		{"Expired", awsapigateway.ResponseType_EXPIRED_TOKEN(), "403", "NotAuthorizedException", "the credentials have expired"},
		{"Denied", awsapigateway.ResponseType_ACCESS_DENIED(), "403", "ForbiddenException", ""},
		{"Throttled", awsapigateway.ResponseType_THROTTLED(), "429", "TooManyRequestsException", "retry with back-off"},
		{"IntegrationFailed", awsapigateway.ResponseType_INTEGRATION_FAILURE(), "502", "ServiceFailureException", "the function could not be invoked (a request body past Lambda's 6 MB invoke payload ends here)"},
		{"IntegrationTimeout", awsapigateway.ResponseType_INTEGRATION_TIMEOUT(), "504", "ServiceUnavailableException", "retry"},
	} {
		msg := "$context.error.messageString"
		if g.hint != "" {
			msg = `"$util.escapeJavaScript($context.error.message): ` + g.hint + `"`
		}
		api.AddGatewayResponse(jsii.String("Error"+g.id), &awsapigateway.GatewayResponseOptions{
			Type: g.typ, StatusCode: jsii.String(g.status),
			Templates: &map[string]*string{"application/json": jsii.String(
				`{"error":{"message":` + msg + `,"type":"` + g.errTyp + `","code":` + g.status + `}}`)},
		})
	}
}

// oauthTokens answers the Iceberg REST spec's OAuth2 token endpoint on the
// REST API, which icehold does not offer, in RFC 6749's error shape, as
// the local router does: OAuth2 clients (iceberg-go's rest.WithCredential)
// send no SigV4, so behind IAM auth they would read API Gateway's 403
// with no reason. A mock integration answers without auth and without
// invoking a function.
func (s *Stack) oauthTokens() {
	body, _ := json.Marshal(map[string]string{"error": "invalid_client", "error_description": router.OAuthRefusal})
	request := jsii.String(`{"statusCode": 401}`)
	headers := map[string]*string{
		"method.response.header.WWW-Authenticate": jsii.String(`'Bearer realm="icehold"'`),
		"method.response.header.Cache-Control":    jsii.String("'no-store'"),
	}
	s.route(strings.TrimPrefix(oauthTokensPath, "/"), "POST",
		awsapigateway.NewMockIntegration(&awsapigateway.IntegrationOptions{
			// OAuth2 clients post a form; a mock integration reads the status from its template.
			RequestTemplates:    &map[string]*string{"application/x-www-form-urlencoded": request, "application/json": request},
			PassthroughBehavior: awsapigateway.PassthroughBehavior_NEVER,
			IntegrationResponses: &[]*awsapigateway.IntegrationResponse{{
				StatusCode:         jsii.String("401"),
				ResponseTemplates:  &map[string]*string{"application/json": jsii.String(string(body))},
				ResponseParameters: &headers,
			}},
		}),
		&awsapigateway.MethodOptions{
			AuthorizationType: awsapigateway.AuthorizationType_NONE,
			MethodResponses: &[]*awsapigateway.MethodResponse{{
				StatusCode: jsii.String("401"),
				ResponseParameters: &map[string]*bool{
					"method.response.header.WWW-Authenticate": jsii.Bool(true), "method.response.header.Cache-Control": jsii.Bool(true),
				},
			}},
		})
}
