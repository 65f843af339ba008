package partitions

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/icehold/icehold/shared/catalog"
)

// Partition values in three forms: the JSON a client sends (Iceberg's JSON
// single-value serialization), the Go values iceberg-go reads from manifests
// (int32, iceberg.Date, iceberg.Timestamp, …), and one canonical form both
// turn into (norm) so that a tuple and a file's partition compare equal
// exactly when Iceberg would call them equal. iceberg-go has no parser of
// the single-value JSON form; this is the part we would upstream.

// norm is a partition value in canonical form: nil, bool, int64 (ints,
// dates, times, timestamps: their integer encoding), float64, string
// (strings), bytesValue (fixed, binary), uuidValue or decimalValue.
type norm = any

type (
	bytesValue   string // bytes, as a comparable string
	uuidValue    string // canonical lowercase form
	decimalValue string // unscaled value and scale, "12345e2"
)

// normalize turns a value iceberg-go read from a manifest (a partition
// value, or a partition summary bound's literal) into its canonical form.
func normalize(v any) (norm, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case iceberg.Date:
		return int64(x), nil
	case iceberg.Time:
		return int64(x), nil
	case iceberg.Timestamp:
		return int64(x), nil
	case iceberg.TimestampNano:
		return int64(x), nil
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	case string:
		return x, nil
	case []byte:
		return bytesValue(x), nil
	case [16]byte:
		return uuidValue(uuid.UUID(x).String()), nil
	case uuid.UUID:
		return uuidValue(x.String()), nil
	case iceberg.Decimal:
		return decimalValue(x.Val.BigInt().String() + "e" + strconv.Itoa(x.Scale)), nil
	case iceberg.DecimalLiteral:
		return decimalValue(x.Val.BigInt().String() + "e" + strconv.Itoa(x.Scale)), nil
	}
	return nil, fmt.Errorf("partition value of Go type %T", v)
}

// errValue: a tuple's value does not fit its field (wrapped into a 400).
var errValue = errors.New("bad partition value")

// parseValue reads one JSON single-value (Iceberg spec, Appendix D) of the
// partition field's result type into canonical form. Numbers for ints,
// longs, floats and doubles (and for the hour, month, year and bucket
// transforms, whose results are ints); strings for dates ("2026-09-15",
// the day transform's result), times, timestamps, decimals, uuids and
// strings; hex strings for fixed and binary; null for the null partition.
// Anything else, a wildcard included, is errValue.
func parseValue(raw json.RawMessage, typ iceberg.Type) (norm, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: empty value", errValue)
	}
	if string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '{', '[':
		return nil, fmt.Errorf("%w: %s is not a single value (no predicates or lists: enumerate the tuples)", errValue, raw)
	}
	switch t := typ.(type) {
	case iceberg.BooleanType:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("%w: %s is not a boolean", errValue, raw)
		}
		return b, nil
	case iceberg.Int32Type, iceberg.Int64Type:
		n, err := jsonInt(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is not an integer", errValue, raw)
		}
		if _, ok := t.(iceberg.Int32Type); ok && (n > math.MaxInt32 || n < math.MinInt32) {
			return nil, fmt.Errorf("%w: %s is out of range for int", errValue, raw)
		}
		return n, nil
	case iceberg.Float32Type, iceberg.Float64Type:
		if raw[0] == '"' {
			return nil, fmt.Errorf("%w: %s is not a number", errValue, raw)
		}
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return nil, fmt.Errorf("%w: %s is not a number", errValue, raw)
		}
		if _, ok := t.(iceberg.Float32Type); ok {
			f = float64(float32(f))
		}
		return f, nil
	}
	// Every other type is a JSON string.
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return nil, fmt.Errorf("%w: %s is not a string (a %s value is written as one)", errValue, raw, typ)
	}
	if s == "*" {
		return nil, fmt.Errorf("%w: \"*\": wildcards are not accepted, enumerate the tuples", errValue)
	}
	switch t := typ.(type) {
	case iceberg.StringType:
		return s, nil
	case iceberg.FixedType, iceberg.BinaryType:
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %q is not hex", errValue, s)
		}
		if f, ok := t.(iceberg.FixedType); ok && len(b) != f.Len() {
			return nil, fmt.Errorf("%w: %q is %d bytes, %s needs %d", errValue, s, len(b), typ, f.Len())
		}
		return bytesValue(b), nil
	case iceberg.DateType, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType, iceberg.UUIDType, iceberg.DecimalType:
		if d, ok := t.(iceberg.DecimalType); ok && !decimalForm.MatchString(s) || ok && fractionDigits(s) != d.Scale() {
			// iceberg-go would round "14.205" into decimal(9, 2): a value
			// no partition of the field can hold must not name one.
			return nil, fmt.Errorf("%w: %q is not a %s written with %d fraction digits", errValue, s, typ, d.Scale())
		}
		// iceberg-go's literal conversions parse exactly these forms.
		lit, err := iceberg.NewLiteral(s).To(typ)
		if err != nil {
			return nil, fmt.Errorf("%w: %q is not a %s", errValue, s, typ)
		}
		return normalize(lit.Any())
	}
	return nil, fmt.Errorf("%w: partitions of type %s cannot be named in a drop", errValue, typ)
}

