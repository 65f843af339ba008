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

// Grants is what the authorizer reads grants from.
type Grants interface {
	ListGrants(ctx context.Context, catalog string) ([]store.Grant, error)
}

// Authorizer checks privileges against grants. Admins (patterns) hold every
// privilege everywhere: the bootstrap that lets the first catalog be made.
type Authorizer struct {
	grants Grants
	admins []string
}

// New returns an authorizer; admins are principal patterns ("*" globs).
func New(g Grants, admins []string) *Authorizer {
	return &Authorizer{grants: g, admins: admins}
}

// matches reports whether principal fits pattern. As in IAM policies, '*'
// matches any run of characters ('/' included) and '?' any one, so
// arn:aws:sts::123:assumed-role/etl-* covers every session of the etl roles.
// A pattern naming an IAM role (arn:aws:iam::123:role/path/name) also covers
// the role's sessions (arn:aws:sts::123:assumed-role/name/*): API Gateway
// reports a caller who assumed the role by its session ARN.
func matches(pattern, principal string) bool {
	if glob(pattern, principal) {
		return true
	}
	if sessions, ok := roleSessions(pattern); ok {
		return glob(sessions, principal)
	}
	return false
}

func glob(pattern, principal string) bool {
	if pattern == principal {
		return true
	}
	if !strings.ContainsAny(pattern, "*?") {
		return false
	}
	expr := regexp.QuoteMeta(pattern)
	expr = strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(expr)
	ok, err := regexp.MatchString("^"+expr+"$", principal)
	return err == nil && ok
}

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
		if strings.ContainsAny(name, "*?") {
			return "", false
		}
		name = name[i+1:]
	}
	if name == "" {
		return "", false
	}
	return "arn:" + m[1] + ":sts::" + m[2] + ":assumed-role/" + name + "/*", true
}

// IsAdmin reports whether principal is a bootstrap admin.
func (a *Authorizer) IsAdmin(principal string) bool {
	for _, p := range a.admins {
		if matches(p, principal) {
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

// held reads the privileges the principal holds on one scope: the catalog's
// own grants only (the system scope's grants are not merged into a catalog),
// and on the system scope only what it may hold.
func (a *Authorizer) held(ctx context.Context, scope, principal string) (map[Privilege]bool, error) {
	held := map[Privilege]bool{}
	grants, err := a.grants.ListGrants(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("read grants of %s: %w", scope, err)
	}
	for _, g := range grants {
		if !matches(g.Principal, principal) {
			continue
		}
		for _, p := range g.Privileges {
			if scope != SystemCatalog || slices.Contains(SystemPrivileges, Privilege(p)) {
				held[Privilege(p)] = true
			}
		}
	}
	return held, nil
}
