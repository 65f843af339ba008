// Package authz decides who may do what: principals come from the caller's
// identity (IAM ARN in AWS, a bearer token locally), privileges from grants
// stored per catalog. Default deny.
package authz

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/icehold/icehold/shared/iampolicy"
	"github.com/icehold/icehold/shared/store"
)

// Privilege is one right on a catalog.
type Privilege string

// The privileges of SPEC §2.
const (
	NamespaceCreate      Privilege = "NAMESPACE_CREATE"
	NamespaceDrop        Privilege = "NAMESPACE_DROP"
	TableCreate          Privilege = "TABLE_CREATE"
	TableRead            Privilege = "TABLE_READ"
	TableWrite           Privilege = "TABLE_WRITE"
	TableDrop            Privilege = "TABLE_DROP"
	TableDropWithPurge   Privilege = "TABLE_DROP_WITH_PURGE"
	TableUndrop          Privilege = "TABLE_UNDROP"
	TableListSoftDeleted Privilege = "TABLE_LIST_SOFT_DELETED"
	PartitionDrop        Privilege = "PARTITION_DROP"
	CatalogManage        Privilege = "CATALOG_MANAGE"
	// TableLegalHold sets and clears legal holds, whichever path writes
	// them: a hold the table's writers could lift would hold nothing.
	TableLegalHold Privilege = "TABLE_LEGAL_HOLD"
)

// All lists every privilege, in a stable order.
var All = []Privilege{
	NamespaceCreate, NamespaceDrop, TableCreate, TableRead, TableWrite, TableDrop,
	TableDropWithPurge, TableUndrop, TableListSoftDeleted, PartitionDrop, CatalogManage, TableLegalHold,
}

// SystemCatalog is the grant scope of the right to create catalogs. It holds
// only CATALOG_MANAGE and grants nothing inside any existing catalog: a
// catalog's rights are its own grants (its creator gets its CATALOG_MANAGE).
const SystemCatalog = "*"

// SystemPrivileges are the only privileges a grant on SystemCatalog may hold.
var SystemPrivileges = []Privilege{CatalogManage}

var (
	// ErrUnauthenticated: the request carries no identity.
	ErrUnauthenticated = errors.New("not authenticated")
	// ErrForbidden: the identity lacks the privilege.
	ErrForbidden = errors.New("forbidden")
	// ErrUnknownPrivilege: a grant names a privilege that does not exist.
	ErrUnknownPrivilege = errors.New("unknown privilege")
)

// Valid reports whether p is a known privilege.
func Valid(p string) bool { return slices.Contains(All, Privilege(p)) }

type principalKey struct{}

// WithPrincipal attaches the caller's principal to ctx.
func WithPrincipal(ctx context.Context, principal string) context.Context {
	return context.WithValue(ctx, principalKey{}, principal)
}

// Principal returns the caller's principal, "" when anonymous.
func Principal(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// Grants is where the authorizer reads and writes grants (*store.Store).
type Grants interface {
	GetGrant(ctx context.Context, catalog, principal string) (store.Grant, error)
	GetGrantIndex(ctx context.Context, catalog string, indexed store.Indexed) (store.GrantIndex, error)
	PutGrant(ctx context.Context, catalog string, g store.Grant, indexed store.Indexed) error
	DeleteGrant(ctx context.Context, catalog, principal string, indexed store.Indexed) error
}

// ErrTooManyPatterns: a catalog holds store.MaxIndexedGrants grants found
// through its index (patterns, and role ARNs with a path) already.
var ErrTooManyPatterns = errors.New("too many indexed grants")

// ErrBadPrincipal: a string that cannot name a principal.
var ErrBadPrincipal = errors.New("not a principal")

// MaxPrincipalBytes bounds a principal's length (IAM ARNs stay far below it).
const MaxPrincipalBytes = 2048

// ValidatePrincipal is the one rule for every principal icehold stores or
// grants to (the grants API, local tokens, local IAM users): 1 to
// MaxPrincipalBytes bytes of valid UTF-8, with no whitespace, no control
// character (0x00-0x1F, 0x7F, and U+0080-U+009F) and no U+FFFD (the mark
// of text decoded lossily on its way here). It reads bytes as given:
// nothing is decoded into something else first, so two spellings never
// reach one grant.
func ValidatePrincipal(p string) error {
	if err := validName(p); err != nil {
		return err
	}
	for _, r := range p {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Errorf("%w: %q holds whitespace or a control character (%U)", ErrBadPrincipal, p, r)
		case r == utf8.RuneError:
			return fmt.Errorf("%w: %q holds U+FFFD, the replacement character (text decoded lossily)", ErrBadPrincipal, p)
		}
	}
	return nil
}

