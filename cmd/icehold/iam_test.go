package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// add-user prints the key pair as shell exports (eval-able) and list shows
// the user's principal, never its secret.
func TestIAMAddUser(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if err := execute(context.Background(), []string{"local", "iam", "add-user", "alice", "--dir", dir}, &out, &errOut); err != nil {
		t.Fatalf("add-user: %v\n%s", err, errOut.String())
	}
	exports := regexp.MustCompile(`^export AWS_ACCESS_KEY_ID=AKIA[0-9A-F]{16}\nexport AWS_SECRET_ACCESS_KEY=(\S+)\nexport AWS_REGION=us-east-1\n$`)
	m := exports.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("add-user printed %q, want three exports", out.String())
	}
	if err := execute(context.Background(), []string{"local", "iam", "add-user", "alice", "--dir", dir}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("a second alice was added")
	}
	out.Reset()
	if err := execute(context.Background(), []string{"local", "iam", "list", "--dir", dir}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "arn:aws:iam::000000000000:user/alice") || strings.Contains(out.String(), m[1]) {
		t.Errorf("list: %q; want alice's principal and no secret", out.String())
	}
}
