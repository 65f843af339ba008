package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/spf13/cobra"

	"github.com/icehold/icehold/local/server"
	"github.com/icehold/icehold/shared/awsconfig"
)

// connOpts are the global flags: how to reach icehold and how to print.
// They are persistent on the root, so every verb takes them, before or
// after its arguments.
type connOpts struct {
	url, token, catalog, dir string
	profile, region, output  string
	sigv4                    bool
	dirSet                   bool // --dir or ICEHOLD_DIR named the state folder
}

func (o *connOpts) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&o.url, "url", os.Getenv("ICEHOLD_URL"), "API URL (env ICEHOLD_URL; default: the local server's)")
	f.StringVar(&o.token, "token", os.Getenv("ICEHOLD_TOKEN"), "bearer token (env ICEHOLD_TOKEN; default: the local server's admin token)")
	f.StringVar(&o.catalog, "catalog", os.Getenv("ICEHOLD_CATALOG"), "catalog (env ICEHOLD_CATALOG; default: the local server's, else demo)")
	f.StringVar(&o.dir, "dir", cmp.Or(os.Getenv("ICEHOLD_DIR"), ".icehold"), "local state folder (env ICEHOLD_DIR); unset, .icehold is looked for here and in the parent folders")
	f.StringVar(&o.profile, "profile", "", "sign requests with SigV4 using this AWS profile (API Gateway IAM auth)")
	f.StringVar(&o.region, "region", "", "AWS region (default: the execute-api URL's, else the AWS config's)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	f.BoolVar(&o.sigv4, "sigv4", os.Getenv("ICEHOLD_AUTH") == "sigv4", "sign requests with SigV4 using the AWS credential chain (env ICEHOLD_AUTH=sigv4)")
	_ = root.RegisterFlagCompletionFunc("output", fixedValues("table", "json"))
	_ = root.MarkPersistentFlagDirname("dir")
	o.dirSet = os.Getenv("ICEHOLD_DIR") != ""
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		o.dirSet = o.dirSet || cmd.Flags().Changed("dir")
		if o.output != "table" && o.output != "json" {
			return usagef(cmd, "--output %q: want table or json", o.output)
		}
		return nil
	}
}

// stateDir is the local state folder: the one named, else the nearest
// .icehold holding a local.json, here or in a parent folder (as git finds
// .git), else ./.icehold.
func (o *connOpts) stateDir() string {
	if o.dirSet || filepath.IsAbs(o.dir) || o.dir != ".icehold" {
		return o.dir
	}
	wd, err := os.Getwd()
	if err != nil {
		return o.dir
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".icehold", "local.json")); err == nil {
			return filepath.Join(d, ".icehold")
		}
		if filepath.Dir(d) == d {
			return o.dir
		}
	}
}

