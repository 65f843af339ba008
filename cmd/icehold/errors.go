package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// explain puts what to do in front of an error whose own words do not say
// it: no AWS credentials found (the SDK lists the chain it tried).
func explain(err error) error {
	if err == nil {
		return nil
	}
	if msg := err.Error(); strings.Contains(msg, "failed to refresh cached credentials") || strings.Contains(msg, "get credentials:") {
		return fmt.Errorf("no AWS credentials: set AWS_PROFILE to a profile of ~/.aws/config (after `aws sso login --profile P` for IAM Identity Center), "+
			"or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), and AWS_REGION; or pass --profile and --region (the SDK said: %w)", err)
	}
	return err
}

// forbidden matches the 403 messages of the authorizer: "P lacks X on
// catalog C" and "P holds none of [X Y] on catalog C".
var forbidden = regexp.MustCompile(`(\S+) (?:lacks (\S+)|holds none of \[([^\]]*)\]) on catalog (\S+)`)

// grantHint is what grants the privilege a 403 names: the command, and
// for the system scope (creating catalogs) where its admins come from.
func grantHint(msg string) string {
	m := forbidden.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	principal, priv, cat := m[1], m[2], m[4]
	if priv == "" {
		priv = strings.Fields(m[3])[0] // any one of them
	}
	if cat == "*" {
		return fmt.Sprintf("an admin grants it: icehold grants set %s CATALOG_MANAGE --catalog '*'; the admins are the stack's icehold:admins context value, "+
			"and a stack deployed without it has none: deploy again with -c icehold:admins=<your role ARN> (docs/deploy.md, Admins)", principal)
	}
	return fmt.Sprintf("an admin grants it: icehold grants show %s --catalog %s lists what it holds, then icehold grants set %s <those privileges> %s --catalog %s (set replaces the grant)",
		principal, cat, principal, priv, cat)
}

// errorJSON is an error as -o json prints it on stderr: the API's
// ErrorModel fields (code is the HTTP status, 0 when no answer came).
func errorJSON(err error) map[string]any {
	e := map[string]any{"message": err.Error(), "type": "Error", "code": 0}
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		e["type"], e["code"] = ae.typ, ae.status
		if ae.typ == "" {
			e["type"] = "HTTPError"
		}
	case errors.Is(err, errUsage):
		e["type"] = "UsageError"
	}
	return map[string]any{"error": e}
}

// wantsJSON: the command line asks for -o json (read from the arguments,
// as a usage error may come before the flags are parsed).
func wantsJSON(args []string) bool {
	for i, a := range goFlags(args) {
		if a == "--" {
			return false
		}
		switch a {
		case "--output=json", "-o=json", "-ojson":
			return true
		case "--output", "-o":
			if i+1 < len(args) && args[i+1] == "json" {
				return true
			}
		}
	}
	return false
}
