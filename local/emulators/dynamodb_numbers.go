package emulators

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
)

// roundedNumber finds a number anywhere in a request (items, keys,
// expression values, transactions) that minidyn would round: its
// expressions work on float64, and an update writes the whole item back
// through them (an untouched attribute too), where DynamoDB keeps 38
// digits. "" when there is none.
func roundedNumber(body []byte) string {
	var req any
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	var find func(v any) string
	find = func(v any) string {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch {
				case k == "N":
					if s, ok := x.(string); ok && !exactFloat(s) {
						return s
					}
				case k == "NS":
					if xs, ok := x.([]any); ok {
						for _, e := range xs {
							if s, ok := e.(string); ok && !exactFloat(s) {
								return s
							}
						}
					}
				default:
					if n := find(x); n != "" {
						return n
					}
				}
			}
		case []any:
			for _, x := range v {
				if n := find(x); n != "" {
					return n
				}
			}
		}
		return ""
	}
	return find(req)
}

// exactFloat says whether a DynamoDB number survives float64 unchanged.
func exactFloat(s string) bool {
	want, ok := new(big.Rat).SetString(s)
	if !ok {
		return true // not a number: DynamoDB's own error, not ours
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	got, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'f', -1, 64))
	return ok && got.Cmp(want) == 0
}

func roundedNumberError(n string) awsError {
	return awsError{"ValidationException", fmt.Sprintf("the local DynamoDB evaluates expressions on float64 and would round %s, in an update even when it is not the attribute updated (DynamoDB keeps 38 digits): store such a number as a string", n)}
}
