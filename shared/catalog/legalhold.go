package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/store"
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

// Holds answers whether a legal hold covers a table: its own, one of its
// namespaces' (every prefix of its namespace) or its catalog's, whose
// holds hold every table under them (SPEC §2: nothing of a legal-held
// table is deleted by any path, and its vended sessions are read-only).
// Every path that deletes a table's files, or vends it write sessions,
// asks here. A Holds remembers each scope it read, so a sweep reads each
// catalog and namespace once; Service.Held reads afresh.
type Holds struct {
	s    *Service
	read map[string]bool
}

// Holds returns an empty cache of scope holds (one per sweep run).
func (s *Service) Holds() *Holds { return &Holds{s: s, read: map[string]bool{}} }

// Held reports whether a legal hold covers a table of catalog cat in
// namespace ns (a soft-deleted record's too: the namespace it was dropped
// from); own is the table's (or the record's) own hold. A catalog or
// namespace that does not exist holds nothing (a soft-deleted table's
// namespace may be gone); one that cannot be read counts as held, with the
// error: the answer errs on the side of keeping.
func (h *Holds) Held(ctx context.Context, cat string, ns []string, own bool) (bool, error) {
	if own {
		return true, nil
	}
	on, ok := h.read[cat]
	if !ok {
		c, err := h.s.store.GetCatalog(ctx, cat)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return true, fmt.Errorf("legal hold of catalog %s: %w", cat, err)
		}
		on = legalHoldOf(c.Properties)
		h.read[cat] = on
	}
	if on {
		return true, nil
	}
	for i := 1; i <= len(ns); i++ {
		k := cat + "\x00" + strings.Join(ns[:i], "\x1f")
		on, ok := h.read[k]
		if !ok {
			n, err := h.s.store.GetNamespace(ctx, cat, ns[:i])
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return true, fmt.Errorf("legal hold of namespace %s: %w", strings.Join(ns[:i], "."), err)
			}
			on = legalHoldOf(n.Properties)
			h.read[k] = on
		}
		if on {
			return true, nil
		}
	}
	return false, nil
}

// Held is Holds().Held: one answer, read now.
func (s *Service) Held(ctx context.Context, cat string, ns []string, own bool) (bool, error) {
	return s.Holds().Held(ctx, cat, ns, own)
}
