package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ErrNotEmpty: a namespace still holds tables or child namespaces.
var ErrNotEmpty = errors.New("not empty")

// levelSep joins namespace levels in keys; identifiers never hold control
// characters, so it cannot collide with a level.
const levelSep = "\x1f"

// Catalog is one Iceberg catalog (a REST "prefix") with its warehouse.
type Catalog struct {
	Name       string            `dynamodbav:"name"`
	Warehouse  string            `dynamodbav:"warehouse"`
	Properties map[string]string `dynamodbav:"props"`
	CreatedAt  string            `dynamodbav:"created_at"`
	CreatedBy  string            `dynamodbav:"created_by"`
	Version    int64             `dynamodbav:"version"`
	// Hold is the catalog's claim on its warehouse (the ownership index).
	Hold *Hold `dynamodbav:"hold,omitempty"`
}

// Namespace is one namespace of a catalog.
type Namespace struct {
	Levels     []string          `dynamodbav:"levels"`
	Properties map[string]string `dynamodbav:"props"`
	Version    int64             `dynamodbav:"version"`
	// Children counts its tables and child namespaces (soft-deleted tables
	// and purge tombstones do not count): every write that adds or removes
	// one changes it in the same transaction, and a namespace is dropped
	// only at zero, so a drop can never race a create into it.
	Children int `dynamodbav:"children"`
}

// TableEntry is a catalog entry: the name and the pointer to the current
// metadata file. Views are entries too (Kind EntryView), at the same key as
// a table of their name would be: one item per identifier, so a table and
// a view can never share one (every create is conditioned on the key's
// absence), and they share the namespace's children count, soft delete,
// claims and jobs.
type TableEntry struct {
	// Kind: "" a table (every entry from before views), EntryView a view.
	Kind             string   `dynamodbav:"kind,omitempty"`
	Namespace        []string `dynamodbav:"ns"`
	Name             string   `dynamodbav:"name"`
	MetadataLocation string   `dynamodbav:"metadata_location"`
	TableUUID        string   `dynamodbav:"table_uuid"`
	CreatedAt        string   `dynamodbav:"created_at"`
	CreatedBy        string   `dynamodbav:"created_by"`
	UpdatedAt        string   `dynamodbav:"updated_at"`
	// The table's lifecycle properties, mirrored from its metadata by every
	// write of the entry, so a drop decides from the entry alone (no S3 read
	// on the drop's path): icehold.legal-hold and soft-delete.hold-period.
	LegalHold  bool   `dynamodbav:"legal_hold"`
	HoldPeriod string `dynamodbav:"hold_period"`
	// Hold is the entry's claim on its location; nil when it owns nothing
	// (an entry that predates the ownership index and overlaps an owner).
	Hold *Hold `dynamodbav:"hold,omitempty"`
	// Extra are prefixes the table owns besides its location: its old
	// locations (set-location) that a retained snapshot still reaches.
	// They go wherever Hold goes (rename, soft delete, undrop, purge job).
	Extra []Hold `dynamodbav:"extra_holds,omitempty"`
}

// Holds are all the entry's claims, its location's first.
func (e TableEntry) Holds() []Hold { return holds(e.Hold, e.Extra) }

// EntryView is the Kind of a view's entry.
const EntryView = "view"

// IsView reports whether the entry is a view's.
func (e TableEntry) IsView() bool { return e.Kind == EntryView }

// owner is the entry's owner as its claims name it.
func (e TableEntry) owner(cat string) Owner {
	o := Owner{Kind: OwnerTable, Catalog: cat, Namespace: e.Namespace, Name: e.Name}
	if e.IsView() {
		o.Kind = OwnerView
	}
	return o
}

func holds(h *Hold, extra []Hold) []Hold {
	var out []Hold
	if h != nil {
		out = append(out, *h)
	}
	return append(out, extra...)
}

func catalogKey(name string) (string, string) { return "CATALOG#" + name, "CATALOG" }

func nsKey(cat string, levels []string) (string, string) {
	return "NS#" + cat, fmt.Sprintf("%02d#%s", len(levels), strings.Join(levels, levelSep))
}