// validName: p can name a grant at all (what reading and revoking one
// need: a grant stored before ValidatePrincipal's rule can still be read
// and revoked, and invalid UTF-8 never reaches one by a lossy decoding).
func validName(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%w: it is empty", ErrBadPrincipal)
	case len(p) > MaxPrincipalBytes:
		return fmt.Errorf("%w: it is %d bytes long, at most %d", ErrBadPrincipal, len(p), MaxPrincipalBytes)
	case !utf8.ValidString(p):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrBadPrincipal, p)
	}
	return nil
}

// Grantee is whom a grant names: one principal by its name, or (Pattern)
// every principal an IAM pattern matches. A name is never a pattern: a
// principal called user:a* is granted as itself, and user:a.b gains
// nothing from it.
type Grantee struct {
	Principal string
	Pattern   bool
}

// Key is how the grant is stored and looked up: as an IAM pattern, a name
// escaped so that its '*', '?' and '$' are characters. (Patterns stored
// before names were escaped keep their meaning.)
func (g Grantee) Key() string {
	if g.Pattern {
		return g.Principal
	}
	return iampolicy.Escape(g.Principal)
}

// Authorizer checks privileges against grants. Admins (patterns) hold every
// privilege everywhere: the bootstrap that lets the first catalog be made.
//
// What it reads is cached for the life of the process (a Lambda's
// execution environment, the local server) and trusted for TTL: past it,
// one read of the catalog's grant index tells whether any grant changed
// (its version), and only then is the rest read again. So a grant change
// counts within TTL everywhere, and at once in the process that made it:
// a change drops the catalog's cached scope and moves a fence (changes),
// and a read that began before the fence moved caches nothing, so no
// check under way while a grant changes can put back what it replaced.
type Authorizer struct {
	grants Grants
	admins []matcher
	now    func() time.Time

	mu     sync.Mutex
	scopes map[string]*scope
	// changes counts the grant changes this process made: the fence.
	changes uint64
}

// TTL is how long a cached reading of a catalog's grants is trusted before
// its index is read again: the bound on how late a revoke counts in another
// process (docs/design/authorization.md, Authentication and authorization).
const TTL = 5 * time.Second

// Bounds of the cache: past them it starts over (a process serving that
// many catalogs or principals reads them again; it never grows unbounded).
const (
	maxScopes     = 1000
	maxPrincipals = 10000
)

// scope is what one process knows of a catalog's grants.
type scope struct {
	version int64
	// checked is when the read that found version began: nothing seen
	// through this scope is older than that.
	checked  time.Time
	patterns []pattern
	// held are the privileges of principals looked up at this version.
	held map[string]map[Privilege]bool
}

type pattern struct {
	matcher
	privileges []string
}

// New returns an authorizer; admins are principal patterns ("*" globs).
func New(g Grants, admins []string) *Authorizer {
	a := &Authorizer{grants: g, now: time.Now, scopes: map[string]*scope{}}
	for _, p := range admins {
		a.admins = append(a.admins, compile(p))
	}
	return a
}

// SetClock replaces the clock the cache's TTL is measured on (tests).
func (a *Authorizer) SetClock(now func() time.Time) { a.now = now }

// matcher is a principal pattern, compiled once: an IAM pattern
// (shared/iampolicy), so '*' matches any run of characters ('/' included)
// and '?' any one, and arn:aws:sts::123:assumed-role/etl-* covers every
// session of the etl roles. A pattern naming an IAM role
// (arn:aws:iam::123:role/path/name) also covers the role's sessions
// (arn:aws:sts::123:assumed-role/name/*): API Gateway reports a caller who
// assumed the role by its session ARN.
type matcher struct {
	pattern  iampolicy.Pattern
	sessions *iampolicy.Pattern // nil: not a role
}

func compile(pattern string) matcher {
	m := matcher{pattern: iampolicy.Compile(pattern)}
	if sessions, ok := roleSessions(pattern); ok {
		p := iampolicy.Compile(sessions)
		m.sessions = &p
	}
	return m
}

func (m matcher) match(principal string) bool {
	return m.pattern.Match(principal) || m.sessions != nil && m.sessions.Match(principal)
}

