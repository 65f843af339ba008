package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/icehold/icehold/shared/localserver"
)

// What `make run` runs: the server on 127.0.0.1:8181 answers /v1/config with
// the admin token it wrote to local.json, and prints how to connect.
func TestMakeRunServesConfig(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- execute(ctx, []string{"local", "--dir", dir}, &out, io.Discard) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("local server: %v", err)
			}
		}
	}
	defer stop()

	var info localserver.Info
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "local.json"))
		if err == nil && json.Unmarshal(raw, &info) == nil {
			break
		}
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("local server stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no local.json")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.RESTURL != "http://127.0.0.1:8181" || info.AdminToken == "" || info.S3Endpoint == "" || info.Bucket == "" || info.Region == "" || info.Catalog != "demo" {
		t.Errorf("local.json lacks connection details: %+v", info)
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:8181/v1/config?warehouse=demo", nil)
	req.Header.Set("Authorization", "Bearer "+info.AdminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var cfg struct {
		Defaults  map[string]string `json:"defaults"`
		Overrides map[string]string `json:"overrides"`
	}
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&cfg) != nil {
		t.Fatalf("config: status %d", res.StatusCode)
	}
	if cfg.Overrides["prefix"] != "demo" || cfg.Defaults["s3.endpoint"] != info.S3Endpoint || cfg.Defaults["s3.delete-enabled"] != "false" {
		t.Errorf("config does not hand out the local S3 settings: %+v", cfg)
	}
	stop() // the start-up text is read only once the server is done writing
	for _, want := range []string{info.AdminToken, "PyIceberg", "Spark", "iceberg-go"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("start-up text does not mention %q", want)
		}
	}
}
