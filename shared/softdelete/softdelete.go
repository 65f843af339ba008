// Package softdelete is the recoverable drop (SPEC §4): a drop on a catalog
// with soft-delete.enabled moves the table into a soft-deleted record for
// its hold period (the name is free at once, no file is touched); it can be
// undropped, purged now, held for legal reasons, and expires into the purge
// pipeline on the hold-expiry schedule.
package softdelete

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/eventbus"
	"github.com/icehold/icehold/shared/outbox"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/store"
)

// Domain errors (the router maps them).
var (
	// ErrNotEnabled: the catalog does not soft-delete; a drop is a hard drop.
	ErrNotEnabled = errors.New("soft delete is not enabled on this catalog")
	// ErrNoRecord: no soft-deleted table matches.
	ErrNoRecord = errors.New("no such soft-deleted table")
	// ErrAmbiguous: several soft-deleted generations match (of one name
	// without a uuid, of one uuid without a generation).
	ErrAmbiguous = errors.New("several soft-deleted generations match")
	// ErrNameTaken: an undrop's target name is held by a table.
	ErrNameTaken = errors.New("the name is taken")
	// ErrLegalHold: the table is under legal hold.
	ErrLegalHold = errors.New("table is under legal hold")
	// ErrBadHoldPeriod: the hold period a drop would apply, stored before
	// values were checked, is malformed; the drop waits for a valid one.
	ErrBadHoldPeriod = errors.New("malformed hold period")
)

// Conflict is a 409 with structure: the table holding a name, or the
// generations to choose from. The router adds Details to the ErrorModel.
type Conflict struct {
	err     error
	msg     string
	details map[string]any
}

func (c *Conflict) Error() string                     { return c.msg }
func (c *Conflict) Unwrap() error                     { return c.err }
func (c *Conflict) Details() (string, map[string]any) { return "conflict", c.details }

// Service runs the soft-delete operations.
type Service struct {
	Catalog *catalog.Service
	// Purge starts the jobs of permanent deletes (nil: no function here
	// starts executions; reconcile does).
	Purge *purge.Service
	// Now is the clock (tests set it); nil: time.Now.
	Now func() time.Time
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) store() *store.Store { return s.Catalog.Store() }

// View is a soft-deleted table or view on the wire (SPEC §7): a view's
// row has kind "view" and its uuid in view-uuid.
type View struct {
	Kind             string   `json:"kind"`
	Namespace        []string `json:"namespace"`
	Name             string   `json:"name"`
	TableUUID        string   `json:"table-uuid,omitempty"`
	ViewUUID         string   `json:"view-uuid,omitempty"`
	MetadataLocation string   `json:"metadata-location"`
	DroppedAt        string   `json:"dropped-at"`
	DroppedBy        string   `json:"dropped-by"`
	PurgeAt          string   `json:"purge-at"`
	HoldPeriod       string   `json:"hold-period"`
	PurgeOnExpiry    bool     `json:"purge-on-expiry"`
	LegalHold        bool     `json:"legal-hold"`
	// Generation tells apart soft drops of one table uuid ("" for a
	// record from before generations).
	Generation string `json:"generation"`
}

// ViewOf renders a record.
func ViewOf(r store.SoftDeleted) View {
	v := View{
		Kind: kindOf(r.Entry), Namespace: r.Entry.Namespace, Name: r.Entry.Name, TableUUID: r.Entry.TableUUID, MetadataLocation: r.Entry.MetadataLocation,
		DroppedAt: store.Seconds(r.DroppedAt), DroppedBy: r.DroppedBy, PurgeAt: store.Seconds(r.PurgeAt), HoldPeriod: r.HoldPeriod,
		PurgeOnExpiry: r.PurgeOnExpiry, LegalHold: r.LegalHold, Generation: r.Generation,
	}
	if r.Entry.IsView() {
		v.TableUUID, v.ViewUUID = "", r.Entry.TableUUID
	}
	return v
}

// The kinds of soft-deleted objects (View.Kind, the listing's filter).
const (
	KindTable = "table"
	KindView  = "view"
)

func kindOf(e store.TableEntry) string {
	if e.IsView() {
		return KindView
	}
	return KindTable
}

// Pick names the generation an operation means: by table (or view) uuid,
// by generation, both, or neither (then it must be the only one); View:
// the operation is on a view's records (the undrop and purge-now routes
// of views), else on a table's.
type Pick struct {
	TableUUID  string
	Generation string
	View       bool
}

