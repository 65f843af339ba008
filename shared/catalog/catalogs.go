package catalog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/objects"
	"github.com/icehold/icehold/shared/store"
)

// Lifecycle settings of a catalog (SPEC §4), validated when set.
const (
	PropSoftDeleteEnabled = "soft-delete.enabled"
	PropHoldPeriod        = "soft-delete.hold-period"
	PropPurgeOnExpiry     = "soft-delete.purge-on-expiry"
	PropDeleteScope       = "purge.delete-scope" // "table" (default) or "warehouse"
	// PropLegalHold on a table keeps it from drop with purge, and once
	// soft-deleted from expiry and purge-now, until it is cleared.
	PropLegalHold     = "icehold.legal-hold"
	DefaultHoldPeriod = "P7D"
	// PropVending says whether engines may have vended credentials
	// (X-Iceberg-Access-Delegation: vended-credentials): off (the
	// default), allowed (when they ask) or required (every table answer
	// carries them, and /v1/config tells clients so).
	PropVending = "vended-credentials"
	// PropVendingDuration is how long vended credentials live (ISO-8601 or
	// 1h style), within STS's bounds.
	PropVendingDuration    = "vended-credentials.duration"
	maxCatalogPropertyKeys = 100
	// PropVersionWindow is how long noncurrent versions engines leave
	// under a live table are kept before the storage sweep deletes them
	// (repair restores from them meanwhile); never pruned while the table
	// is legal-held or soft-deleted.
	PropVersionWindow    = "storage.version-window"
	DefaultVersionWindow = "P7D"
)

// Service is the catalog over the record store and the metadata files in S3.
type Service struct {
	store   *store.Store
	objects *objects.Store
	authz   Authorizer
	// buckets a new catalog's warehouse may lie in (none: any).
	buckets []string
	// clock stamps intents and records (nil: real time); the orphan sweep
	// judges intents by the same clock.
	clock func() time.Time
}

// New returns the catalog service.
func New(s *store.Store, o *objects.Store) *Service {
	return &Service{store: s, objects: o}
}

// Store exposes the record store to the packages built on the catalog.
func (s *Service) Store() *store.Store { return s.store }

// SetWarehouseBuckets limits new catalogs to warehouses in these buckets:
// the ones the deployment's roles may read, write and delete in (the
// stack's icehold:warehouse-buckets, the local server's bucket). None: any.
func (s *Service) SetWarehouseBuckets(buckets []string) { s.buckets = buckets }

// SetClock sets the clock intents and records are stamped with (nil: real
// time): the local server's, which its sweeps also read.
func (s *Service) SetClock(now func() time.Time) { s.clock = now }

func (s *Service) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// checkCovered refuses a warehouse in a bucket no role could use.
func (s *Service) checkCovered(warehouse string) error {
	bucket := strings.SplitN(strings.TrimPrefix(warehouse, "s3://"), "/", 2)[0]
	if len(s.buckets) == 0 || slices.Contains(s.buckets, bucket) {
		return nil
	}
	return fmt.Errorf("%w: warehouse %q lies in bucket %q, which this deployment does not cover (its roles could not read, write or delete there); covered buckets: %s",
		ErrBadRequest, warehouse, bucket, strings.Join(s.buckets, ", "))
}

// CatalogInfo is a catalog as the lifecycle API shows it.
type CatalogInfo struct {
	Name       string            `json:"name"`
	Warehouse  string            `json:"warehouse"`
	Properties map[string]string `json:"properties"`
	CreatedAt  string            `json:"created-at,omitempty"`
	CreatedBy  string            `json:"created-by,omitempty"`
}

func infoOf(c store.Catalog) CatalogInfo {
	props := c.Properties
	if props == nil {
		props = map[string]string{}
	}
	return CatalogInfo{Name: c.Name, Warehouse: c.Warehouse, Properties: props, CreatedAt: c.CreatedAt, CreatedBy: c.CreatedBy}
}

