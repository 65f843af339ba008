package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The ownership index: one owner per prefix (SPEC §2). Every table location
// and every catalog warehouse is a claim: an item per claimed prefix naming
// its owner. Each claim also adds one to a "below" counter on every prefix
// above it, so that "this prefix contains a claim" is a condition on one
// item, not a scan. A new claim at P is a transaction that requires
//   - no owner at P and nothing claimed below P (below = 0), and
//   - no owner at any prefix above P (each gets below += 1 in the same write),
// so two overlapping claims can never both succeed, however they race.
//
// A table inside its own catalog's warehouse starts its chain below the
// warehouse (Base): the warehouse claim already holds every prefix above it,
// so the bucket's top prefixes do not become hot items shared by every create.

// ErrLocationTaken: a claim equals, contains or lies inside another owner's.
var ErrLocationTaken = errors.New("location owned by another table or catalog")

// ErrTooManyItems: a change needs more than one DynamoDB transaction holds.
var ErrTooManyItems = errors.New("change too large for one transaction")

// MaxTransactItems is DynamoDB's limit on items in one transaction.
const MaxTransactItems = 100

// Owner kinds.
const (
	OwnerTable     = "table"
	OwnerView      = "view"
	OwnerWarehouse = "warehouse"
)

// Hold is what an owner keeps to release or retag its claim: the prefix,
// the claim's id, and where its chain of counted prefixes starts.
type Hold struct {
	ID     string `dynamodbav:"id"`
	Bucket string `dynamodbav:"bucket"`
	Prefix string `dynamodbav:"prefix"` // key text without a trailing '/'; "" = the whole bucket
	// Based: the chain starts below Base (a table inside its catalog's
	// warehouse); otherwise at the bucket's root.
	Based bool   `dynamodbav:"based"`
	Base  string `dynamodbav:"base"`
	// Registered: taken for metadata icehold did not write (register), so
	// what that metadata reaches outside the prefix is never deleted: a
	// job under this hold never widens its scope to the warehouse.
	Registered bool `dynamodbav:"registered,omitempty"`
}

// URI is the claimed prefix as s3://bucket/prefix.
func (h Hold) URI() string {
	if h.Prefix == "" {
		return "s3://" + h.Bucket
	}
	return "s3://" + h.Bucket + "/" + h.Prefix
}

// Owner is who holds a claim, as the claim item shows it.
type Owner struct {
	ID        string   `dynamodbav:"owner_id"`
	Kind      string   `dynamodbav:"kind"`
	Catalog   string   `dynamodbav:"catalog"`
	Namespace []string `dynamodbav:"ns"`
	Name      string   `dynamodbav:"name"`
	JobID     string   `dynamodbav:"job_id"` // a purge job holds the claim now
	Location  string   `dynamodbav:"location"`
	// SoftDeleted: the table is soft-deleted (it can still be undropped).
	SoftDeleted bool `dynamodbav:"soft_deleted"`
	// Unregistered: the catalog forgot the table and keeps its files; a
	// register of its metadata takes the claim back.
	Unregistered bool `dynamodbav:"unregistered"`
}

func (o Owner) String() string {
	what := "table"
	if o.Kind == OwnerView {
		what = "view"
	}
	switch {
	case o.Kind == OwnerWarehouse:
		return fmt.Sprintf("the warehouse of catalog %s (%s)", o.Catalog, o.Location)
	case o.JobID != "":
		return fmt.Sprintf("%s %s.%s of catalog %s, being purged by job %s (%s)", what, strings.Join(o.Namespace, "."), o.Name, o.Catalog, o.JobID, o.Location)
	case o.Unregistered:
		return fmt.Sprintf("unregistered table %s.%s of catalog %s, whose files are kept until its metadata is registered again (%s)", strings.Join(o.Namespace, "."), o.Name, o.Catalog, o.Location)
	case o.SoftDeleted:
		return fmt.Sprintf("soft-deleted %s %s.%s of catalog %s, which can still be undropped (%s)", what, strings.Join(o.Namespace, "."), o.Name, o.Catalog, o.Location)
	}
	return fmt.Sprintf("%s %s.%s of catalog %s (%s)", what, strings.Join(o.Namespace, "."), o.Name, o.Catalog, o.Location)
}

// Claim is a new claim: the hold and the owner it names.
type Claim struct {
	Hold  Hold
	Owner Owner
}

func locKey(bucket, prefix string) (string, string) { return "LOC#" + bucket, "P#" + prefix }