func tablePK(cat string, ns []string) string {
	return "TBL#" + cat + "#" + strings.Join(ns, levelSep)
}

func tableKey(cat string, ns []string, name string) (string, string) {
	return tablePK(cat, ns), "T#" + name
}

func withKey(v any, pk, sk string) (map[string]ddbtypes.AttributeValue, error) {
	item, err := marshal(v)
	if err != nil {
		return nil, err
	}
	// Empty maps and lists are left out: they read back as absent (nil), and
	// minidyn mangles empty maps.
	for k, v := range item {
		switch v := v.(type) {
		case *ddbtypes.AttributeValueMemberM:
			if len(v.Value) == 0 {
				delete(item, k)
			}
		case *ddbtypes.AttributeValueMemberL:
			if len(v.Value) == 0 {
				delete(item, k)
			}
		}
	}
	item["pk"] = &ddbtypes.AttributeValueMemberS{Value: pk}
	item["sk"] = &ddbtypes.AttributeValueMemberS{Value: sk}
	return item, nil
}

// ---- catalogs ----

// CreateCatalog stores a new catalog and, in the same transaction, its
// warehouse claim (with claim) and its creator's grant (with creator, and
// the catalog's grant index: see PutGrant); ErrExists if the name is taken,
// ErrLocationTaken if the warehouse overlaps another owner's prefix.
func (s *Store) CreateCatalog(ctx context.Context, c Catalog, claim *Claim, creator *Grant, indexed Indexed) error {
	pk, sk := catalogKey(c.Name)
	if claim != nil {
		c.Hold = &claim.Hold
	}
	item, err := withKey(c, pk, sk)
	if err != nil {
		return err
	}
	items := []ddbtypes.TransactWriteItem{{Put: &ddbtypes.Put{
		TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}}}
	if creator != nil {
		grants, err := s.firstGrant(c.Name, *creator, indexed)
		if err != nil {
			return err
		}
		items = append(items, grants...)
	}
	first := len(items)
	if claim != nil {
		var lc locChange
		if err := lc.Take(*claim); err != nil {
			return err
		}
		loc, err := s.locItems(&lc)
		if err != nil {
			return err
		}
		items = append(items, loc...)
	}
	err = s.runLoc(ctx, items, first)
	if errors.Is(err, ErrConditionFailed) {
		return ErrExists
	}
	return err
}

// SetCatalogHold records a backfilled warehouse claim on a catalog.
func (s *Store) SetCatalogHold(ctx context.Context, name string, claim Claim) error {
	pk, sk := catalogKey(name)
	return s.setHold(ctx, pk, sk, "attribute_exists(pk)", nil, nil, claim, nil)
}

// GetCatalog loads a catalog; ErrNotFound if unknown.
func (s *Store) GetCatalog(ctx context.Context, name string) (Catalog, error) {
	var c Catalog
	pk, sk := catalogKey(name)
	err := s.get(ctx, pk, sk, &c)
	return c, err
}

// UpdateCatalog replaces a catalog if nobody changed it since it was read.
func (s *Store) UpdateCatalog(ctx context.Context, c Catalog) error {
	prev := c.Version
	c.Version++
	pk, sk := catalogKey(c.Name)
	item, err := withKey(c, pk, sk)
	if err != nil {
		return err
	}
	return s.putIfVersion(ctx, item, prev)
}

func (s *Store) putIfVersion(ctx context.Context, item map[string]ddbtypes.AttributeValue, prev int64) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(s.table),
		Item:                item,
		ConditionExpression: aws.String("attribute_exists(pk) AND version = :v"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":v": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(prev)},
		},
	})
	if conditionFailed(err) {
		return ErrConditionFailed
	}
	return err
}

// ---- namespaces ----