// what names a pick's kind in messages.
func (p Pick) what() string {
	if p.View {
		return "view"
	}
	return "table"
}

// errChanged: a record changed between every read and write of a
// transition (a lost compare-and-swap: 409, try again).
var errChanged = fmt.Errorf("%w: the soft-deleted table changed meanwhile", catalog.ErrCommitFailed)

// attempts bounds the retries of a transition whose record changed between
// its read and its write (a legal hold set meanwhile): it reads again.
const attempts = 3

// Enabled reports whether a catalog soft-deletes.
func (s *Service) Enabled(ctx context.Context, cat string) (bool, error) {
	c, err := s.Catalog.GetCatalog(ctx, cat)
	if err != nil {
		return false, err
	}
	on, _ := strconv.ParseBool(c.Properties[catalog.PropSoftDeleteEnabled])
	return on, nil
}

// holdFor decides the hold period: the table's property over its
// namespace's over the catalog's, P7D by default (SPEC §4), fixed on the
// record at drop time. Values are checked where they are set; one stored
// before that never shortens the hold: out of range (it once wrapped to
// seconds) holds for the bound, malformed refuses the drop (falling back to
// the next level could hold for days instead of the years meant).
func (s *Service) holdFor(ctx context.Context, cat string, e store.TableEntry) (string, time.Duration, error) {
	c, err := s.Catalog.GetCatalog(ctx, cat)
	if err != nil {
		return "", 0, err
	}
	type level struct{ name, value string }
	levels := []level{{"table", e.HoldPeriod}}
	if ns, err := s.Catalog.LoadNamespace(ctx, cat, e.Namespace); err == nil {
		levels = append(levels, level{"namespace", ns.Properties[catalog.PropHoldPeriod]})
	}
	levels = append(levels, level{"catalog", c.Properties[catalog.PropHoldPeriod]}, level{"default", catalog.DefaultHoldPeriod})
	for _, l := range levels {
		if l.value == "" {
			continue
		}
		d, err := catalog.ParseDuration(l.value)
		switch {
		case errors.Is(err, catalog.ErrOutOfRange):
			slog.Warn("a stored hold period is out of range: holding for the bound", "level", l.name, "value", l.value, "bound", catalog.MaxDurationISO)
			return catalog.MaxDurationISO, catalog.MaxDuration, nil
		case err != nil:
			return "", 0, fmt.Errorf("%w: the %s's %s %q is not a duration: set a valid one (like P7D or 12h, at most 100 years) before dropping",
				ErrBadHoldPeriod, l.name, catalog.PropHoldPeriod, l.value)
		}
		return l.value, d, nil
	}
	return catalog.DefaultHoldPeriod, 7 * 24 * time.Hour, nil
}

// Drop soft-deletes a table: one transaction moves its entry into a record
// (guarded by the entry's metadata pointer); the name is free at once; no
// object is touched; the location stays owned by the record.
func (s *Service) Drop(ctx context.Context, cat string, id catalog.Ident) (store.SoftDeleted, error) {
	return s.drop(ctx, cat, id, false)
}

// DropView soft-deletes a view, as Drop a table.
func (s *Service) DropView(ctx context.Context, cat string, id catalog.Ident) (store.SoftDeleted, error) {
	return s.drop(ctx, cat, id, true)
}

