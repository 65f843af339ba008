package emulators

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/icehold/icehold/shared/iampolicy"
	"github.com/icehold/icehold/shared/sigv4"
)

// Account is the local account (LocalStack's).
const Account = "000000000000"

// IAM is the local account's identities, as the embedded services verify
// SigV4 against them: the emulators' own key (the account root), users
// (icehold local iam add-user) and sessions of roles issued by the STS
// emulation. A session is self-contained: its token carries the role, the
// session policy and the expiry under an HMAC of a key kept in the state
// folder, and its secret is derived from its access key id by the same
// key, so sessions survive a restart and need no table.
type IAM struct {
	Region string
	// Root is the emulators' own access key pair.
	RootKey, RootSecret string
	// Users finds a user's name and secret by access key id.
	Users func(accessKeyID string) (name, secret string, ok bool)
	// clock is what sessions expire by (nil: time.Now); signatures keep
	// real time, as signers do.
	clock atomic.Pointer[func() time.Time]

	sessionKey []byte
	mu         sync.RWMutex
	roles      map[string]role // by ARN
}

// role is a local role: who may assume it and what its sessions may do.
type role struct {
	trust, policy iampolicy.Document
}

// NewIAM returns the local account; sessionKey signs session tokens (keep
// it in the state folder so that sessions outlive a restart).
func NewIAM(region, rootKey, rootSecret string, sessionKey []byte) *IAM {
	return &IAM{Region: region, RootKey: rootKey, RootSecret: rootSecret, sessionKey: sessionKey, roles: map[string]role{}}
}

// NewSessionKey makes a key for NewIAM.
func NewSessionKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// RootPrincipal is the ARN of the emulators' own key.
const RootPrincipal = "arn:aws:iam::" + Account + ":root"

// UserPrincipal is the ARN of a local user.
func UserPrincipal(name string) string { return "arn:aws:iam::" + Account + ":user/" + name }

// RoleARN is the ARN of a local role.
func RoleARN(name string) string { return "arn:aws:iam::" + Account + ":role/" + name }