// matches reports whether principal fits pattern (see matcher).
func matches(pattern, principal string) bool { return compile(pattern).match(principal) }

var roleARN = regexp.MustCompile(`^arn:(aws[a-z-]*):iam::([0-9]{12}|\*):role/(.+)$`)

// roleSessions turns a role ARN (pattern) into the pattern of its sessions'
// ARNs: the session ARN carries the role's name without its path.
func roleSessions(pattern string) (string, bool) {
	m := roleARN.FindStringSubmatch(pattern)
	if m == nil {
		return "", false
	}
	name := m[3]
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		// Role names are unique in an account whatever their path, so an
		// exact role with a path maps to its sessions; a wildcard with a
		// path would not (the session ARN has no path to check it against).
		if iampolicy.HasWildcard(name) {
			return "", false
		}
		name = name[i+1:]
	}
	if name == "" {
		return "", false
	}
	return "arn:" + m[1] + ":sts::" + m[2] + ":assumed-role/" + name + "/*", true
}

// Indexed reports whether a grant to principal can match callers that a
// lookup by key does not find (the store lists such grants in the
// catalog's index): a pattern, or an IAM role named with a path, whose
// sessions' ARNs carry the role's name only. Every other grant is found
// under the caller's principal or, for a role session, its role's ARN
// without a path (lookupKeys).
func Indexed(principal string) bool {
	if iampolicy.HasWildcard(principal) {
		return true
	}
	m := roleARN.FindStringSubmatch(principal)
	return m != nil && strings.Contains(m[3], "/")
}

var sessionARN = regexp.MustCompile(`^arn:(aws[a-z-]*):sts::([0-9]{12}):assumed-role/([^/]+)/`)

// lookupKeys are the grants that may name the caller, besides the indexed
// ones: its own principal and, for a role session, the role's ARN (as
// names: Grantee.Key).
func lookupKeys(principal string) []string {
	keys := []string{Grantee{Principal: principal}.Key()}
	if m := sessionARN.FindStringSubmatch(principal); m != nil {
		keys = append(keys, Grantee{Principal: "arn:" + m[1] + ":iam::" + m[2] + ":role/" + m[3]}.Key())
	}
	return keys
}

// IsAdmin reports whether principal is a bootstrap admin.
func (a *Authorizer) IsAdmin(principal string) bool {
	for _, m := range a.admins {
		if m.match(principal) {
			return true
		}
	}
	return false
}

// Check returns nil when the caller in ctx holds every one of privs on the
// catalog, ErrUnauthenticated or ErrForbidden otherwise.
func (a *Authorizer) Check(ctx context.Context, catalog string, privs ...Privilege) error {
	principal := Principal(ctx)
	if principal == "" {
		return ErrUnauthenticated
	}
	if a.IsAdmin(principal) {
		return nil
	}
	held, err := a.held(ctx, catalog, principal)
	if err != nil {
		return err
	}
	for _, p := range privs {
		if !held[p] {
			return fmt.Errorf("%w: %s lacks %s on catalog %s", ErrForbidden, principal, p, catalog)
		}
	}
	return nil
}

// CheckAny is Check for "at least one of privs" (reads that any role may do).
func (a *Authorizer) CheckAny(ctx context.Context, catalog string, privs ...Privilege) error {
	principal := Principal(ctx)
	if principal == "" {
		return ErrUnauthenticated
	}
	if a.IsAdmin(principal) {
		return nil
	}
	held, err := a.held(ctx, catalog, principal)
	if err != nil {
		return err
	}
	for _, p := range privs {
		if held[p] {
			return nil
		}
	}
	return fmt.Errorf("%w: %s holds none of %v on catalog %s", ErrForbidden, principal, privs, catalog)
}

