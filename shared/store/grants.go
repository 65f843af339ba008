package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Grants of a catalog live in its partition GRANT#<catalog>: one item per
// principal (or pattern), G#<principal>, and one index item, INDEX, with a
// version that every grant change raises in the same transaction and the
// grants a lookup by the caller's principal cannot find by key (Indexed).
// An authorization reads the caller's item(s) and the index: a few items
// whatever the number of principals (docs/design/authorization.md, Authentication and
// authorization).

// Grant holds the privileges of one principal (or principal pattern) on a catalog.
type Grant struct {
	Principal  string   `dynamodbav:"principal"`
	Privileges []string `dynamodbav:"privileges"`
}

// Indexed tells the grants the index lists: those whose principal can match
// callers that do not name it (patterns). The authorizer owns the rule
// (authz.Indexed); the store applies it to what it writes.
type Indexed func(principal string) bool

// GrantIndex is a catalog's index item.
type GrantIndex struct {
	// Version changes with every grant change of the catalog: a cache of
	// the catalog's grants is current while it reads the same version.
	Version  int64   `dynamodbav:"version"`
	Patterns []Grant `dynamodbav:"patterns"`
}

// MaxIndexedGrants bounds a catalog's indexed grants: the index is one
// item (DynamoDB's 400 KB; a principal takes up to 2 KB) read whole.
const MaxIndexedGrants = 100

// ErrTooManyIndexed: a catalog holds MaxIndexedGrants pattern grants already.
var ErrTooManyIndexed = errors.New("too many pattern grants")

func grantKey(cat, principal string) (string, string) { return "GRANT#" + cat, "G#" + principal }

func grantIndexKey(cat string) (string, string) { return "GRANT#" + cat, "INDEX" }

// GetGrant loads one principal's grant; ErrNotFound if none.
func (s *Store) GetGrant(ctx context.Context, cat, principal string) (Grant, error) {
	var g Grant
	pk, sk := grantKey(cat, principal)
	err := s.get(ctx, pk, sk, &g)
	return g, err
}

// GetGrantIndex reads a catalog's grant index. A catalog whose grants
// predate the index gets one built from them (once: a conditional put);
// one without any grant has none (Version 0), and nothing is written.
func (s *Store) GetGrantIndex(ctx context.Context, cat string, indexed Indexed) (GrantIndex, error) {
	for {
		ix, found, err := s.grantIndex(ctx, cat, indexed)
		if err != nil || found || ix.Version == 0 {
			return ix, err
		}
		err = s.putGrantIndex(ctx, cat, ix, "attribute_not_exists(pk)", nil)
		if !errors.Is(err, ErrConditionFailed) {
			return ix, err
		}
		// Another writer made it meanwhile: read theirs.
	}
}

// grantIndex reads the index item; when there is none, it is built from
// the catalog's grants (Version 1 if there are any) and found is false.
func (s *Store) grantIndex(ctx context.Context, cat string, indexed Indexed) (ix GrantIndex, found bool, err error) {
	pk, sk := grantIndexKey(cat)
	err = s.get(ctx, pk, sk, &ix)
	if !errors.Is(err, ErrNotFound) {
		return ix, err == nil, err
	}
	grants, err := s.ListGrants(ctx, cat)
	if err != nil || len(grants) == 0 {
		return GrantIndex{}, false, err
	}
	ix = GrantIndex{Version: 1}
	for _, g := range grants {
		if indexed(g.Principal) {
			ix.Patterns = append(ix.Patterns, g)
		}
	}
	return ix, false, nil
}

func (s *Store) putGrantIndex(ctx context.Context, cat string, ix GrantIndex, cond string, values map[string]ddbtypes.AttributeValue) error {
	item, err := s.grantIndexItem(cat, ix)
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: aws.String(cond), ExpressionAttributeValues: values})
	if conditionFailed(err) {
		return ErrConditionFailed
	}
	return err
}

func (s *Store) grantIndexItem(cat string, ix GrantIndex) (map[string]ddbtypes.AttributeValue, error) {
	pk, sk := grantIndexKey(cat)
	return withKey(ix, pk, sk)
}