// AddRole makes a role: trust is its trust policy (who may assume it, as
// sts:AssumeRole checks it), policy what its sessions may do (each the
// intersection of it and its session policy). Both are policy documents.
func (m *IAM) AddRole(name, trust, policy string) error {
	t, err := iampolicy.Parse(trust)
	if err != nil {
		return fmt.Errorf("role %s: trust policy: %w", name, err)
	}
	p, err := iampolicy.Parse(policy)
	if err != nil {
		return fmt.Errorf("role %s: policy: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roles[RoleARN(name)] = role{trust: t, policy: p}
	return nil
}

// TrustPolicy is a trust policy that lets principals assume a role: ARNs
// of roles (their sessions), users, an account's root (every principal of
// the account whose own policy allows sts:AssumeRole on the role), or
// service principals (lambda.amazonaws.com: none through this STS).
func TrustPolicy(principals ...string) string {
	var p iampolicy.Principal
	for _, x := range principals {
		if strings.HasPrefix(x, "arn:") {
			p.AWS = append(p.AWS, x)
		} else {
			p.Service = append(p.Service, x)
		}
	}
	b, _ := json.Marshal(iampolicy.Document{Version: "2012-10-17", Statement: []iampolicy.Statement{
		{Effect: iampolicy.Allow, Principal: &p, Action: iampolicy.StringOrList{"sts:AssumeRole"}},
	}})
	return string(b)
}

func (m *IAM) role(arn string) (role, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.roles[arn]
	return r, ok
}

// SetClock sets the clock sessions are issued and expire by (tests
// advance it past an expiry); nil: time.Now.
func (m *IAM) SetClock(now func() time.Time) {
	if now == nil {
		m.clock.Store(nil)
		return
	}
	m.clock.Store(&now)
}

func (m *IAM) now() time.Time {
	if f := m.clock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// claims are what a session token carries.
type claims struct {
	AccessKeyID string `json:"k"`
	Role        string `json:"r"`
	Session     string `json:"s"`
	Expires     int64  `json:"e"`
	Policy      string `json:"p,omitempty"`
}

func (m *IAM) mac(data string) []byte {
	h := hmac.New(sha256.New, m.sessionKey)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func (m *IAM) sessionSecret(accessKeyID string) string {
	return base64.RawStdEncoding.EncodeToString(m.mac("secret\x00" + accessKeyID))[:40]
}

// Lookup is the sigv4.Lookup of the local account.
func (m *IAM) Lookup(accessKeyID, token string) (sigv4.Key, error) {
	unknown := sigv4.Refuse(sigv4.ErrUnknownKey, "The security token included in the request is invalid.")
	if token != "" {
		c, err := m.parseToken(token)
		if err != nil || c.AccessKeyID != accessKeyID {
			return sigv4.Key{}, unknown
		}
		role := c.Role[strings.LastIndex(c.Role, "/")+1:]
		return sigv4.Key{
			AccessKeyID: accessKeyID, Secret: m.sessionSecret(accessKeyID),
			Principal: "arn:aws:sts::" + Account + ":assumed-role/" + role + "/" + c.Session,
			Expires:   time.Unix(c.Expires, 0), Policy: c.Policy, Role: c.Role,
		}, nil
	}
	if accessKeyID == m.RootKey && m.RootKey != "" {
		return sigv4.Key{AccessKeyID: accessKeyID, Secret: m.RootSecret, Principal: RootPrincipal}, nil
	}
	if m.Users != nil {
		if name, secret, ok := m.Users(accessKeyID); ok {
			return sigv4.Key{AccessKeyID: accessKeyID, Secret: secret, Principal: UserPrincipal(name)}, nil
		}
	}
	return sigv4.Key{}, unknown
}

func (m *IAM) parseToken(token string) (claims, error) {
	payload, sig, ok := strings.Cut(token, ".")
	if !ok {
		return claims{}, errors.New("malformed token")
	}
	want := base64.RawURLEncoding.EncodeToString(m.mac("token\x00" + payload))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return claims{}, errors.New("token not ours")
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return claims{}, err
	}
	var c claims
	return c, json.Unmarshal(raw, &c)
}

// Session is what AssumeRole issues.
type Session struct {
	AccessKeyID, Secret, Token string
	Expires                    time.Time
	Principal, AssumedRoleID   string
	// PackedPercent estimates STS's PackedPolicySize (see packedPercent).
	PackedPercent int
}

// Issue issues a session of a role directly, as AWS hands a Lambda
// function (or an instance, a task) its role's session: no STS call and no
// trust check. The local server's functions act with these, and engines
// that are not vended credentials are handed one of the engine role.
func (m *IAM) Issue(role, session string, d time.Duration) Session {
	return m.assume(role, session, "", d)
}

// RoleCredentials are the credentials of a function running as role: a
// session issued on every call, valid for an hour by the sessions' clock
// (an HMAC, no network), so that they hold whatever that clock reads.
func (m *IAM) RoleCredentials(role, session string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		s := m.Issue(role, session, time.Hour)
		return aws.Credentials{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.Secret, SessionToken: s.Token,
			Source: "icehold local IAM", CanExpire: true, Expires: s.Expires}, nil
	})
}

// assume issues a session of a role (its checks are the STS handler's).
func (m *IAM) assume(role, session, policy string, d time.Duration) Session {
	id := make([]byte, 8)
	_, _ = rand.Read(id)
	akid := "ASIA" + strings.ToUpper(hex.EncodeToString(id))
	c := claims{AccessKeyID: akid, Role: role, Session: session, Expires: m.now().Add(d).Unix(), Policy: policy}
	raw, _ := json.Marshal(c)
	payload := base64.RawURLEncoding.EncodeToString(raw)
	token := payload + "." + base64.RawURLEncoding.EncodeToString(m.mac("token\x00"+payload))
	name := role[strings.LastIndex(role, "/")+1:]
	return Session{
		AccessKeyID: akid, Secret: m.sessionSecret(akid), Token: token, Expires: time.Unix(c.Expires, 0),
		Principal:     "arn:aws:sts::" + Account + ":assumed-role/" + name + "/" + session,
		AssumedRoleID: "AROA" + strings.ToUpper(hex.EncodeToString(id[:6])) + ":" + session,
		PackedPercent: packedPercent(policy),
	}
}

// allows evaluates a signed caller's access as IAM would for the local
// account: the root and users hold every permission (the account's admins),
// a session what both its role's policy and its session policy allow.
func (m *IAM) allows(k sigv4.Key, a access) bool {
	if k.Role == "" {
		return true
	}
	r, ok := m.role(k.Role)
	if !ok || !r.policy.Allows(a.request(k.Principal)) {
		return false
	}
	if k.Policy == "" {
		return true
	}
	session, err := iampolicy.Parse(k.Policy)
	return err == nil && session.Allows(a.request(k.Principal))
}

// mayAssume: the role's trust policy lets the caller in, and the caller's
// own permissions (allows) include sts:AssumeRole on the role.
func (m *IAM) mayAssume(caller sigv4.Key, roleARN string) bool {
	r, ok := m.role(roleARN)
	if !ok {
		return false
	}
	a := access{action: "sts:AssumeRole", resource: roleARN}
	return r.trust.Allows(a.request(caller.Principal)) && m.allows(caller, a)
}
