package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/catalogtest"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/sigv4"
)

// sigv4Client opens iceberg-go's REST catalog signing with SigV4 as the
// stack's clients do (service execute-api), with a key pair.
func sigv4Client(t testing.TB, creds aws.Credentials) (*rest.Catalog, error) {
	t.Helper()
	cfg := aws.Config{Region: sigv4Region(), Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil })}
	return rest.NewCatalog(context.Background(), "icehold", shared.URL,
		rest.WithWarehouseLocation(shared.Catalog), rest.WithSigV4RegionSvc(sigv4Region(), "execute-api"), rest.WithAwsConfig(cfg))
}

// sigv4Env names the key pair the suite signs with against an external
// endpoint (make e2e-external makes it with `icehold local iam add-user`
// against the separately started process, as a user of make run would).
const (
	sigv4KeyEnv    = "E2E_SIGV4_ACCESS_KEY_ID"
	sigv4SecretEnv = "E2E_SIGV4_SECRET_ACCESS_KEY"
)

// sigv4Region is the region requests are signed for (E2E_REGION against a
// deployed stack).
func sigv4Region() string { return envOr("E2E_REGION", server.Region) }

// sigv4User is a key pair of a principal the endpoint knows: a new local
// user of the in-process server, or the external endpoint's from the
// environment (skips when there is none).
func sigv4User(t *testing.T, name string) aws.Credentials {
	t.Helper()
	if shared.Local == nil {
		id, secret := os.Getenv(sigv4KeyEnv), os.Getenv(sigv4SecretEnv)
		if id == "" || secret == "" {
			t.Skipf("needs %s and %s against an external endpoint", sigv4KeyEnv, sigv4SecretEnv)
		}
		return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}
	}
	u, err := shared.Local.AddUser(uniq(name))
	if err != nil {
		t.Fatal(err)
	}
	return aws.Credentials{AccessKeyID: u.AccessKeyID, SecretAccessKey: u.SecretAccessKey}
}

// The local server checks SigV4 as API Gateway's IAM auth does: a local
// user's key signs iceberg-go's whole catalog suite; a wrong secret, an
// unknown key and a clock more than 5 minutes off are 403 ErrorModels.
func TestSigV4(t *testing.T) {
	creds := sigv4User(t, "alice")
	t.Run("catalogtest", func(t *testing.T) {
		catalogtest.RunCatalogTests(t, catalogtest.Config{
			NewCatalog: func(t *testing.T) catalog.Catalog {
				cat, err := sigv4Client(t, creds)
				if err != nil {
					t.Fatalf("open REST catalog over SigV4: %v", err)
				}
				return cat
			},
			SupportsNamespaceProperties: true,
		})
	})
	wrong := creds
	wrong.SecretAccessKey += "x"
	cases := []struct {
		name  string
		creds aws.Credentials
		skew  time.Duration
		want  int
	}{
		{"signed", creds, 0, http.StatusOK},
		{"clock 4 minutes ahead", creds, 4 * time.Minute, http.StatusOK},
		{"wrong secret", wrong, 0, http.StatusForbidden},
		{"unknown key", aws.Credentials{AccessKeyID: "AKIANOSUCHKEY", SecretAccessKey: "x"}, 0, http.StatusForbidden},
		{"clock 6 minutes ahead", creds, 6 * time.Minute, http.StatusForbidden},
		{"clock 6 minutes behind", creds, -6 * time.Minute, http.StatusForbidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", shared.URL+"/v1/config?warehouse="+shared.Catalog, nil)
			if err := v4.NewSigner().SignHTTP(context.Background(), c.creds, req, sigv4.EmptyHash, "execute-api", sigv4Region(), time.Now().Add(c.skew)); err != nil {
				t.Fatal(err)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			out, _ := io.ReadAll(res.Body)
			if res.StatusCode != c.want {
				t.Fatalf("%d %s, want %d", res.StatusCode, out, c.want)
			}
			if c.want != http.StatusOK {
				if typ, code, msg := errorModel(t, out); typ != "NotAuthorizedException" || code != c.want || msg == "" {
					t.Errorf("ErrorModel %s %d %q, want API Gateway's NotAuthorizedException", typ, code, msg)
				}
			}
		})
	}
	if _, err := sigv4Client(t, wrong); err == nil {
		t.Error("iceberg-go opened the catalog with a wrong secret")
	}
}

// The README's SigV4 example runs as written against the local server,
// with a local user's keys in the environment (as `eval "$(icehold local
// iam add-user NAME)"` puts them there).
func TestSigV4Example(t *testing.T) {
	u := sigv4User(t, "example")
	bin := filepath.Join(t.TempDir(), "iceberg-go-sigv4")
	build := exec.Command("go", "build", "-o", bin, "./examples/iceberg-go-sigv4")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ns := newNamespace(t, "sigv4example")
	run := exec.Command(bin)
	run.Env = append(os.Environ(), "ICEHOLD_URL="+shared.URL, "ICEHOLD_CATALOG="+shared.Catalog,
		"AWS_ACCESS_KEY_ID="+u.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+u.SecretAccessKey, "AWS_REGION="+sigv4Region(),
		"AWS_SESSION_TOKEN="+u.SessionToken, "AWS_PROFILE=", "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("the SigV4 example: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), ns) {
		t.Errorf("the SigV4 example listed %s, not the namespace %s", out, ns)
	}
}
