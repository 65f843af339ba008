package emulators_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/icehold/icehold/shared/awsconfig"
)

// served serves h for the test's life and answers the SDK configuration and
// endpoints that reach it; endpoint names the service's field.
func served(t *testing.T, h http.Handler, endpoint func(*awsconfig.Endpoints) *string) (aws.Config, awsconfig.Endpoints) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ep := awsconfig.Endpoints{Region: "us-east-1", AccessKey: "k", SecretKey: "s"}
	*endpoint(&ep) = srv.URL
	cfg, err := awsconfig.Load(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, ep
}
