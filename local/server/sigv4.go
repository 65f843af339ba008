package server

import (
	"bytes"
	"context"
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

// startIAM sets up the local account: its users (iam.json), the vending
// role, SigV4 checks on the embedded S3 with the STS emulation on its port,
// and the vendor the router assumes the role through.
func (s *Server) startIAM(cfg aws.Config, ep string, bucket string) error {
	key, err := sessionKey(s.dir)
	if err != nil {
		return err
	}
	s.users = &users{dir: s.dir, byKey: map[string]User{}}
	s.iam = emulators.NewIAM(Region, AccessKey, SecretKey, key)
	s.iam.Users = s.users.lookup
	s.iam.SetClock(s.now)
	s.iam.AddRole(VendingRole, credentials.RolePolicy(bucket))
	if s.S3Emulator == nil {
		return nil // an external S3 (no STS emulation here): no vending
	}
	s.S3Emulator.SetIAM(s.iam)
	s.vendor = &credentials.Vendor{
		STS:     sts.NewFromConfig(cfg, func(o *sts.Options) { o.BaseEndpoint = aws.String(ep) }),
		RoleARN: emulators.RoleARN(VendingRole),
		Region:  Region,
	}
	return nil
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