// Grant sets the grantee's privileges on a scope (a catalog, or the system
// scope), counting at once in this process.
func (a *Authorizer) Grant(ctx context.Context, scope string, who Grantee, privs []string) error {
	if err := ValidatePrincipal(who.Principal); err != nil {
		return err
	}
	defer a.forget(scope)
	key := who.Key()
	err := a.grants.PutGrant(ctx, scope, store.Grant{Principal: key, Privileges: privs}, Indexed)
	if !errors.Is(err, store.ErrTooManyIndexed) {
		return err
	}
	const full = "catalog %s holds %d grants found through its index already (patterns, and role ARNs with a path)"
	if m := roleARN.FindStringSubmatch(key); m != nil && !iampolicy.HasWildcard(key) {
		// Role names are unique in an account whatever their path, and a
		// session's ARN names the role without it: the ARN without the
		// path names the same role, and is found by key.
		return fmt.Errorf("grant %s on %s: %w: "+full+"; grant %s instead (the same role without its path, found without the index)",
			who.Principal, scope, ErrTooManyPatterns, scope, store.MaxIndexedGrants, "arn:"+m[1]+":iam::"+m[2]+":role/"+m[3][strings.LastIndexByte(m[3], '/')+1:])
	}
	return fmt.Errorf("grant %s on %s: %w: "+full+"; name the principals, or use fewer patterns", who.Principal, scope, ErrTooManyPatterns, scope, store.MaxIndexedGrants)
}

// Lookup reads the grantee's grant on a scope (store.ErrNotFound if none).
func (a *Authorizer) Lookup(ctx context.Context, scope string, who Grantee) (store.Grant, error) {
	if err := validName(who.Principal); err != nil {
		return store.Grant{}, err
	}
	g, err := a.grants.GetGrant(ctx, scope, who.Key())
	g.Principal = who.Principal
	return g, err
}

// Revoke removes the grantee's grant on a scope (store.ErrNotFound if
// none), counting at once in this process.
func (a *Authorizer) Revoke(ctx context.Context, scope string, who Grantee) error {
	if err := validName(who.Principal); err != nil {
		return err
	}
	defer a.forget(scope)
	return a.grants.DeleteGrant(ctx, scope, who.Key(), Indexed)
}

// forget runs after a grant change was written (or failed): what was
// cached of the scope goes, and reads under way cache nothing.
func (a *Authorizer) forget(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.scopes, name)
	a.changes++
}

// held reads the privileges the principal holds on one scope: the catalog's
// own grants only (the system scope's grants are not merged into a catalog),
// and on the system scope only what it may hold.
func (a *Authorizer) held(ctx context.Context, name, principal string) (map[Privilege]bool, error) {
	sc, err := a.scope(ctx, name)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	h, ok := sc.held[principal]
	a.mu.Unlock()
	if ok {
		return h, nil
	}
	// Read after the index (scope): what they show is no older than it.
	h = map[Privilege]bool{}
	add := func(privs []string) {
		for _, p := range privs {
			if name != SystemCatalog || slices.Contains(SystemPrivileges, Privilege(p)) {
				h[Privilege(p)] = true
			}
		}
	}
	for _, key := range lookupKeys(principal) {
		g, err := a.grants.GetGrant(ctx, name, key)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read grant of %s on %s: %w", key, name, err)
		}
		add(g.Privileges)
	}
	for _, p := range sc.patterns {
		if p.match(principal) {
			add(p.privileges)
		}
	}
	a.mu.Lock()
	if len(sc.held) >= maxPrincipals {
		clear(sc.held)
	}
	sc.held[principal] = h
	a.mu.Unlock()
	return h, nil
}

// scope returns what this process knows of a catalog's grants, reading its
// index again when that is older than TTL (and everything else only when
// the index's version moved). A catalog without an index (no grants yet)
// is not cached: only admins pass there, and they read nothing.
func (a *Authorizer) scope(ctx context.Context, name string) (*scope, error) {
	now := a.now()
	a.mu.Lock()
	sc, fence := a.scopes[name], a.changes
	a.mu.Unlock()
	if sc != nil && now.Sub(sc.checked) < TTL {
		return sc, nil
	}
	ix, err := a.grants.GetGrantIndex(ctx, name, Indexed)
	if err != nil {
		return nil, fmt.Errorf("read grants of %s: %w", name, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// A grant changed here while the index was read: what was read may
	// predate the change. It answers this check (which began before the
	// change returned) and is not kept.
	stale := a.changes != fence
	if cur := a.scopes[name]; !stale && cur != nil && cur.version == ix.Version {
		if cur.checked.Before(now) {
			cur.checked = now
		}
		return cur, nil
	}
	sc = &scope{version: ix.Version, checked: now, held: map[string]map[Privilege]bool{}}
	for _, g := range ix.Patterns {
		sc.patterns = append(sc.patterns, pattern{compile(g.Principal), g.Privileges})
	}
	if ix.Version == 0 || stale {
		return sc, nil
	}
	if len(a.scopes) >= maxScopes {
		clear(a.scopes)
	}
	a.scopes[name] = sc
	return sc, nil
}
