package partitions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/store"
)

// Partition retention (SPEC §5): a table's policy names a partition field
// with a time transform (hour, day, month, year) or an identity field of a
// date or timestamp type, and how long to keep. The sweep drops the
// partitions whose whole time range ends at or before the cutoff (now minus
// keep, rounded down to the field's unit), through Drop.

// ErrNoRetention: the table has no retention policy.
var ErrNoRetention = errors.New("no retention policy")

// Summary properties of a retention drop.
const (
	PropRetentionCutoff = "icehold.retention-cutoff"
	// PropIdempotencyKey is the sweep's key, derived from the table uuid and
	// the cutoff: a sweep that finds it on the current snapshot (and the
	// drop complete) has nothing to do.
	PropIdempotencyKey = "icehold.idempotency-key"
	propComplete       = "icehold.retention-complete"
)

// RetentionPolicy is a policy as the API shows it (SPEC §7).
type RetentionPolicy struct {
	Field         string `json:"field"`
	Keep          string `json:"keep"`
	TableUUID     string `json:"table-uuid"`
	CreatedAt     string `json:"created-at,omitempty"`
	CreatedBy     string `json:"created-by,omitempty"`
	AppliedCutoff string `json:"applied-cutoff,omitempty"`
	AppliedAt     string `json:"applied-at,omitempty"`
}

func policyOf(r store.Retention) RetentionPolicy {
	return RetentionPolicy{Field: r.Field, Keep: r.Keep, TableUUID: r.TableUUID, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy,
		AppliedCutoff: r.AppliedCutoff, AppliedAt: r.AppliedAt}
}

// timeUnit is how a retention field's values map to time ranges.
type timeUnit int

const (
	unitHour timeUnit = iota + 1
	unitDay
	unitMonth
	unitYear
	unitMicros // identity timestamp(tz): one instant
	unitNanos  // identity timestamp_ns(tz)
)

// timeField is a retention field resolved against the table's spec.
type timeField struct {
	field
	pos  int // position in the spec
	unit timeUnit
}

// resolveTimeField finds the policy's field in the spec and checks that
// its values are times: a 400 otherwise.
func resolveTimeField(meta table.Metadata, spec iceberg.PartitionSpec, name string) (timeField, error) {
	fields := specFields(meta, spec)
	for i, f := range fields {
		if f.name != name {
			continue
		}
		pf := spec.Field(i)
		tf := timeField{field: f, pos: i}
		switch pf.Transform.(type) {
		case iceberg.HourTransform:
			tf.unit = unitHour
		case iceberg.DayTransform:
			tf.unit = unitDay
		case iceberg.MonthTransform:
			tf.unit = unitMonth
		case iceberg.YearTransform:
			tf.unit = unitYear
		case iceberg.IdentityTransform:
			switch f.typ.(type) {
			case iceberg.DateType:
				tf.unit = unitDay
			case iceberg.TimestampType, iceberg.TimestampTzType:
				tf.unit = unitMicros
			case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
				tf.unit = unitNanos
			}
		}
		if tf.unit == 0 {
			return tf, badRequest("partition field %q (%s of %s) is not a time: retention needs an hour, day, month or year transform, or an identity date or timestamp field", name, pf.Transform, f.typ)
		}
		return tf, nil
	}
	return timeField{}, badRequest("%q is not a partition field of the table's current spec (fields: %s)", name, fieldNames(fields))
}

// end is the exclusive end of the time range of a partition value.
func (f timeField) end(v norm) (time.Time, bool) {
	n, ok := v.(int64)
	if !ok {
		return time.Time{}, false
	}
	switch f.unit {
	case unitHour:
		return time.Unix((n+1)*3600, 0).UTC(), true
	case unitDay:
		return time.Unix((n+1)*86400, 0).UTC(), true
	case unitMonth:
		return time.Date(1970, time.Month(1+n+1), 1, 0, 0, 0, 0, time.UTC), true
	case unitYear:
		return time.Date(int(1970+n+1), 1, 1, 0, 0, 0, 0, time.UTC), true
	case unitMicros:
		return time.UnixMicro(n + 1).UTC(), true
	case unitNanos:
		return time.Unix(0, n+1).UTC(), true
	}
	return time.Time{}, false
}

