package emulators_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/icehold/icehold/local/awstest"
	"github.com/icehold/icehold/local/emulators"
)

// stsWorld is an STS with its account's identities: the embedded
// emulation, or moto_server with its IAM authorization on.
type stsWorld struct {
	name, endpoint, account string
	// user makes a user whose own policy allows everything (local users
	// are the account's admins) and returns its keys.
	user func(t *testing.T, name string) aws.Credentials
	// role makes a role with a trust policy and a policy (documents).
	role func(t *testing.T, name, trust, policy string)
	// start is called once the identities are made (moto: authorization on).
	start func(t *testing.T)
	// models: what this STS checks of AWS's rules (moto: trust policies
	// naming the caller's exact ARN and the caller's own policies; not
	// session policies, a role's ARN naming its sessions, unknown roles, or
	// role chaining's cap).
	full bool
}

func (w stsWorld) roleARN(name string) string { return "arn:aws:iam::" + w.account + ":role/" + name }

func (w stsWorld) sessionARN(role, session string) string {
	return "arn:aws:sts::" + w.account + ":assumed-role/" + role + "/" + session
}

func (w stsWorld) client(c aws.Credentials) *sts.Client {
	return sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(w.endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return c, nil })})
}

const allowAll = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`

func allowOnly(action, resource string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":%q,"Resource":%q}]}`, action, resource)
}

func embeddedSTS(t *testing.T) stsWorld {
	emu, err := emulators.NewS3("", "bkt")
	if err != nil {
		t.Fatal(err)
	}
	iam := emulators.NewIAM("us-east-1", "root", "root-secret", emulators.NewSessionKey())
	users := map[string][2]string{}
	iam.Users = func(id string) (string, string, bool) {
		u, ok := users[id]
		return u[0], u[1], ok
	}
	emu.SetIAM(iam)
	srv := httptest.NewServer(emu)
	t.Cleanup(srv.Close)
	return stsWorld{
		name: "embedded", endpoint: srv.URL, account: emulators.Account, full: true,
		user: func(t *testing.T, name string) aws.Credentials {
			id := "AKIA" + strings.ToUpper(name)
			users[id] = [2]string{name, name + "-secret"}
			return aws.Credentials{AccessKeyID: id, SecretAccessKey: name + "-secret"}
		},
		role: func(t *testing.T, name, trust, policy string) {
			if err := iam.AddRole(name, trust, policy); err != nil {
				t.Fatal(err)
			}
		},
		start: func(*testing.T) {},
	}
}

// motoSTS is a moto_server of the test's own: turning its authorization on
// is global to the server.
func motoSTS(t *testing.T) stsWorld {
	awstest.RequireMoto(t)
	endpoint := awstest.StartMoto(t)
	call := func(t *testing.T, params url.Values, out any) {
		t.Helper()
		params.Set("Version", "2010-05-08")
		body := params.Encode()
		req, _ := http.NewRequest("POST", endpoint+"/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		sum := sha256Hex(body)
		creds := aws.Credentials{AccessKeyID: "setup", SecretAccessKey: "setup"}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, sum, "iam", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			t.Fatalf("moto IAM %s: %d %s", params.Get("Action"), res.StatusCode, raw)
		}
		if out != nil {
			if err := xml.Unmarshal(raw, out); err != nil {
				t.Fatalf("moto IAM %s: %v: %s", params.Get("Action"), err, raw)
			}
		}
	}
	return stsWorld{
		name: "moto", endpoint: endpoint, account: "123456789012",
		user: func(t *testing.T, name string) aws.Credentials {
			call(t, url.Values{"Action": {"CreateUser"}, "UserName": {name}}, nil)
			call(t, url.Values{"Action": {"PutUserPolicy"}, "UserName": {name}, "PolicyName": {"all"}, "PolicyDocument": {allowAll}}, nil)
			var key struct {
				ID     string `xml:"CreateAccessKeyResult>AccessKey>AccessKeyId"`
				Secret string `xml:"CreateAccessKeyResult>AccessKey>SecretAccessKey"`
			}
			call(t, url.Values{"Action": {"CreateAccessKey"}, "UserName": {name}}, &key)
			return aws.Credentials{AccessKeyID: key.ID, SecretAccessKey: key.Secret}
		},
		role: func(t *testing.T, name, trust, policy string) {
			call(t, url.Values{"Action": {"CreateRole"}, "RoleName": {name}, "AssumeRolePolicyDocument": {trust}, "MaxSessionDuration": {"43200"}}, nil)
			call(t, url.Values{"Action": {"PutRolePolicy"}, "RoleName": {name}, "PolicyName": {"p"}, "PolicyDocument": {policy}}, nil)
		},
		start: func(t *testing.T) {
			res, err := http.Post(endpoint+"/moto-api/reset-auth", "text/plain", strings.NewReader("0"))
			if err != nil || res.StatusCode != 200 {
				t.Fatalf("moto reset-auth: %v %v", res, err)
			}
			res.Body.Close()
		},
	}
}