var decimalForm = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)

func fractionDigits(s string) int {
	if _, frac, ok := strings.Cut(s, "."); ok {
		return len(frac)
	}
	return 0
}

// jsonInt reads a JSON integer (no fraction, no exponent, no quotes).
func jsonInt(raw json.RawMessage) (int64, error) {
	return strconv.ParseInt(string(raw), 10, 64)
}

// formatValue writes a canonical value back in the JSON single-value form
// (what the answer echoes for each tuple).
func formatValue(v norm, typ iceberg.Type) any {
	switch x := v.(type) {
	case nil, bool, float64, string:
		return x
	case bytesValue:
		return hex.EncodeToString([]byte(x))
	case uuidValue:
		return string(x)
	case decimalValue:
		digits, exp, _ := strings.Cut(string(x), "e")
		scale, _ := strconv.Atoi(exp)
		return decimalString(digits, scale)
	case int64:
		switch typ.(type) {
		case iceberg.DateType:
			return time.Unix(x*86400, 0).UTC().Format("2006-01-02")
		case iceberg.TimeType:
			return time.UnixMicro(x).UTC().Format("15:04:05.999999")
		case iceberg.TimestampType:
			return time.UnixMicro(x).UTC().Format("2006-01-02T15:04:05.999999")
		case iceberg.TimestampTzType:
			return time.UnixMicro(x).UTC().Format("2006-01-02T15:04:05.999999") + "+00:00"
		case iceberg.TimestampNsType:
			return time.Unix(0, x).UTC().Format("2006-01-02T15:04:05.999999999")
		case iceberg.TimestampTzNsType:
			return time.Unix(0, x).UTC().Format("2006-01-02T15:04:05.999999999") + "+00:00"
		}
		return x
	}
	return fmt.Sprint(v)
}

func decimalString(digits string, scale int) string {
	neg := strings.HasPrefix(digits, "-")
	digits = strings.TrimPrefix(digits, "-")
	if scale > 0 {
		for len(digits) <= scale {
			digits = "0" + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// compare orders two canonical values of one type; ok is false where the
// order is not known here (decimals, mixed kinds): the caller then
// assumes a match is possible.
func compare(a, b norm) (c int, ok bool) {
	switch x := a.(type) {
	case int64:
		if y, is := b.(int64); is {
			return cmp.Compare(x, y), true
		}
	case float64:
		if y, is := b.(float64); is && !math.IsNaN(x) && !math.IsNaN(y) {
			return cmp.Compare(x, y), true
		}
	case string:
		if y, is := b.(string); is {
			return strings.Compare(x, y), true
		}
	case bytesValue:
		if y, is := b.(bytesValue); is {
			return strings.Compare(string(x), string(y)), true
		}
	case uuidValue:
		if y, is := b.(uuidValue); is {
			return strings.Compare(string(x), string(y)), true
		}
	case bool:
		if y, is := b.(bool); is {
			switch {
			case x == y:
				return 0, true
			case !x:
				return -1, true
			}
			return 1, true
		}
	}
	return 0, false
}

// tupleKey is a tuple's canonical values as one comparable key, in the
// spec's field order.
func tupleKey(values []norm) string {
	var b strings.Builder
	for i, v := range values {
		if i > 0 {
			b.WriteByte(0)
		}
		switch x := v.(type) {
		case nil:
			b.WriteString("n")
		case bool:
			b.WriteString("b" + strconv.FormatBool(x))
		case int64:
			b.WriteString("i" + strconv.FormatInt(x, 10))
		case float64:
			b.WriteString("f" + strconv.FormatFloat(x, 'g', -1, 64))
		case string:
			b.WriteString("s" + strconv.Quote(x))
		case bytesValue:
			b.WriteString("x" + hex.EncodeToString([]byte(x)))
		case uuidValue:
			b.WriteString("u" + string(x))
		case decimalValue:
			b.WriteString("d" + string(x))
		default:
			fmt.Fprintf(&b, "?%T:%v", v, v)
		}
	}
	return b.String()
}

// badRequest wraps a tuple problem as the catalog's 400.
func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", catalog.ErrBadRequest, fmt.Sprintf(format, args...))
}
