package emulators

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"unsafe"

	"github.com/truora/minidyn/types"
)

// errSyntax sends a line to encoding/json (which says what is wrong).
var errSyntax = errors.New("not a snapshot items line")

// itemsParser decodes a snapshot items line, {"table":T,"items":[...]} as
// writeSnapshot encodes it, into minidyn's item type. It exists for speed:
// encoding/json spends most of a start reflecting over 20,000 items (about
// 4× slower). Strings without escapes point into the line (the snapshot
// file as read for this load, never reused); anything it does not expect
// is errSyntax, and the caller decodes the line with encoding/json
// instead.
type itemsParser struct {
	b    []byte
	i    int
	slab []types.Item // items are allocated in chunks
	hint int          // the size of the last map read
}

func parseItemsLine(line []byte) (table string, items []map[string]*types.Item, err error) {
	p := &itemsParser{b: line}
	if !p.lit(`{"table":`) {
		return "", nil, errSyntax
	}
	if table, err = p.str(); err != nil {
		return "", nil, err
	}
	if !p.lit(`,"items":[`) {
		return "", nil, errSyntax
	}
	items = []map[string]*types.Item{}
	for !p.lit("]") {
		if len(items) > 0 && !p.lit(",") {
			return "", nil, errSyntax
		}
		m, err := p.itemMap()
		if err != nil {
			return "", nil, err
		}
		items = append(items, m)
	}
	if !p.lit("}") {
		return "", nil, errSyntax
	}
	p.lit("\n")
	if p.i != len(p.b) {
		return "", nil, errSyntax
	}
	return table, items, nil
}

// lit consumes s if the input continues with it.
func (p *itemsParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// str reads a JSON string; one with escapes goes through encoding/json.
func (p *itemsParser) str() (string, error) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", errSyntax
	}
	start := p.i + 1
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			if j == start {
				return "", nil
			}
			return unsafe.String(&p.b[start], j-start), nil
		case c == '\\':
			return p.escaped(start - 1)
		case c < 0x20:
			return "", errSyntax
		}
	}
	return "", errSyntax
}

func (p *itemsParser) escaped(start int) (string, error) {
	j := start + 1
	for ; j < len(p.b) && p.b[j] != '"'; j++ {
		if p.b[j] == '\\' {
			j++
		}
	}
	if j >= len(p.b) {
		return "", errSyntax
	}
	var s string
	if err := json.Unmarshal(p.b[start:j+1], &s); err != nil {
		return "", errSyntax
	}
	p.i = j + 1
	return s, nil
}

func (p *itemsParser) strs() ([]*string, error) {
	if !p.lit("[") {
		return nil, errSyntax
	}
	out := []*string{}
	for !p.lit("]") {
		if len(out) > 0 && !p.lit(",") {
			return nil, errSyntax
		}
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		out = append(out, &s)
	}
	return out, nil
}

func (p *itemsParser) bytes() ([]byte, error) {
	s, err := p.str()
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errSyntax
	}
	return b, nil
}

func (p *itemsParser) boolean() (*bool, error) {
	var v bool
	switch {
	case p.lit("true"):
		v = true
	case p.lit("false"):
	default:
		return nil, errSyntax
	}
	return &v, nil
}

// itemMap reads {"name":{attribute value},...}.
func (p *itemsParser) itemMap() (map[string]*types.Item, error) {
	if !p.lit("{") {
		return nil, errSyntax
	}
	// Sized like the item before (neighbours are alike): growing a map
	// past 8 entries rehashes it.
	m := make(map[string]*types.Item, p.hint)
	for !p.lit("}") {
		if len(m) > 0 && !p.lit(",") {
			return nil, errSyntax
		}
		k, err := p.str()
		if err != nil || !p.lit(":") {
			return nil, errSyntax
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	p.hint = len(m)
	return m, nil
}

// value reads one attribute value, {"S":"..."} and the like.
func (p *itemsParser) value() (*types.Item, error) {
	if !p.lit("{") {
		return nil, errSyntax
	}
	if len(p.slab) == 0 {
		p.slab = make([]types.Item, 256)
	}
	it := &p.slab[0]
	p.slab = p.slab[1:]
	for n := 0; !p.lit("}"); n++ {
		if n > 0 && !p.lit(",") {
			return nil, errSyntax
		}
		kind, err := p.str()
		if err != nil || !p.lit(":") {
			return nil, errSyntax
		}
		switch kind {
		case "S", "N":
			s, err := p.str()
			if err != nil {
				return nil, err
			}
			if kind == "S" {
				it.S = &s
			} else {
				it.N = &s
			}
		case "BOOL":
			it.BOOL, err = p.boolean()
		case "NULL":
			it.NULL, err = p.boolean()
		case "B":
			it.B, err = p.bytes()
		case "SS":
			it.SS, err = p.strs()
		case "NS":
			it.NS, err = p.strs()
		case "M":
			it.M, err = p.itemMap()
		case "L":
			if !p.lit("[") {
				return nil, errSyntax
			}
			it.L = []*types.Item{}
			for !p.lit("]") {
				if len(it.L) > 0 && !p.lit(",") {
					return nil, errSyntax
				}
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				it.L = append(it.L, v)
			}
		case "BS":
			if !p.lit("[") {
				return nil, errSyntax
			}
			it.BS = [][]byte{}
			for !p.lit("]") {
				if len(it.BS) > 0 && !p.lit(",") {
					return nil, errSyntax
				}
				b, err := p.bytes()
				if err != nil {
					return nil, err
				}
				it.BS = append(it.BS, b)
			}
		default:
			return nil, errSyntax
		}
		if err != nil {
			return nil, err
		}
	}
	return it, nil
}