// localInfo reads the running local server's details (nil when there are
// none).
func (o *connOpts) localInfo() (*server.Info, error) {
	raw, err := os.ReadFile(filepath.Join(o.stateDir(), "local.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var info server.Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(o.stateDir(), "local.json"), err)
	}
	return &info, nil
}

// client talks to icehold's HTTP API: with a bearer token (local), or signed
// with SigV4 for API Gateway's IAM auth (AWS).
type client struct {
	url, token, catalog string
	creds               aws.CredentialsProvider
	region              string
	http                *http.Client
	local               *server.Info // the local server's details, when url is its
	output              string
}

// connect resolves the server, the credentials and the catalog from the
// flags, the environment and the local server's local.json, in that order.
func (o *connOpts) connect(ctx context.Context) (*client, error) {
	info, err := o.localInfo()
	if err != nil {
		return nil, err
	}
	c := &client{url: strings.TrimRight(o.url, "/"), token: o.token, catalog: o.catalog, output: o.output,
		http: &http.Client{Timeout: 30 * time.Second}}
	if c.url == "" {
		if info == nil {
			return nil, fmt.Errorf("no icehold to talk to: pass --url (or set ICEHOLD_URL) to a deployed stack's CatalogUri output, or start one here with `make run` (no local.json in %s)", o.stateDir())
		}
		c.url = info.RESTURL
	}
	if info != nil && sameServer(c.url, info.RESTURL) {
		c.local = info
	}
	sigv4 := o.sigv4 || o.profile != "" || (c.token == "" && executeAPIRegion(c.url) != "")
	switch {
	case sigv4:
		cfg, err := awsconfig.Load(ctx, awsconfig.Endpoints{Profile: o.profile, Region: cmp.Or(o.region, executeAPIRegion(c.url))})
		if err != nil {
			return nil, fmt.Errorf("AWS credentials for SigV4: %w", err)
		}
		if cfg.Region == "" {
			return nil, fmt.Errorf("SigV4 needs a region: pass --region or set AWS_REGION")
		}
		c.creds, c.region = cfg.Credentials, cfg.Region
	case c.token != "":
	case c.local != nil:
		c.token = c.local.AdminToken
	default:
		return nil, fmt.Errorf("--url %s needs credentials: pass --token (or set ICEHOLD_TOKEN), or sign with SigV4 for an AWS stack (--profile P, or ICEHOLD_AUTH=sigv4 for the default credential chain)", c.url)
	}
	if c.catalog == "" && c.local != nil {
		c.catalog = c.local.Catalog
	}
	if c.catalog == "" {
		c.catalog = "demo"
	}
	return c, nil
}

// sameServer says whether two URLs name one server (scheme, host, port).
func sameServer(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Scheme == ub.Scheme && ua.Host == ub.Host
}

// executeAPIRegion is the region of an API Gateway URL
// (https://ID.execute-api.REGION.amazonaws.com/...), else "".
func executeAPIRegion(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	parts := strings.Split(u.Hostname(), ".")
	if len(parts) >= 5 && parts[1] == "execute-api" && strings.HasPrefix(parts[3], "amazonaws") {
		return parts[2]
	}
	return ""
}

// do sends a request and decodes a 2xx JSON answer into out.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.send(ctx, method, path, body, out)
	return err
}

// send is do that also returns the answer's headers.
func (c *client) send(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.creds != nil {
		creds, err := c.creds.Retrieve(ctx)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(raw)
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "execute-api", c.region, time.Now()); err != nil {
			return nil, err
		}
	} else if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		ae := &apiError{status: res.StatusCode, text: string(b)}
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			ae.typ, ae.text = e.Error.Type, e.Error.Message
		}
		if res.StatusCode == http.StatusForbidden {
			ae.hint = grantHint(ae.text)
		}
		return nil, ae
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, err
		}
	}
	return res.Header, nil
}

// apiError is an answer of the API that is not a success.
type apiError struct {
	status    int
	typ, text string // the ErrorModel's type and message, else the body
	hint      string // what to do about it (a 403: the grant)
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.status, e.typ, e.text)
	if e.typ == "" {
		msg = fmt.Sprintf("%d: %s", e.status, e.text)
	}
	if e.hint != "" {
		msg += " (" + e.hint + ")"
	}
	return msg
}

// retryable: the same request may succeed later (a 5xx, 429 or 408, or no
// answer at all); a 4xx refusal answers the same again.
func retryable(err error) bool {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.status >= 500 || ae.status == http.StatusTooManyRequests || ae.status == http.StatusRequestTimeout
	}
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errUsage)
}

// unreachable turns a failed connection into what to do about it: a local
// server that is not running is the usual cause.
func (c *client) unreachable(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	var op *net.OpError
	var dns *net.DNSError
	if !errors.As(err, &op) && !errors.As(err, &dns) {
		return err
	}
	if u, perr := url.Parse(c.url); perr == nil {
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return fmt.Errorf("cannot reach icehold at %s: is `make run` running?", c.url)
		}
	}
	return fmt.Errorf("cannot reach icehold at %s: %w", c.url, err)
}

// emit prints v as JSON with --output json, else as the table draws it.
func (c *client) emit(out io.Writer, v any, table func(io.Writer) error) error {
	if c.output == "json" {
		return writeJSON(out, v)
	}
	return table(out)
}

// run is a verb's RunE that connects to icehold first.
func (o *connOpts) run(f func(cmd *cobra.Command, c *client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := o.connect(cmd.Context())
		if err != nil {
			return err
		}
		return f(cmd, c, args)
	}
}
