package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/icehold/icehold/shared/localserver"
)

// client talks to icehold's HTTP API: with a bearer token (local), or signed
// with SigV4 for API Gateway's IAM auth (AWS).
type client struct {
	url, token, catalog string
	creds               aws.CredentialsProvider
	region              string
	http                *http.Client
}

// clientFlags are the connection flags every API command takes.
func clientFlags(fs *flag.FlagSet) func() (*client, error) {
	url := fs.String("url", os.Getenv("ICEHOLD_URL"), "API URL (default: .icehold/local.json)")
	token := fs.String("token", os.Getenv("ICEHOLD_TOKEN"), "bearer token (local)")
	cat := fs.String("catalog", envDefault("ICEHOLD_CATALOG", "demo"), "catalog")
	sigv4 := fs.Bool("sigv4", false, "sign requests with SigV4 (execute-api) using the AWS credential chain")
	dir := fs.String("dir", ".icehold", "local state directory (for local.json)")
	return func() (*client, error) {
		c := &client{url: *url, token: *token, catalog: *cat, http: &http.Client{Timeout: 30 * time.Second}}
		if c.url == "" || (c.token == "" && !*sigv4) {
			raw, err := os.ReadFile(filepath.Join(*dir, "local.json"))
			if err != nil {
				return nil, fmt.Errorf("no --url/--token and no local server details: %w", err)
			}
			var info localserver.Info
			if err := json.Unmarshal(raw, &info); err != nil {
				return nil, err
			}
			if c.url == "" {
				c.url = info.RESTURL
			}
			if c.token == "" {
				c.token = info.AdminToken
			}
		}
		if *sigv4 {
			cfg, err := config.LoadDefaultConfig(context.Background())
			if err != nil {
				return nil, err
			}
			c.creds, c.region = cfg.Credentials, cfg.Region
		}
		return c, nil
	}
}

func envDefault(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// do sends a request and decodes a 2xx JSON answer into out.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.creds != nil {
		creds, err := c.creds.Retrieve(ctx)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "execute-api", c.region, time.Now()); err != nil {
			return err
		}
	} else if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
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
		if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%d %s: %s", res.StatusCode, e.Error.Type, e.Error.Message)
		}
		return fmt.Errorf("%d: %s", res.StatusCode, b)
	}
	if out != nil && len(b) > 0 {
		return json.Unmarshal(b, out)
	}
	return nil
}

var errUsage = errors.New("usage")