// AssumeRole as STS decides it: the role's trust policy lets the caller
// in and the caller's own permissions include sts:AssumeRole on the role
// (a session's: its role's policy and its session policy both), and a
// caller with temporary credentials (role chaining) gets at most an hour,
// refused as STS refuses it. The same cases run against moto where it
// models them.
func TestSTSContract(t *testing.T) {
	for _, world := range []struct {
		name string
		make func(*testing.T) stsWorld
	}{{"embedded", embeddedSTS}, {"moto", motoSTS}} {
		t.Run(world.name, func(t *testing.T) {
			w := world.make(t)
			ctx := context.Background()
			u := w.user(t, "alice")
			alice := "arn:aws:iam::" + w.account + ":user/alice"
			trust := func(principals ...string) string { return emulators.TrustPolicy(principals...) }
			// reader: trusts alice; may read objects, assume nothing.
			w.role(t, "reader", trust(alice), allowOnly("s3:GetObject", "*"))
			// hopper: trusts alice; may assume target.
			w.role(t, "hopper", trust(alice), allowOnly("sts:AssumeRole", w.roleARN("target")))
			// target: trusts the sessions below by their ARNs, and the hopper role.
			w.role(t, "target", trust(w.sessionARN("reader", "r1"), w.sessionARN("hopper", "h1"), w.sessionARN("hopper", "h2"), w.roleARN("hopper")), allowAll)
			// closed: trusts a principal no one here is.
			w.role(t, "closed", trust("arn:aws:iam::"+w.account+":user/bob"), allowAll)
			w.start(t)

			assume := func(c aws.Credentials, role, session string, seconds int32, policy string) (aws.Credentials, error) {
				in := &sts.AssumeRoleInput{RoleArn: aws.String(w.roleARN(role)), RoleSessionName: aws.String(session)}
				if seconds != 0 {
					in.DurationSeconds = aws.Int32(seconds)
				}
				if policy != "" {
					in.Policy = aws.String(policy)
				}
				out, err := w.client(c).AssumeRole(ctx, in)
				if err != nil {
					return aws.Credentials{}, err
				}
				k := out.Credentials
				return aws.Credentials{AccessKeyID: *k.AccessKeyId, SecretAccessKey: *k.SecretAccessKey, SessionToken: *k.SessionToken}, nil
			}
			session := func(t *testing.T, role, name, policy string) aws.Credentials {
				t.Helper()
				c, err := assume(u, role, name, 0, policy)
				if err != nil {
					t.Fatalf("alice assumes %s: %v", role, err)
				}
				return c
			}
			cases := []struct {
				name    string
				full    bool // only where the STS models all of AWS's rules
				do      func(t *testing.T) error
				code    string
				message string
			}{
				{"a trusted user", false, func(t *testing.T) error { _, err := assume(u, "reader", "r0", 0, ""); return err }, "", ""},
				{"a trusted user for 12 hours", false, func(t *testing.T) error { _, err := assume(u, "reader", "r0", 43200, ""); return err }, "", ""},
				{"a user the trust policy does not name", false, func(t *testing.T) error { _, err := assume(u, "closed", "c0", 0, ""); return err }, "AccessDenied", ""},
				{"a trusted session without sts:AssumeRole", false, func(t *testing.T) error {
					_, err := assume(session(t, "reader", "r1", ""), "target", "t1", 0, "")
					return err
				}, "AccessDenied", ""},
				{"a trusted session with sts:AssumeRole", false, func(t *testing.T) error {
					_, err := assume(session(t, "hopper", "h1", ""), "target", "t1", 0, "")
					return err
				}, "", ""},
				{"a role's ARN names its sessions", true, func(t *testing.T) error {
					_, err := assume(session(t, "hopper", "h3", ""), "target", "t1", 0, "")
					return err
				}, "", ""},
				{"a session policy without sts:AssumeRole", true, func(t *testing.T) error {
					_, err := assume(session(t, "hopper", "h2", allowOnly("s3:GetObject", "*")), "target", "t1", 0, "")
					return err
				}, "AccessDenied", ""},
				{"role chaining past an hour", true, func(t *testing.T) error {
					_, err := assume(session(t, "hopper", "h1", ""), "target", "t1", 3601, "")
					return err
				}, "ValidationError", "The requested DurationSeconds exceeds the 1 hour session limit for roles assumed by role chaining."},
				{"role chaining for an hour", false, func(t *testing.T) error {
					_, err := assume(session(t, "hopper", "h1", ""), "target", "t1", 3600, "")
					return err
				}, "", ""},
				{"an unknown role", true, func(t *testing.T) error { _, err := assume(u, "nobody", "n0", 0, ""); return err }, "AccessDenied", ""},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					if c.full && !w.full {
						t.Skipf("%s does not model this", w.name)
					}
					err := c.do(t)
					if apiCode(err) != c.code || c.code == "" && err != nil {
						t.Fatalf("%v, want %q", err, c.code)
					}
					if c.message != "" && !strings.Contains(err.Error(), c.message) {
						t.Errorf("%v, want the message %q", err, c.message)
					}
				})
			}
		})
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
