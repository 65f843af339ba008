package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/icehold/icehold/local/emulators"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/router"
	"github.com/icehold/icehold/shared/sigv4"
)

// SigV4 on the local REST API, as API Gateway's IAM auth checks it in the
// stack: service execute-api, the region's scope, ±5 minutes of skew, keys
// of the local account (the emulators' own, `icehold local iam add-user`
// users, and STS sessions). Bearer tokens still work; a request signed
// with SigV4 is judged by its signature alone.

// apiSkew is API Gateway's tolerance of a signer's clock.
const apiSkew = 5 * time.Minute

type sigv4Key struct{}

// signed is a SigV4 request's verdict, for authenticate and authError.
type signed struct {
	key sigv4.Key
	err error
}

// verifySigV4 checks SigV4-signed requests before the router sees them
// (the signature covers the body, which it reads and puts back).
func (s *Server) verifySigV4(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.iam == nil || !sigv4.Signed(r) {
			next.ServeHTTP(w, r)
			return
		}
		var body []byte
		if r.Body != nil {
			var err error
			body, err = io.ReadAll(io.LimitReader(r.Body, router.MaxBodyBytes+1))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			// Past the limit the router answers 413; the rest stays unread.
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		}
		v := sigv4.Verifier{Service: "execute-api", Region: Region, MaxSkew: apiSkew, Keys: s.iam.Lookup}
		k, err := v.Verify(r, body)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sigv4Key{}, signed{k, err})))
	})
}

// sigv4Principal is the principal of a verified SigV4 request; ok is false
// when the request was not signed with SigV4.
func sigv4Principal(r *http.Request) (principal string, ok bool) {
	v, ok := r.Context().Value(sigv4Key{}).(signed)
	if !ok {
		return "", false
	}
	if v.err != nil {
		return "", true
	}
	return v.key.Principal, true
}

// authError is why a SigV4 request was refused (nil for other requests).
func authError(r *http.Request) error {
	v, _ := r.Context().Value(sigv4Key{}).(signed)
	return v.err
}

// The local account's roles. In AWS each function has a role of its own
// (infra/access.go) and the api function's may assume the vending role;
// here one process composes every function, and they act as one role's
// sessions: temporary credentials, as a Lambda function's are, so that
// STS treats their AssumeRole as role chaining (an hour at most) and the
// vending role's trust policy names them alone. Each function's least
// privilege is checked against the synthesized stack by
// infra/oracle_test.go, not here.
const (
	// FunctionsRole is the role the local functions act as.
	FunctionsRole = "icehold-functions"
	// EngineRole is the identity of engines that are not vended
	// credentials: the stack's engine policy (infra, engineStatements).
	EngineRole = "icehold-engine"
)

// engineSession is how long an engine session handed in a client
// configuration lives: a role's longest session (each answer hands a new
// one).
const engineSession = 12 * time.Hour

// newIAM sets up the local account: its users (iam.json) and its roles.
// Nothing has assumed a role yet.
func (s *Server) newIAM(bucket string) error {
	key, err := sessionKey(s.dir)
	if err != nil {
		return err
	}
	s.users = &users{dir: s.dir, byKey: map[string]User{}}
	s.iam = emulators.NewIAM(Region, AccessKey, SecretKey, key)
	s.iam.Users = s.users.lookup
	s.iam.SetClock(s.now)
	functions := emulators.RoleARN(FunctionsRole)
	roles := []struct{ name, trust, policy string }{
		{FunctionsRole, emulators.TrustPolicy("lambda.amazonaws.com"), allowEverything},
		{VendingRole, emulators.TrustPolicy(functions), credentials.RolePolicy(bucket)},
		{EngineRole, emulators.TrustPolicy(emulators.RootPrincipal), enginePolicy(bucket)},
	}
	for _, r := range roles {
		if err := s.iam.AddRole(r.name, r.trust, r.policy); err != nil {
			return err
		}
	}
	return nil
}

const allowEverything = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`

// enginePolicy is the stack's engine policy on the local bucket: its
// storage statements (what the vending role holds too) and the API.
func enginePolicy(bucket string) string {
	st := append(credentials.RoleStatements(bucket), map[string]any{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "*"})
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": st})
	return string(b)
}

// functionCredentials are the local functions' credentials: sessions of
// FunctionsRole.
func (s *Server) functionCredentials() aws.CredentialsProvider {
	return s.iam.RoleCredentials(emulators.RoleARN(FunctionsRole), "icehold-functions")
}

// engineKeys is what a client configuration carries when the client is
// not vended credentials: a fresh session of the engine role (never the
// emulators' own key, the admin identity `icehold local` commands use).
func (s *Server) engineKeys(context.Context) map[string]string {
	k := s.iam.Issue(emulators.RoleARN(EngineRole), "engine", engineSession)
	return map[string]string{"s3.access-key-id": k.AccessKeyID, "s3.secret-access-key": k.Secret, "s3.session-token": k.Token}
}

// startIAM turns SigV4 checks on in the embedded S3, with the STS
// emulation on its port, and makes the vendor the router assumes the
// vending role through (signing as the functions' role).
func (s *Server) startIAM(cfg aws.Config, ep string) {
	if s.S3Emulator == nil {
		return // an external S3 (no STS emulation here): no vending
	}
	s.S3Emulator.SetIAM(s.iam)
	s.vendor = &credentials.Vendor{
		STS:     sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = aws.String(ep) }),
		RoleARN: emulators.RoleARN(VendingRole),
		Region:  Region,
	}
}

// AddUser makes a local IAM user (in iam.json, or in memory for a server
// without a state folder) and returns its access key pair.
func (s *Server) AddUser(name string) (User, error) {
	if s.dir != "" {
		return AddUser(s.dir, name)
	}
	u, err := newUser(name)
	if err != nil {
		return User{}, err
	}
	s.users.mu.Lock()
	defer s.users.mu.Unlock()
	s.users.byKey[u.AccessKeyID] = u
	return u, nil
}

// SetCredentialsClock sets the clock STS sessions (vended credentials) are
// issued and expire by; nil: the server's clock. Tests move it past an
// expiry while clients sign in real time.
func (s *Server) SetCredentialsClock(now func() time.Time) {
	if now == nil {
		now = s.now
	}
	s.iam.SetClock(now)
}