// ValidateWarehouse checks an s3://bucket[/prefix] warehouse location.
func ValidateWarehouse(w string) error {
	if !strings.HasPrefix(w, "s3://") {
		return fmt.Errorf("%w: warehouse %q must be an s3:// location", ErrBadRequest, w)
	}
	bucket := strings.SplitN(strings.TrimPrefix(w, "s3://"), "/", 2)[0]
	if !regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`).MatchString(bucket) {
		return fmt.Errorf("%w: warehouse %q does not name a valid bucket", ErrBadRequest, w)
	}
	if l, err := objects.Prefix(w); err == nil {
		if err := objects.StableKey(l.Key); err != nil {
			return fmt.Errorf("%w: warehouse %q: %v", ErrBadRequest, w, err)
		}
	}
	return nil
}

// validateCatalogProperties checks the lifecycle settings it knows (of a
// new catalog, or the updates of a change: a value stored before a check
// existed does not block changes to other keys), and writes the hold
// period in ISO-8601.
func validateCatalogProperties(props map[string]string) error {
	if err := checkPropertyCount(props); err != nil {
		return err
	}
	for _, k := range []string{PropSoftDeleteEnabled, PropPurgeOnExpiry} {
		if v, ok := props[k]; ok {
			if _, err := strconv.ParseBool(v); err != nil {
				return fmt.Errorf("%w: %s must be true or false, not %q", ErrBadRequest, k, v)
			}
		}
	}
	if v, ok := props[PropHoldPeriod]; ok {
		iso, err := NormalizeDuration(v)
		if err != nil {
			return fmt.Errorf("%s: %w", PropHoldPeriod, err)
		}
		props[PropHoldPeriod] = iso // stored as the API answers durations
	}
	if v, ok := props[PropVending]; ok && v != VendingOff && v != VendingAllowed && v != VendingRequired {
		return fmt.Errorf("%w: %s must be off, allowed or required, not %q", ErrBadRequest, PropVending, v)
	}
	if v, ok := props[PropVendingDuration]; ok {
		if _, err := VendingDuration(props); err != nil {
			return fmt.Errorf("%s %q: %w", PropVendingDuration, v, err)
		}
	}
	if v, ok := props[PropVersionWindow]; ok {
		if _, err := VersionWindow(props); err != nil {
			return fmt.Errorf("%s %q: %w", PropVersionWindow, v, err)
		}
		props[PropVersionWindow], _ = NormalizeDuration(v)
	}
	if v, ok := props[PropDeleteScope]; ok && v != "table" && v != "warehouse" {
		return fmt.Errorf("%w: %s must be table or warehouse, not %q", ErrBadRequest, PropDeleteScope, v)
	}
	return checkSweepProperties(props)
}

func checkPropertyCount(props map[string]string) error {
	return CheckRange("the number of catalog properties", int64(len(props)), 0, maxCatalogPropertyKeys)
}

// CreateCatalog creates a catalog.
func (s *Service) CreateCatalog(ctx context.Context, name, warehouse string, props map[string]string) (CatalogInfo, error) {
	if err := ValidateCatalogName(name); err != nil {
		return CatalogInfo{}, err
	}
	if name == authz.SystemCatalog {
		return CatalogInfo{}, fmt.Errorf("%w: %q is reserved", ErrBadRequest, name)
	}
	if err := ValidateWarehouse(warehouse); err != nil {
		return CatalogInfo{}, err
	}
	if err := s.checkCovered(warehouse); err != nil {
		return CatalogInfo{}, err
	}
	if err := validateCatalogProperties(props); err != nil {
		return CatalogInfo{}, err
	}
	claim, err := warehouseClaim(name, warehouse)
	if err != nil {
		return CatalogInfo{}, err
	}
	c := store.Catalog{
		Name: name, Warehouse: claim.Hold.URI(), Properties: props,
		CreatedAt: s.now().UTC().Format(time.RFC3339), CreatedBy: authz.Principal(ctx),
	}
	// Its creator manages it: the system scope's right to create catalogs
	// reaches into none of them.
	var creator *store.Grant
	if p := authz.Principal(ctx); p != "" {
		creator = &store.Grant{Principal: authz.Grantee{Principal: p}.Key(), Privileges: []string{string(authz.CatalogManage)}}
	}
	if err := s.store.CreateCatalog(ctx, c, &claim, creator, authz.Indexed); err != nil {
		switch {
		case errors.Is(err, store.ErrExists):
			return CatalogInfo{}, fmt.Errorf("create catalog %s: %w", name, ErrCatalogExists)
		case errors.Is(err, store.ErrLocationTaken):
			return CatalogInfo{}, fmt.Errorf("create catalog %s: warehouse %w", name, s.ownedBy(ctx, claim.Hold))
		}
		return CatalogInfo{}, fmt.Errorf("create catalog %s: %w", name, err)
	}
	c.Hold = &claim.Hold
	return infoOf(c), nil
}

// GetCatalog loads a catalog.
func (s *Service) GetCatalog(ctx context.Context, name string) (CatalogInfo, error) {
	c, err := s.catalog(ctx, name)
	if err != nil {
		return CatalogInfo{}, err
	}
	return infoOf(c), nil
}

func (s *Service) catalog(ctx context.Context, name string) (store.Catalog, error) {
	c, err := s.store.GetCatalog(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return c, fmt.Errorf("catalog %q: %w", name, ErrNoSuchCatalog)
	}
	return c, err
}

// UpdateCatalogProperties sets and removes catalog properties.
func (s *Service) UpdateCatalogProperties(ctx context.Context, name string, updates map[string]string, removals []string) (CatalogInfo, error) {
	if err := checkPropertyChange(updates, removals); err != nil {
		return CatalogInfo{}, err
	}
	if err := validateCatalogProperties(updates); err != nil {
		return CatalogInfo{}, err
	}
	for attempt := 0; ; attempt++ {
		c, err := s.catalog(ctx, name)
		if err != nil {
			return CatalogInfo{}, err
		}
		props := maps.Clone(c.Properties)
		if props == nil {
			props = map[string]string{}
		}
		for _, k := range removals {
			delete(props, k)
		}
		maps.Copy(props, updates)
		if err := checkPropertyCount(props); err != nil {
			return CatalogInfo{}, err
		}
		c.Properties = props
		err = s.store.UpdateCatalog(ctx, c)
		if errors.Is(err, store.ErrConditionFailed) && attempt < 5 {
			continue // a concurrent change: read again and reapply
		}
		if err != nil {
			return CatalogInfo{}, fmt.Errorf("update catalog %s: %w", name, err)
		}
		return infoOf(c), nil
	}
}

// checkLifecycleProperties refuses malformed lifecycle settings wherever
// they are set (catalog, namespace, table): a drop must never meet one.
func checkLifecycleProperties(props map[string]string) error {
	if v, ok := props[PropHoldPeriod]; ok {
		if _, err := ParseDuration(v); err != nil {
			return fmt.Errorf("%s: %w", PropHoldPeriod, err)
		}
	}
	if v, ok := props[PropLegalHold]; ok {
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%w: %s must be true or false, not %q", ErrBadRequest, PropLegalHold, v)
		}
	}
	return nil
}

// checkTableProperties checks what a table's properties decide deletions by.
func checkTableProperties(props map[string]string) error {
	if err := checkLifecycleProperties(props); err != nil {
		return err
	}
	return CheckExpiryProperties(props)
}

// expiryProperties are the table properties snapshot expiry reads, with
// Iceberg's ranges (positive). iceberg-go's Properties.GetInt64 takes a
// malformed value as the default ("30d" expired after 5 days) and a
// negative one as is ("-1" expired every snapshot but the head).
var expiryProperties = []struct {
	key string
	max int64
}{
	{table.MaxSnapshotAgeMsKey, math.MaxInt64},
	{table.MaxRefAgeMsKey, math.MaxInt64},
	{table.MinSnapshotsToKeepKey, math.MaxInt32},
}

// CheckExpiryProperties refuses a history.expire.* property snapshot expiry
// would misread: where it is set (400), and before an expiry, which then
// waits for a valid value rather than deleting by a wrong one.
func CheckExpiryProperties(props map[string]string) error {
	for _, p := range expiryProperties {
		if v, ok := props[p.key]; ok {
			if _, err := ParseRange(p.key, v, 1, p.max); err != nil {
				return err
			}
		}
	}
	return nil
}

// changedProperties are the properties a commit sets anew: a value stored
// before a check existed does not block the commits that leave it alone.
func changedProperties(base, meta table.Metadata) map[string]string {
	var old iceberg.Properties
	if base != nil {
		old = base.Properties()
	}
	return changedProps(old, meta.Properties())
}

// changedProps are the properties props sets to a value old does not have.
func changedProps(old, props map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range props {
		if ov, ok := old[k]; !ok || ov != v {
			out[k] = v
		}
	}
	return out
}

func checkPropertyChange(updates map[string]string, removals []string) error {
	if err := checkLifecycleProperties(updates); err != nil {
		return err
	}
	for _, k := range removals {
		if _, ok := updates[k]; ok {
			return fmt.Errorf("%w: property %q is both updated and removed", ErrUnprocessable, k)
		}
	}
	for k := range updates {
		if k == "" {
			return fmt.Errorf("%w: empty property key", ErrBadRequest)
		}
	}
	return nil
}

// Values of PropVending.
const (
	VendingOff      = "off"
	VendingAllowed  = "allowed"
	VendingRequired = "required"
)

// Vending is a catalog's PropVending (off when unset).
func Vending(props map[string]string) string {
	if v := props[PropVending]; v != "" {
		return v
	}
	return VendingOff
}

// MinVersionWindow: a shorter window would prune what repair needs before
// anyone ran verify.
const MinVersionWindow = time.Hour

// VersionWindow is how long a catalog keeps noncurrent versions under a
// live table (PropVersionWindow; P7D when unset): at least an hour, at
// most 100 years.
func VersionWindow(props map[string]string) (time.Duration, error) {
	v, ok := props[PropVersionWindow]
	if !ok {
		v = DefaultVersionWindow
	}
	d, err := ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < MinVersionWindow {
		return 0, fmt.Errorf("%w: %s must be at least 1 hour (repair restores from these versions), not %s", ErrOutOfRange, PropVersionWindow, v)
	}
	return d, nil
}

// VendingDuration is how long a catalog's vended credentials live: 15
// minutes (STS's least) to 1 hour (1 hour when unset): the api function
// assumes the vending role with temporary credentials, role chaining,
// which STS caps at 1 hour.
func VendingDuration(props map[string]string) (time.Duration, error) {
	v, ok := props[PropVendingDuration]
	if !ok {
		return credentials.DefaultDuration, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < credentials.MinDuration || d > credentials.MaxDuration {
		return 0, fmt.Errorf("%w: %s must be 15 minutes to 1 hour, not %s: icehold assumes the vending role with its own temporary credentials (role chaining), and STS caps such sessions at 1 hour (and issues none under 15 minutes)", ErrOutOfRange, PropVendingDuration, v)
	}
	return d, nil
}