func (s *Service) drop(ctx context.Context, cat string, id catalog.Ident, view bool) (store.SoftDeleted, error) {
	entry, typ, missing := s.Catalog.Entry, eventbus.TableSoftDeleted, catalog.ErrNoSuchTable
	if view {
		entry, typ, missing = s.Catalog.ViewEntry, eventbus.ViewSoftDeleted, catalog.ErrNoSuchView
	}
	on, err := s.Enabled(ctx, cat)
	if err != nil {
		return store.SoftDeleted{}, err
	}
	if !on {
		return store.SoftDeleted{}, ErrNotEnabled
	}
	c, _ := s.Catalog.GetCatalog(ctx, cat)
	purgeOnExpiry := true
	if v, ok := c.Properties[catalog.PropPurgeOnExpiry]; ok {
		purgeOnExpiry, _ = strconv.ParseBool(v)
	}
	for attempt := 0; ; attempt++ {
		e, err := entry(ctx, cat, id)
		if err != nil {
			return store.SoftDeleted{}, err
		}
		period, hold, err := s.holdFor(ctx, cat, e)
		if err != nil {
			return store.SoftDeleted{}, err
		}
		at := s.now().UTC()
		r := store.SoftDeleted{
			DroppedAt: at.Format(time.RFC3339), DroppedBy: authz.Principal(ctx),
			PurgeAt: store.ExpiryTime(at.Add(hold)), HoldPeriod: period, PurgeOnExpiry: purgeOnExpiry,
			LegalHold:  e.LegalHold,
			Properties: map[string]string{catalog.PropLegalHold: strconv.FormatBool(e.LegalHold)},
			Generation: store.NewGeneration(), Version: 1,
		}
		if e.HoldPeriod != "" {
			r.Properties[catalog.PropHoldPeriod] = e.HoldPeriod
		}
		r.Catalog, r.Entry = cat, e
		ev := s.event(ctx, typ, r, map[string]any{"purge-at": r.PurgeAt, "hold-period": period, "legal-hold": r.LegalHold})
		err = s.store().SoftDelete(ctx, cat, e, r, outbox.Record(ev))
		if errors.Is(err, store.ErrNotFound) && attempt < 5 {
			continue // a commit moved the pointer: drop what is there now
		}
		if errors.Is(err, store.ErrNotFound) {
			return store.SoftDeleted{}, fmt.Errorf("drop %s: %w", id, missing)
		}
		if err != nil {
			return store.SoftDeleted{}, fmt.Errorf("drop %s: %w", id, err)
		}
		return r, nil
	}
}

// choose picks the generation of a name an operation means: the one
// matching p, or the only one (several: a 409 listing them).
func (s *Service) choose(ctx context.Context, cat string, id catalog.Ident, p Pick) (store.SoftDeleted, error) {
	if err := id.Validate(); err != nil {
		return store.SoftDeleted{}, err
	}
	gens, err := s.store().SoftDeletedByName(ctx, cat, id.Namespace, id.Name)
	if err != nil {
		return store.SoftDeleted{}, err
	}
	// A name may have soft-deleted tables and views: the route says which.
	gens = slices.DeleteFunc(gens, func(r store.SoftDeleted) bool { return r.Entry.IsView() != p.View })
	return pick(gens, p, "soft-deleted "+p.what()+" "+id.String())
}

// pick keeps the generations matching p: exactly one, or an error saying
// what to name (a 409 listing them when several match).
func pick(gens []store.SoftDeleted, p Pick, what string) (store.SoftDeleted, error) {
	gens = slices.DeleteFunc(gens, func(r store.SoftDeleted) bool {
		return (p.TableUUID != "" && r.Entry.TableUUID != p.TableUUID) || (p.Generation != "" && r.Generation != p.Generation)
	})
	if p.TableUUID != "" {
		what += " with uuid " + p.TableUUID
	}
	if p.Generation != "" {
		what += " of generation " + p.Generation
	}
	switch {
	case len(gens) == 0:
		return store.SoftDeleted{}, fmt.Errorf("%s: %w", what, ErrNoRecord)
	case len(gens) > 1:
		var list []map[string]any
		var names []string
		uuids := map[string]bool{}
		for _, g := range gens {
			list = append(list, map[string]any{uuidKey(g.Entry): g.Entry.TableUUID, "generation": g.Generation, "dropped-at": g.DroppedAt,
				"metadata-location": g.Entry.MetadataLocation, "namespace": g.Entry.Namespace, "name": g.Entry.Name})
			names = append(names, g.Entry.TableUUID+" generation "+g.Generation+" (dropped "+g.DroppedAt+")")
			uuids[g.Entry.TableUUID] = true
		}
		by := uuidKey(gens[0].Entry)
		if len(uuids) == 1 {
			by = "generation"
		}
		return store.SoftDeleted{}, &Conflict{err: ErrAmbiguous,
			msg:     fmt.Sprintf("%d soft-deleted generations of %s: name one with %s: %s", len(gens), what, by, strings.Join(names, ", ")),
			details: map[string]any{"generations": list}}
	}
	return gens[0], nil
}

// uuidKey is the wire name of an entry's uuid.
func uuidKey(e store.TableEntry) string {
	if e.IsView() {
		return "view-uuid"
	}
	return "table-uuid"
}