// ancestors lists the prefixes above h's that its chain counts, top first.
func (h Hold) ancestors() []string {
	var out []string
	if !h.Based {
		out = append(out, "")
	}
	for i := 0; i < len(h.Prefix); i++ {
		if h.Prefix[i] == '/' && (!h.Based || i > len(h.Base)) {
			out = append(out, h.Prefix[:i])
		}
	}
	if h.Prefix == "" {
		return nil // the whole bucket: nothing above
	}
	return out
}

// locOp is everything one transaction does to one prefix item.
type locOp struct {
	bucket, prefix string
	take           *Claim // becomes the owner
	release        string // the owner id that lets go
	retag          *Owner // the owner's display changes (same id)
	held           string // the claim of this owner id must be there (nothing changes)
	delta          int    // change of the below counter
	noOwner        bool   // above a new claim: must have no owner
	releasedBelow  int    // claims below it released in this transaction
	takenBelow     int    // claims below it taken in this transaction
}

// locChange is a set of claim changes that go into one transaction.
type locChange struct {
	ops   map[string]*locOp
	order []string
}

func (c *locChange) op(bucket, prefix string) *locOp {
	if c.ops == nil {
		c.ops = map[string]*locOp{}
	}
	k := bucket + "\x00" + prefix
	o, ok := c.ops[k]
	if !ok {
		o = &locOp{bucket: bucket, prefix: prefix}
		c.ops[k] = o
		c.order = append(c.order, k)
	}
	return o
}

// Take adds a new claim.
func (c *locChange) Take(cl Claim) error {
	o := c.op(cl.Hold.Bucket, cl.Hold.Prefix)
	if o.take != nil {
		return fmt.Errorf("%w: %s is claimed twice in one change", ErrLocationTaken, cl.Hold.URI())
	}
	o.take = &cl
	for _, a := range cl.Hold.ancestors() {
		ao := c.op(cl.Hold.Bucket, a)
		ao.delta++
		ao.noOwner = true
		ao.takenBelow++
	}
	return nil
}

// Release lets a hold go.
func (c *locChange) Release(h Hold) {
	o := c.op(h.Bucket, h.Prefix)
	o.release = h.ID
	for _, a := range h.ancestors() {
		ao := c.op(h.Bucket, a)
		ao.delta--
		ao.releasedBelow++
	}
}

// ReleaseAll lets every hold go.
func (c *locChange) ReleaseAll(hs []Hold) {
	for _, h := range hs {
		c.Release(h)
	}
}

// RetagAll retags every hold.
func (c *locChange) RetagAll(hs []Hold, o Owner) {
	for _, h := range hs {
		c.Retag(h, o)
	}
}

// Held requires the hold's claim to be there still (its generation),
// changing nothing.
func (c *locChange) Held(h Hold) {
	c.op(h.Bucket, h.Prefix).held = h.ID
}

// Retag changes what a hold's claim item says of its owner.
func (c *locChange) Retag(h Hold, o Owner) {
	o.ID = h.ID
	c.op(h.Bucket, h.Prefix).retag = &o
}

// items turns the change into transaction items, one per prefix, with what
// each item's failure means (index into the returned items).
func (s *Store) locItems(c *locChange) ([]ddbtypes.TransactWriteItem, error) {
	var out []ddbtypes.TransactWriteItem
	for _, k := range c.order {
		o := c.ops[k]
		if o.take != nil && o.takenBelow > 0 {
			return nil, fmt.Errorf("%w: %s and a location inside it are claimed in one change", ErrLocationTaken, o.take.Hold.URI())
		}
		if o.take != nil && o.noOwner {
			return nil, fmt.Errorf("%w: %s lies inside another location of the same change", ErrLocationTaken, o.take.Hold.URI())
		}
		it, ok, err := s.locItem(o)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, it)
		}
	}
	return out, nil
}