// CreateNamespace stores a namespace whose parent (for nested ones) exists.
// ErrNotFound: parent missing; ErrExists: namespace exists.
func (s *Store) CreateNamespace(ctx context.Context, cat string, ns Namespace) error {
	pk, sk := nsKey(cat, ns.Levels)
	item, err := withKey(ns, pk, sk)
	if err != nil {
		return err
	}
	if len(ns.Levels) == 1 {
		return s.putNew(ctx, item)
	}
	err = s.transactWrite(ctx, []ddbtypes.TransactWriteItem{
		s.nsCount(cat, ns.Levels[:len(ns.Levels)-1], 1),
		{Put: &ddbtypes.Put{TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")}},
	})
	if reasons := cancelReasons(err); reasons != nil {
		if reasons[0] {
			return ErrNotFound
		}
		return ErrExists
	}
	return err
}

// GetNamespace loads a namespace; ErrNotFound if missing.
func (s *Store) GetNamespace(ctx context.Context, cat string, levels []string) (Namespace, error) {
	var ns Namespace
	pk, sk := nsKey(cat, levels)
	err := s.get(ctx, pk, sk, &ns)
	return ns, err
}

// ListNamespaces lists the direct children of parent (top level when empty).
func (s *Store) ListNamespaces(ctx context.Context, cat string, parent []string, token string, limit int) ([]Namespace, string, error) {
	pk, prefix := nsKey(cat, append(append([]string{}, parent...), ""))
	items, next, err := s.query(ctx, pk, prefix, token, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]Namespace, len(items))
	for i, it := range items {
		if err := unmarshal(it, &out[i]); err != nil {
			return nil, "", err
		}
	}
	return out, next, nil
}

// UpdateNamespace replaces a namespace's properties if nobody changed it since
// it was read, its count of children included (ErrConditionFailed
// otherwise: read again and retry; ErrNotFound once it is gone).
func (s *Store) UpdateNamespace(ctx context.Context, cat string, ns Namespace) error {
	prev := ns.Version
	ns.Version++
	pk, sk := nsKey(cat, ns.Levels)
	item, err := withKey(ns, pk, sk)
	if err != nil {
		return err
	}
	cond := "attribute_exists(pk) AND version = :v AND children = :c"
	if ns.Children == 0 {
		cond = "attribute_exists(pk) AND version = :v AND (attribute_not_exists(children) OR children = :c)"
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String(cond),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":v": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(prev)},
			":c": &ddbtypes.AttributeValueMemberN{Value: fmt.Sprint(ns.Children)},
		},
	})
	if conditionFailed(err) {
		return ErrConditionFailed
	}
	return err
}

// DropNamespace deletes an empty namespace.
func (s *Store) DropNamespace(ctx context.Context, cat string, levels []string) error {
	if _, err := s.GetNamespace(ctx, cat, levels); err != nil {
		return err
	}
	tables, _, err := s.query(ctx, tablePK(cat, levels), "T#", "", 1)
	if err != nil {
		return err
	}
	children, _, err := s.ListNamespaces(ctx, cat, levels, "", 1)
	if err != nil {
		return err
	}
	if len(tables) > 0 || len(children) > 0 {
		return ErrNotEmpty // what predates the counter
	}
	// The counter decides: a create that won the race made it non-zero.
	pk, sk := nsKey(cat, levels)
	items := []ddbtypes.TransactWriteItem{{Delete: &ddbtypes.Delete{
		TableName: aws.String(s.table), Key: key(pk, sk),
		ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(children) OR children = :z)"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":z": &ddbtypes.AttributeValueMemberN{Value: "0"}},
	}}}
	if len(levels) > 1 {
		items = append(items, s.nsCount(cat, levels[:len(levels)-1], -1))
	}
	err = s.transactWrite(ctx, items)
	if reasons := cancelReasons(err); reasons != nil {
		if _, gerr := s.GetNamespace(ctx, cat, levels); errors.Is(gerr, ErrNotFound) {
			return ErrNotFound
		}
		return ErrNotEmpty
	}
	return err
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// Seconds renders a stored time (nanoseconds, which order records) as the
// API answers every time: RFC 3339 with whole seconds, UTC; text that is not
// a time is returned as it is.
func Seconds(stored string) string {
	t, err := time.Parse(time.RFC3339Nano, stored)
	if err != nil {
		return stored
	}
	return t.UTC().Format(time.RFC3339)
}