// Undrop restores a soft-deleted table (under its name, or renameTo),
// atomically: same uuid, same metadata location, its location claim back.
func (s *Service) Undrop(ctx context.Context, cat string, id catalog.Ident, p Pick, renameTo *catalog.Ident) (store.TableEntry, error) {
	to := id
	if renameTo != nil {
		if err := renameTo.Validate(); err != nil {
			return store.TableEntry{}, err
		}
		to = *renameTo
	}
	for attempt := 1; ; attempt++ {
		r, err := s.choose(ctx, cat, id, p)
		if err != nil {
			return store.TableEntry{}, err
		}
		if r.LegalHold && !r.Entry.LegalHold {
			// The restored table's hold is its metadata's property: a hold
			// set on the record after the drop would be lifted by the undrop.
			return store.TableEntry{}, fmt.Errorf("undrop %s: %w set on the soft-deleted %s after its drop, not in its metadata (an undrop would lift it): "+
				"clear it (TABLE_LEGAL_HOLD), undrop, then set %s on the %[3]s", id, ErrLegalHold, p.what(), catalog.PropLegalHold)
		}
		e, err := s.undrop(ctx, r, id, to)
		if errors.Is(err, errChanged) && attempt < attempts {
			continue // the record changed since it was read: read it again
		}
		return e, err
	}
}

func (s *Service) undrop(ctx context.Context, r store.SoftDeleted, id, to catalog.Ident) (store.TableEntry, error) {
	cat := r.Catalog
	e := r.Entry
	e.Namespace, e.Name = to.Namespace, to.Name
	moved := r
	moved.Entry = e
	typ := eventbus.TableUndropped
	if e.IsView() {
		typ = eventbus.ViewUndropped
	}
	ev := s.event(ctx, typ, moved, map[string]any{"from": map[string]any{"namespace": id.Namespace, "name": id.Name}})
	nsMissing, err := s.store().Undrop(ctx, r, e, outbox.Record(ev))
	switch {
	case nsMissing:
		return store.TableEntry{}, fmt.Errorf("undrop %s: namespace %s does not exist (recreate it, or undrop with rename-to): %w",
			id, strings.Join(to.Namespace, "."), catalog.ErrNoSuchNamespace)
	case errors.Is(err, store.ErrExists):
		// The holder may be a table or a view: one name space.
		holder, _ := s.store().GetEntry(ctx, cat, to.Namespace, to.Name)
		return store.TableEntry{}, &Conflict{err: ErrNameTaken,
			msg: fmt.Sprintf("undrop %s: %s %s holds the name (%s %s, created %s by %s); undrop with rename-to",
				id, kindOf(holder), to, uuidKey(holder), holder.TableUUID, holder.CreatedAt, holder.CreatedBy),
			details: map[string]any{"holder": map[string]any{"kind": kindOf(holder), "namespace": to.Namespace, "name": to.Name,
				uuidKey(holder): holder.TableUUID, "metadata-location": holder.MetadataLocation}}}
	case errors.Is(err, store.ErrTombstoned):
		return store.TableEntry{}, fmt.Errorf("undrop %s: a purge job holds the name %s: %w", id, to, catalog.ErrPurging)
	case errors.Is(err, store.ErrConditionFailed):
		return store.TableEntry{}, fmt.Errorf("undrop %s: %w", id, errChanged)
	case err != nil:
		return store.TableEntry{}, fmt.Errorf("undrop %s: %w", id, err)
	}
	return e, nil
}

// PurgeNow permanently deletes a soft-deleted table, skipping its hold: the
// record goes and a purge job (no tombstone: the name is free) takes its
// files, in one transaction.
func (s *Service) PurgeNow(ctx context.Context, cat string, id catalog.Ident, p Pick) (store.Job, error) {
	for attempt := 1; ; attempt++ {
		r, err := s.choose(ctx, cat, id, p)
		if err != nil {
			return store.Job{}, err
		}
		if r.LegalHold {
			return store.Job{}, fmt.Errorf("purge-now %s: %w: clear it first", id, ErrLegalHold)
		}
		switch held, err := s.Catalog.Held(ctx, cat, r.Entry.Namespace, false); {
		case err != nil:
			return store.Job{}, fmt.Errorf("purge-now %s: %w", id, err)
		case held:
			return store.Job{}, fmt.Errorf("purge-now %s: %w: %s is set on one of its namespaces or its catalog", id, ErrLegalHold, catalog.PropLegalHold)
		}
		j, err := s.permanentlyDelete(ctx, r, true)
		switch {
		case errors.Is(err, store.ErrLegalHold):
			return store.Job{}, fmt.Errorf("purge-now %s: %w", id, ErrLegalHold)
		case errors.Is(err, store.ErrConditionFailed) && attempt < attempts:
			continue // the record changed since it was read: read it again
		case errors.Is(err, store.ErrConditionFailed):
			return store.Job{}, fmt.Errorf("purge-now %s: %w", id, errChanged)
		}
		return j, err
	}
}