func (s *Store) locItem(o *locOp) (ddbtypes.TransactWriteItem, bool, error) {
	pk, sk := locKey(o.bucket, o.prefix)
	vals := map[string]ddbtypes.AttributeValue{}
	// Every attribute goes by a placeholder: several are DynamoDB reserved words.
	names := map[string]string{"#oid": "owner_id", "#below": "below"}
	var set, conds []string
	// A released claim sets owner_id = "" (never REMOVE: the local
	// emulator, minidyn 0.8.2, ignores REMOVE; docs/design/local.md); tidy then
	// deletes the item if nothing is claimed below it. emptied recognises
	// these updates by "#oid = :none" and a negative ":d".
	vals[":none"] = &ddbtypes.AttributeValueMemberS{Value: ""}
	ownerFree := "(attribute_not_exists(#oid) OR #oid = :none)"
	if o.release != "" {
		// The claim let go must be there still (its generation: claim ids
		// are never reused): a stale release of a claim released before
		// would count the prefixes above it down a second time.
		vals[":rel"] = &ddbtypes.AttributeValueMemberS{Value: o.release}
		ownerFree = "#oid = :rel"
	}
	switch {
	case o.take != nil:
		conds = append(conds, ownerFree)
		vals[":b"] = &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(o.releasedBelow)}
		if o.releasedBelow == 0 {
			conds = append(conds, "(attribute_not_exists(#below) OR #below = :b)")
		} else {
			conds = append(conds, "#below = :b")
		}
		ow := o.take.Owner
		ow.ID, ow.Location = o.take.Hold.ID, o.take.Hold.URI()
		if err := ownerSet(ow, vals, names, &set); err != nil {
			return ddbtypes.TransactWriteItem{}, false, err
		}
	case o.release != "" && o.retag == nil:
		conds = append(conds, ownerFree)
		set = append(set, "#oid = :none")
	case o.retag != nil:
		vals[":id"] = &ddbtypes.AttributeValueMemberS{Value: o.retag.ID}
		conds = append(conds, "#oid = :id")
		ow := *o.retag
		ow.Location = Hold{Bucket: o.bucket, Prefix: o.prefix}.URI()
		if err := ownerSet(ow, vals, names, &set); err != nil {
			return ddbtypes.TransactWriteItem{}, false, err
		}
	case o.noOwner:
		conds = append(conds, ownerFree)
	case o.held != "":
		vals[":held"] = &ddbtypes.AttributeValueMemberS{Value: o.held}
		conds = append(conds, "#oid = :held")
	}
	if o.delta == 0 && len(set) == 0 {
		if len(conds) == 0 {
			return ddbtypes.TransactWriteItem{}, false, nil
		}
		cond := strings.Join(conds, " AND ")
		cc := &ddbtypes.ConditionCheck{
			TableName: aws.String(s.table), Key: key(pk, sk), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: used(names, cond), ExpressionAttributeValues: used(vals, cond),
		}
		return ddbtypes.TransactWriteItem{ConditionCheck: cc}, true, nil
	}
	expr := ""
	if len(set) > 0 {
		expr += "SET " + strings.Join(set, ", ")
	}
	if o.delta != 0 {
		vals[":d"] = &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(o.delta)}
		expr += " ADD #below :d"
	}
	expr = strings.TrimSpace(expr)
	cond := strings.Join(conds, " AND ")
	up := &ddbtypes.Update{
		TableName: aws.String(s.table), Key: key(pk, sk), UpdateExpression: aws.String(expr),
		ExpressionAttributeNames: used(names, expr, cond), ExpressionAttributeValues: used(vals, expr, cond),
	}
	if cond != "" {
		up.ConditionExpression = aws.String(cond)
	}
	return ddbtypes.TransactWriteItem{Update: up}, true, nil
}

// emptied lists the claim items a transaction's locItem updates may leave
// empty: a released claim (SET #oid = :none) and the counters above a
// released claim (ADD #below with a negative :d).
func emptied(items []ddbtypes.TransactWriteItem) []map[string]ddbtypes.AttributeValue {
	var out []map[string]ddbtypes.AttributeValue
	for _, it := range items {
		up := it.Update
		if up == nil {
			continue
		}
		if pk, ok := up.Key["pk"].(*ddbtypes.AttributeValueMemberS); !ok || !strings.HasPrefix(pk.Value, "LOC#") {
			continue
		}
		d, _ := up.ExpressionAttributeValues[":d"].(*ddbtypes.AttributeValueMemberN)
		if strings.Contains(aws.ToString(up.UpdateExpression), "#oid = :none") || (d != nil && strings.HasPrefix(d.Value, "-")) {
			out = append(out, up.Key)
		}
	}
	return out
}

// tidy deletes the claim items a committed transaction left empty (no
// owner, nothing claimed below), so that the index holds only claims and
// what lies above them; dropped tables once kept theirs forever. An empty
// item and no item mean the same to every reader (Conflict, OwnerAt) and
// to every writer (a take creates what is missing), and the delete's
// condition loses to any concurrent take: best effort, a failure leaves
// an item as harmless as before. The deletes go at once (one round trip
// on a drop's request path, not one per level).
func (s *Store) tidy(ctx context.Context, keys []map[string]ddbtypes.AttributeValue) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, k := range keys {
		wg.Go(func() { s.tidyOne(ctx, k) })
	}
}