// cutoff rounds now minus keep down to the field's unit, so that the
// expired set (and the sweep's key) changes once per unit.
func (f timeField) cutoff(now time.Time, keep time.Duration) time.Time {
	c := now.Add(-keep).UTC()
	switch f.unit {
	case unitHour:
		return c.Truncate(time.Hour)
	case unitDay:
		return time.Date(c.Year(), c.Month(), c.Day(), 0, 0, 0, 0, time.UTC)
	case unitMonth:
		return time.Date(c.Year(), c.Month(), 1, 0, 0, 0, 0, time.UTC)
	case unitYear:
		return time.Date(c.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return c.Truncate(time.Second)
}

// expired: every row of the partition is older than the cutoff.
func (f timeField) expired(v norm, cutoff time.Time) bool {
	e, ok := f.end(v)
	return ok && !e.After(cutoff)
}

// parseKeep reads a retention's keep (ISO-8601, or 7d).
func parseKeep(keep string) (time.Duration, error) {
	d, err := catalog.ParseDuration(keep)
	if err != nil {
		return 0, fmt.Errorf("keep: %w", err)
	}
	if d <= 0 {
		return 0, badRequest("keep %q must be longer than zero", keep)
	}
	return d, nil
}

// SetRetention sets a table's policy (SPEC §7: {"field", "keep"}).
func (s *Service) SetRetention(ctx context.Context, cat string, id catalog.Ident, fieldName, keep string) (RetentionPolicy, error) {
	d, err := parseKeep(keep)
	if err != nil {
		return RetentionPolicy{}, err
	}
	keep = catalog.FormatDuration(d) // 7d is stored, and answered, as P7D
	entry, err := s.Catalog.Entry(ctx, cat, id)
	if err != nil {
		return RetentionPolicy{}, err
	}
	meta, err := s.Catalog.ReadMetadata(ctx, entry.MetadataLocation)
	if err != nil {
		return RetentionPolicy{}, fmt.Errorf("retention of %s: %w", id, err)
	}
	if _, err := resolveTimeField(meta, meta.PartitionSpec(), fieldName); err != nil {
		return RetentionPolicy{}, err
	}
	r := store.Retention{
		Catalog: cat, Namespace: id.Namespace, Name: id.Name, TableUUID: meta.TableUUID().String(),
		Field: fieldName, Keep: keep, CreatedAt: s.now().UTC().Format(time.RFC3339), CreatedBy: authz.Principal(ctx),
	}
	if err := s.Catalog.Store().PutRetention(ctx, r); err != nil {
		return RetentionPolicy{}, err
	}
	return policyOf(r), nil
}

// GetRetention answers a table's policy.
func (s *Service) GetRetention(ctx context.Context, cat string, id catalog.Ident) (RetentionPolicy, error) {
	if _, err := s.Catalog.Entry(ctx, cat, id); err != nil {
		return RetentionPolicy{}, err
	}
	r, err := s.Catalog.Store().GetRetention(ctx, cat, id.Namespace, id.Name)
	if errors.Is(err, store.ErrNotFound) {
		return RetentionPolicy{}, fmt.Errorf("%w: table %s", ErrNoRetention, id)
	}
	return policyOf(r), err
}

// ClearRetention removes a table's policy; files already dropped stay so.
func (s *Service) ClearRetention(ctx context.Context, cat string, id catalog.Ident) error {
	if err := id.Validate(); err != nil {
		return err
	}
	err := s.Catalog.Store().DeleteRetention(ctx, cat, id.Namespace, id.Name)
	if errors.Is(err, store.ErrNotFound) {
		if _, e := s.Catalog.Entry(ctx, cat, id); e != nil {
			return e
		}
		return fmt.Errorf("%w: table %s", ErrNoRetention, id)
	}
	return err
}
