package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Bounded input, strict bodies (SPEC §2): every duration and number a user
// sends is range-checked here, and every lifecycle API body is decoded by
// DecodeStrict.

// ErrOutOfRange: a duration or number beyond its bound (a 400).
var ErrOutOfRange = fmt.Errorf("%w: out of range", ErrBadRequest)

// MaxDuration bounds every duration a user sets (hold periods, retention
// keep): 100 years of 365 days, far below time.Duration's 292 years.
const MaxDuration = 36500 * 24 * time.Hour

// MaxDurationISO is MaxDuration as the bound a stored out-of-range hold
// period is taken as.
const MaxDurationISO = "P36500D"

var (
	shortDuration = regexp.MustCompile(`^(\d+)([dhm])$`)
	isoDuration   = regexp.MustCompile(`^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$`)
	shortUnits    = map[string]time.Duration{"d": 24 * time.Hour, "h": time.Hour, "m": time.Minute}
	isoUnits      = []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second}
)

// ParseDuration parses an ISO-8601 duration of weeks, days, hours, minutes and
// seconds (P7D, PT12H, P1DT6H), or the short form 7d, 12h, 30m. A duration
// longer than MaxDuration (or whose digits overflow) is ErrOutOfRange, never
// a wrapped value.
func ParseDuration(s string) (time.Duration, error) {
	var digits []string
	var units []time.Duration
	if m := shortDuration.FindStringSubmatch(s); m != nil {
		digits, units = m[1:2], []time.Duration{shortUnits[m[2]]}
	} else if m := isoDuration.FindStringSubmatch(s); m != nil && s != "P" && !strings.HasSuffix(s, "T") {
		digits, units = m[1:], isoUnits
	} else {
		return 0, fmt.Errorf("%w: %q is not an ISO-8601 duration like P7D or PT12H (or 7d, 12h, 30m)", ErrBadRequest, s)
	}
	var d time.Duration
	for i, v := range digits {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil || n > uint64(MaxDuration/units[i]) {
			return 0, errTooLong(s)
		}
		// Each term and the sum so far are at most MaxDuration: no overflow.
		if d += time.Duration(n) * units[i]; d > MaxDuration {
			return 0, errTooLong(s)
		}
	}
	return d, nil
}

// FormatDuration writes d in ISO-8601, the form the API stores and answers:
// days, then hours, minutes and seconds (P7D, PT12H, P1DT6H; PT0S).
func FormatDuration(d time.Duration) string {
	out := "P"
	if days := d / (24 * time.Hour); days > 0 {
		out += strconv.FormatInt(int64(days), 10) + "D"
		d -= days * 24 * time.Hour
	}
	if d == 0 && out != "P" {
		return out
	}
	out += "T"
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "H"}, {time.Minute, "M"}, {time.Second, "S"}} {
		if n := d / u.unit; n > 0 {
			out += strconv.FormatInt(int64(n), 10) + u.name
			d -= n * u.unit
		}
	}
	if out == "PT" {
		return "PT0S"
	}
	return out
}

// NormalizeDuration parses a duration (ParseDuration's forms) and writes it
// in ISO-8601: 7d is stored as P7D.
func NormalizeDuration(s string) (string, error) {
	d, err := ParseDuration(s)
	if err != nil {
		return "", err
	}
	return FormatDuration(d), nil
}

func errTooLong(s string) error {
	return fmt.Errorf("%w: duration %q is longer than 100 years (the bound: 36500d, P36500D)", ErrOutOfRange, s)
}

// CheckRange refuses a number a user sent outside lo..hi.
func CheckRange(name string, n, lo, hi int64) error {
	if n < lo || n > hi {
		return fmt.Errorf("%w: %s must be %d to %d, not %d", ErrOutOfRange, name, lo, hi, n)
	}
	return nil
}

// ParseRange parses a decimal number a user sent as text (a query
// parameter), overflow included, and checks it is lo..hi.
func ParseRange(name, s string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s must be a whole number %d to %d, not %q", ErrOutOfRange, name, lo, hi, s)
	}
	return n, CheckRange(name, n, lo, hi)
}