// permanentlyDelete ends a record: with purge, a job takes the files.
func (s *Service) permanentlyDelete(ctx context.Context, r store.SoftDeleted, withPurge bool) (store.Job, error) {
	var job *store.Job
	if withPurge {
		j := store.Job{
			ID: purge.NewJobID(), Catalog: r.Catalog, Namespace: r.Entry.Namespace, Table: r.Entry.Name, TableUUID: r.Entry.TableUUID,
			MetadataLocation: r.Entry.MetadataLocation, State: store.JobPending, Attempts: 1, CreatedBy: authz.Principal(ctx),
		}
		if r.Entry.IsView() {
			j.Kind = store.KindView // its metadata files: the pipeline lists its location
		}
		j.CreatedBy = cmp.Or(j.CreatedBy, expiryActor)
		j.Execution = j.ID
		job = &j
	}
	detail := map[string]any{"purge": withPurge}
	if job != nil {
		detail["job-id"] = job.ID
	}
	typ := eventbus.TablePermanentlyDeleted
	if r.Entry.IsView() {
		typ = eventbus.ViewPermanentlyDeleted
	}
	events := []eventbus.Event{s.event(ctx, typ, r, detail)}
	if job != nil {
		events = append(events, purge.JobEvent(eventbus.PurgeStarted, *job, nil))
	}
	if err := s.store().PermanentlyDelete(ctx, r, job, outbox.Records(events...)...); err != nil {
		return store.Job{}, err
	}
	if job == nil {
		return store.Job{}, nil
	}
	if s.Purge != nil {
		s.Purge.Started(ctx, *job)
	}
	return *job, nil
}

// SetLegalHold sets or clears the legal hold of a soft-deleted record: the
// generation of the uuid (gen, or the only one).
func (s *Service) SetLegalHold(ctx context.Context, cat, uuid, gen string, on bool) (store.SoftDeleted, error) {
	for attempt := 1; ; attempt++ {
		gens, err := s.store().SoftDeletedByUUID(ctx, cat, uuid)
		if err != nil {
			return store.SoftDeleted{}, err
		}
		r, err := pick(gens, Pick{TableUUID: uuid, Generation: gen}, "soft-deleted table or view")
		if err != nil || r.LegalHold == on {
			return r, err
		}
		ev := s.event(ctx, eventbus.LegalHoldChanged, r, map[string]any{"legal-hold": on})
		held, err := s.store().SetLegalHold(ctx, r, on, outbox.Record(ev))
		switch {
		case errors.Is(err, store.ErrConditionFailed) && attempt < attempts:
			continue // the record changed since it was read: read it again
		case errors.Is(err, store.ErrConditionFailed):
			return r, fmt.Errorf("legal hold of soft-deleted %s %s: %w", kindOf(r.Entry), uuid, errChanged)
		}
		return held, err
	}
}

// List pages through a catalog's soft-deleted tables and views (of one
// kind when kind is KindTable or KindView: a page may then be short).
func (s *Service) List(ctx context.Context, cat string, ns []string, kind, token string, limit int) ([]View, string, error) {
	if kind != "" && kind != KindTable && kind != KindView {
		return nil, "", fmt.Errorf("%w: kind must be %s or %s", catalog.ErrBadRequest, KindTable, KindView)
	}
	recs, next, err := s.store().ListSoftDeleted(ctx, cat, ns, token, limit)
	if errors.Is(err, store.ErrBadPageToken) {
		return nil, "", fmt.Errorf("%w: %v", catalog.ErrBadRequest, err)
	}
	if err != nil {
		return nil, "", err
	}
	out := make([]View, 0, len(recs))
	for _, r := range recs {
		if kind == "" || kindOf(r.Entry) == kind {
			out = append(out, ViewOf(r))
		}
	}
	return out, next, nil
}

// expiryActor is who acts in the hold-expiry sweep (no caller).
const expiryActor = "icehold:hold-expiry"

// event is a record's lifecycle event, recorded in the outbox by the
// transaction that makes the change it reports.
func (s *Service) event(ctx context.Context, typ string, r store.SoftDeleted, detail map[string]any) eventbus.Event {
	if r.Entry.IsView() {
		detail["kind"] = KindView
	}
	return eventbus.Event{
		Type: typ, Actor: cmp.Or(authz.Principal(ctx), expiryActor), Catalog: r.Catalog, Namespace: r.Entry.Namespace, Table: r.Entry.Name,
		TableUUID: r.Entry.TableUUID, Detail: detail,
	}
}
