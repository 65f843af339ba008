package catalog

import (
	"context"
	"fmt"
	"strconv"

	"github.com/icehold/icehold/shared/authz"
)

// Authorizer is the check the catalog makes itself where the route cannot
// see the change from the request's body: a register's properties come from
// its metadata file, and every path's effective legal-hold change is
// checked here too. *authz.Authorizer satisfies it.
type Authorizer interface {
	Check(ctx context.Context, catalog string, privs ...authz.Privilege) error
}

// SetAuthorizer gives the catalog its authorizer (the composition root's).
// Without one, no request may set or clear a legal hold.
func (s *Service) SetAuthorizer(a Authorizer) { s.authz = a }

// legalHoldOf reads a table's legal hold from its properties.
func legalHoldOf(props map[string]string) bool {
	on, _ := strconv.ParseBool(props[PropLegalHold])
	return on
}

// LegalHeld reports whether properties (a table's, a namespace's or a
// catalog's) set a legal hold.
func LegalHeld(props map[string]string) bool { return legalHoldOf(props) }

// checkLegalHoldChange lets a request set or clear a table's legal hold only
// with TABLE_LEGAL_HOLD (SPEC §2): a hold the table's writers could lift
// would hold nothing. from is the hold before the request, to after it.
func (s *Service) checkLegalHoldChange(ctx context.Context, cat string, id Ident, from, to bool) error {
	if from == to {
		return nil
	}
	verb := "set"
	if !to {
		verb = "clear"
	}
	return s.requireLegalHold(ctx, cat, fmt.Sprintf("%s the legal hold of %s (%s)", verb, id, PropLegalHold))
}

// requireLegalHold: what (an action on a held table) needs TABLE_LEGAL_HOLD.
func (s *Service) requireLegalHold(ctx context.Context, cat, what string) error {
	if s.authz == nil {
		return fmt.Errorf("%s: %w: no authorizer", what, authz.ErrForbidden)
	}
	if err := s.authz.Check(ctx, cat, authz.TableLegalHold); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