// maxBodyDepth bounds the nesting of a strict body: the lifecycle API's
// bodies are a few levels deep. Other bodies nest as deep as encoding/json
// allows (an Iceberg schema of nested structs is deep).
const (
	maxBodyDepth = 32
	maxJSONDepth = 10000
)

// CheckUniqueKeys refuses (400) a body with a key twice in any object: its
// readers would disagree on what it says (encoding/json keeps the last).
// Iceberg REST bodies go through it; lifecycle ones through DecodeStrict.
func CheckUniqueKeys(body []byte) error {
	return scanKeys(body, maxJSONDepth)
}

// DecodeStrict decodes one JSON value into v, refusing (400) what a lenient
// decoder would quietly turn into another request: a key twice in any
// object (encoding/json keeps the last), a field v does not have (matched
// exactly, not case-insensitively), null anywhere but in a json.RawMessage
// and "" for a string field (an optional field is left out: an unset
// variable in a script must not mean "the only generation"), a wrong type,
// an empty body and trailing data.
func DecodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return fmt.Errorf("%w: a JSON body is required", ErrBadRequest)
	}
	if err := scanKeys(body, maxBodyDepth); err != nil {
		return err
	}
	if err := checkShape(body, reflect.TypeOf(v), "the body"); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: malformed JSON body: %v", ErrBadRequest, err)
	}
	return nil
}

// frame is an open object or array while scanKeys walks a body.
type frame struct {
	path   string
	object bool
	keys   map[string]bool
	key    bool   // an object's next string is a key
	cur    string // an object's key being read
	index  int    // an array's item being read
}

// scanKeys checks that body is one well-formed JSON value, at most
// maxDepth deep, with no key twice in any object.
func scanKeys(body []byte, maxDepth int) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []*frame
	// at is the path of the value the next token starts.
	at := func() string {
		if len(stack) == 0 {
			return "the body"
		}
		f := stack[len(stack)-1]
		if f.object {
			return fieldPath(f.path, f.cur)
		}
		return fmt.Sprintf("%s[%d]", f.path, f.index)
	}
	// done: a value ended; its container moves on.
	done := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; f.object {
			f.key = true
		} else {
			f.index++
		}
	}
	for first := true; first || len(stack) > 0; first = false {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%w: malformed JSON body: %v", ErrBadRequest, err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.key {
			if top.keys[s] {
				return fmt.Errorf("%w: key %q appears twice in %s", ErrBadRequest, s, top.path)
			}
			top.keys[s], top.key, top.cur = true, false, s
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == maxDepth {
				return fmt.Errorf("%w: the body nests deeper than %d levels", ErrBadRequest, maxDepth)
			}
			f := &frame{path: at(), object: tok == json.Delim('{'), key: true}
			if f.object {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			done()
		default:
			done()
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: trailing data after the JSON body", ErrBadRequest)
	}
	return nil
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// checkShape walks a (well-formed) body along the type it decodes into:
// no null but where a json.RawMessage (or another type decoding itself)
// takes the value, and no key a struct does not name exactly. Wrong types
// are left to encoding/json.
func checkShape(raw []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		if t.Implements(unmarshaler) {
			return nil
		}
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		return nil // its own decoder decides, null included
	}
	if string(bytes.TrimSpace(raw)) == "null" {
		return fmt.Errorf("%w: %s is null: leave an optional field out instead", ErrBadRequest, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil // not an object: encoding/json names the type
		}
		fields := jsonFields(t)
		for k, v := range obj {
			f, ok := fields[k]
			if !ok {
				return fmt.Errorf("%w: unknown field %q in %s", ErrBadRequest, k, path)
			}
			if f.Type.Kind() == reflect.String && string(bytes.TrimSpace(v)) == `""` {
				return fmt.Errorf("%w: %s is empty: leave an optional field out instead", ErrBadRequest, fieldPath(path, k))
			}
			if err := checkShape(v, f.Type, fieldPath(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for i, v := range items {
			if err := checkShape(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		for k, v := range obj {
			if err := checkShape(v, t.Elem(), fieldPath(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func fieldPath(parent, key string) string {
	if parent == "the body" {
		return strconv.Quote(key)
	}
	return parent + "." + strconv.Quote(key)
}

// jsonFields maps a struct's JSON names to its fields.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f
	}
	return out
}
