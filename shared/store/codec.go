package store

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func marshal(v any) (map[string]ddbtypes.AttributeValue, error) {
	return attributevalue.MarshalMap(v)
}

func marshalValue(v any) (ddbtypes.AttributeValue, error) {
	return attributevalue.Marshal(v)
}

func unmarshal(item map[string]ddbtypes.AttributeValue, out any) error {
	return attributevalue.UnmarshalMap(item, out)
}

type pageToken struct {
	PK     string `json:"p"`
	Prefix string `json:"x"`
	SK     string `json:"k"`
}

// encodeToken makes an opaque paging token; it carries the partition and
// prefix so that a token of one listing cannot be replayed against another.
func encodeToken(pk, prefix, sk string) string {
	b, _ := json.Marshal(pageToken{PK: pk, Prefix: prefix, SK: sk})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(tok, pk, prefix string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", fmt.Errorf("%w: not base64", ErrBadPageToken)
	}
	var t pageToken
	if err := json.Unmarshal(b, &t); err != nil {
		return "", fmt.Errorf("%w: not a token", ErrBadPageToken)
	}
	if t.PK != pk || t.Prefix != prefix || !strings.HasPrefix(t.SK, prefix) {
		return "", fmt.Errorf("%w: token of another listing", ErrBadPageToken)
	}
	return t.SK, nil
}