func (s *Store) tidyOne(ctx context.Context, k map[string]ddbtypes.AttributeValue) {
	_, _ = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: k,
		ConditionExpression:      aws.String("(attribute_not_exists(#oid) OR #oid = :none) AND (attribute_not_exists(#below) OR #below = :zero)"),
		ExpressionAttributeNames: map[string]string{"#oid": "owner_id", "#below": "below"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":none": &ddbtypes.AttributeValueMemberS{Value: ""}, ":zero": &ddbtypes.AttributeValueMemberN{Value: "0"},
		},
	})
}

var placeholderRe = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// used keeps the placeholders the expressions use (DynamoDB refuses unused ones).
func used[V any](m map[string]V, exprs ...string) map[string]V {
	out := map[string]V{}
	for _, e := range exprs {
		for _, tok := range placeholderRe.FindAllString(e, -1) {
			if v, ok := m[tok]; ok {
				out[tok] = v
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ownerSet writes an owner's attributes (empty strings included: a claim
// item's attributes are only ever set, never removed).
func ownerSet(o Owner, vals map[string]ddbtypes.AttributeValue, names map[string]string, set *[]string) error {
	str := func(attr, v string) {
		ph := "#o_" + attr
		if attr == "owner_id" {
			ph = "#oid"
		}
		names[ph] = attr
		vals[":o_"+attr] = &ddbtypes.AttributeValueMemberS{Value: v}
		*set = append(*set, ph+" = :o_"+attr)
	}
	str("owner_id", o.ID)
	str("kind", o.Kind)
	str("catalog", o.Catalog)
	str("name", o.Name)
	str("job_id", o.JobID)
	str("location", o.Location)
	names["#o_soft"] = "soft_deleted"
	vals[":o_soft"] = &ddbtypes.AttributeValueMemberBOOL{Value: o.SoftDeleted}
	*set = append(*set, "#o_soft = :o_soft")
	names["#o_unreg"] = "unregistered"
	vals[":o_unreg"] = &ddbtypes.AttributeValueMemberBOOL{Value: o.Unregistered}
	*set = append(*set, "#o_unreg = :o_unreg")
	if len(o.Namespace) == 0 {
		return nil // a warehouse: the kind says the namespace means nothing
	}
	ns, err := marshalValue(o.Namespace)
	if err != nil {
		return err
	}
	names["#o_ns"] = "ns"
	vals[":o_ns"] = ns
	*set = append(*set, "#o_ns = :o_ns")
	return nil
}

// Owner of a prefix item, if any.
type locItem struct {
	Owner
	Below int `dynamodbav:"below"`
}

// Conflict finds the owner a claim of h would collide with: an owner of h's
// prefix or of a prefix above it, or a claim below it. It reads (no scan:
// the items on h's chain, and one query below h when its counter says there
// is something there); ErrNotFound when h is free. It explains a refused
// claim and refuses one early; the transaction alone decides races.
func (s *Store) Conflict(ctx context.Context, h Hold) (Owner, error) {
	chain := append(h.ancestors(), h.Prefix)
	for _, p := range chain {
		var it locItem
		pk, sk := locKey(h.Bucket, p)
		err := s.get(ctx, pk, sk, &it)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return Owner{}, err
		}
		if it.ID != "" && it.ID != h.ID {
			return it.Owner, nil
		}
		if p == h.Prefix && it.Below > 0 {
			return s.ownerBelow(ctx, h)
		}
	}
	return Owner{}, ErrNotFound
}

// ownerBelow finds one owner of a prefix under h.
func (s *Store) ownerBelow(ctx context.Context, h Hold) (Owner, error) {
	pk, prefix := locKey(h.Bucket, h.Prefix)
	if h.Prefix != "" {
		prefix += "/"
	}
	token := ""
	for {
		items, next, err := s.query(ctx, pk, prefix, token, 100)
		if err != nil {
			return Owner{}, err
		}
		for _, raw := range items {
			var it locItem
			if err := unmarshal(raw, &it); err != nil {
				return Owner{}, err
			}
			if it.ID != "" {
				return it.Owner, nil
			}
		}
		if next == "" {
			return Owner{}, ErrNotFound
		}
		token = next
	}
}

// OwnerAt returns the owner of the nearest claimed prefix at or above the
// object key (the purge's guard for keys outside its own location);
// ErrNotFound when no claim covers it.
func (s *Store) OwnerAt(ctx context.Context, bucket, objectKey string) (Owner, error) {
	var best Owner
	found := false
	prefixes := []string{""}
	for i := 0; i < len(objectKey); i++ {
		if objectKey[i] == '/' {
			prefixes = append(prefixes, objectKey[:i])
		}
	}
	for _, p := range prefixes {
		var it locItem
		pk, sk := locKey(bucket, p)
		err := s.get(ctx, pk, sk, &it)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return Owner{}, err
		}
		if it.ID != "" {
			best, found = it.Owner, true
		}
	}
	if !found {
		return Owner{}, ErrNotFound
	}
	return best, nil
}

// TakeClaim takes a claim on its own (backfill of existing owners).
func (s *Store) TakeClaim(ctx context.Context, cl Claim) error {
	var c locChange
	if err := c.Take(cl); err != nil {
		return err
	}
	items, err := s.locItems(&c)
	if err != nil {
		return err
	}
	return s.runLoc(ctx, items, 0)
}

// runLoc runs a transaction whose items from index first on are claim
// items: a failed condition there is ErrLocationTaken.
func (s *Store) runLoc(ctx context.Context, items []ddbtypes.TransactWriteItem, first int) error {
	if len(items) > MaxTransactItems {
		return fmt.Errorf("%w: %d items, at most %d", ErrTooManyItems, len(items), MaxTransactItems)
	}
	err := s.transactWrite(ctx, items)
	if reasons := cancelReasons(err); reasons != nil {
		for j, failed := range reasons {
			if failed && j < first {
				return ErrConditionFailed // the record's own guard comes first
			}
		}
		for _, failed := range reasons {
			if failed {
				return ErrLocationTaken
			}
		}
		return ErrConditionFailed
	}
	return err
}

// ReleaseClaim lets a hold go on its own (nothing else changes).
func (s *Store) ReleaseClaim(ctx context.Context, h Hold) error {
	var c locChange
	c.Release(h)
	items, err := s.locItems(&c)
	if err != nil {
		return err
	}
	return s.runLoc(ctx, items, 0)
}

// setHold records a claim on the record that owns it (a backfill: the record
// predates the index) and takes the claim, in one transaction; the record's
// guard comes first (ErrConditionFailed), then the claim (ErrLocationTaken).
// takeAll is the claim items of a hold and its extra holds taken in one
// change, and the SET clause that records them (hold, hold and extra).
func (s *Store) takeAll(claim Claim, extra []Claim, hold, holdExtra string) ([]ddbtypes.TransactWriteItem, string, ddbtypes.AttributeValue, error) {
	var lc locChange
	for _, c := range append([]Claim{claim}, extra...) {
		if err := lc.Take(c); err != nil {
			return nil, "", nil, err
		}
	}
	loc, err := s.locItems(&lc)
	if err != nil || len(extra) == 0 {
		return loc, "SET " + hold, nil, err
	}
	hs := make([]Hold, len(extra))
	for i, c := range extra {
		hs[i] = c.Hold
	}
	x, err := marshalValue(hs)
	return loc, "SET " + hold + ", " + holdExtra, x, err
}

func (s *Store) setHold(ctx context.Context, pk, sk, guard string, names map[string]string, vals map[string]ddbtypes.AttributeValue, claim Claim, extra []Claim) error {
	h, err := marshalValue(claim.Hold)
	if err != nil {
		return err
	}
	loc, set, x, err := s.takeAll(claim, extra, "#h = :h", "#x = :x")
	if err != nil {
		return err
	}
	all := map[string]ddbtypes.AttributeValue{":h": h}
	maps.Copy(all, vals)
	allNames := map[string]string{"#h": "hold"}
	if x != nil {
		all[":x"], allNames["#x"] = x, "extra_holds"
	}
	maps.Copy(allNames, names)
	items := append([]ddbtypes.TransactWriteItem{{Update: &ddbtypes.Update{
		TableName: aws.String(s.table), Key: key(pk, sk),
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String(guard + " AND attribute_not_exists(#h)"),
		ExpressionAttributeNames:  allNames,
		ExpressionAttributeValues: all,
	}}}, loc...)
	return s.runLoc(ctx, items, 1)
}