// PutGrant sets the privileges of a principal on a catalog, and in the same
// transaction raises the catalog's grant version (and lists the grant in
// the index when indexed says so); ErrTooManyIndexed past MaxIndexedGrants.
func (s *Store) PutGrant(ctx context.Context, cat string, g Grant, indexed Indexed) error {
	pk, sk := grantKey(cat, g.Principal)
	item, err := withKey(g, pk, sk)
	if err != nil {
		return err
	}
	return s.changeGrant(ctx, cat, g.Principal, indexed, func(ix *GrantIndex) (ddbtypes.TransactWriteItem, error) {
		if indexed(g.Principal) {
			if len(ix.Patterns) >= MaxIndexedGrants {
				return ddbtypes.TransactWriteItem{}, fmt.Errorf("%w: a catalog holds at most %d", ErrTooManyIndexed, MaxIndexedGrants)
			}
			ix.Patterns = append(ix.Patterns, g)
		}
		return ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item}}, nil
	})
}

// DeleteGrant removes a principal's grant (and raises the catalog's grant
// version); ErrNotFound if none.
func (s *Store) DeleteGrant(ctx context.Context, cat, principal string, indexed Indexed) error {
	pk, sk := grantKey(cat, principal)
	return s.changeGrant(ctx, cat, principal, indexed, func(*GrantIndex) (ddbtypes.TransactWriteItem, error) {
		return ddbtypes.TransactWriteItem{Delete: &ddbtypes.Delete{TableName: aws.String(s.table), Key: key(pk, sk),
			ConditionExpression: aws.String("attribute_exists(pk)")}}, nil
	})
}

// changeGrant writes one grant item (change's) and the index it read, with
// the principal's entry taken out first (change puts it back) and the
// version raised, conditioned on the version read: a concurrent change of
// another grant makes it read again.
func (s *Store) changeGrant(ctx context.Context, cat, principal string, indexed Indexed, change func(*GrantIndex) (ddbtypes.TransactWriteItem, error)) error {
	for attempt := 0; ; attempt++ {
		ix, found, err := s.grantIndex(ctx, cat, indexed)
		if err != nil {
			return err
		}
		cond, values := "attribute_not_exists(pk)", map[string]ddbtypes.AttributeValue(nil)
		if found {
			cond = "version = :v"
			values = map[string]ddbtypes.AttributeValue{":v": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(ix.Version)}}
		}
		ix.Patterns = slices.DeleteFunc(ix.Patterns, func(g Grant) bool { return g.Principal == principal })
		grant, err := change(&ix)
		if err != nil {
			return err
		}
		ix.Version++
		index, err := s.grantIndexItem(cat, ix)
		if err != nil {
			return err
		}
		err = s.transactWrite(ctx, []ddbtypes.TransactWriteItem{grant, {Put: &ddbtypes.Put{
			TableName: aws.String(s.table), Item: index, ConditionExpression: aws.String(cond), ExpressionAttributeValues: values,
		}}})
		reasons := cancelReasons(err)
		switch {
		case reasons == nil:
			return err
		case reasons[0]:
			return ErrNotFound // the delete of a grant that is not there
		case reasons[1] && attempt < 20:
			continue // the index changed since it was read
		case reasons[1]:
			return fmt.Errorf("grants of %s: %w: the index kept changing", cat, ErrConditionFailed)
		}
		return err
	}
}

// firstGrant is a new catalog's creator grant and its index (Version 1).
func (s *Store) firstGrant(cat string, g Grant, indexed Indexed) ([]ddbtypes.TransactWriteItem, error) {
	pk, sk := grantKey(cat, g.Principal)
	item, err := withKey(g, pk, sk)
	if err != nil {
		return nil, err
	}
	ix := GrantIndex{Version: 1}
	if indexed(g.Principal) {
		ix.Patterns = []Grant{g}
	}
	index, err := s.grantIndexItem(cat, ix)
	if err != nil {
		return nil, err
	}
	return []ddbtypes.TransactWriteItem{
		{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item}},
		{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: index}},
	}, nil
}

// ListGrants returns every grant of a catalog (the index's backfill; no
// request path reads them all).
func (s *Store) ListGrants(ctx context.Context, cat string) ([]Grant, error) {
	pk, _ := grantKey(cat, "")
	var out []Grant
	token := ""
	for {
		items, next, err := s.query(ctx, pk, "G#", token, 0)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var g Grant
			if err := unmarshal(it, &g); err != nil {
				return nil, err
			}
			out = append(out, g)
		}
		if next == "" {
			return out, nil
		}
		token = next
	}
}
