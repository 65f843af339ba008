package emulators

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
)

// awsError is an AWS API error; its code is the __type the SDK matches.
type awsError struct{ code, msg string }

func (e awsError) Error() string { return e.code + ": " + e.msg }

// serveJSON serves one request of an AWS JSON protocol (X-Amz-Target names
// the operation) with call, answering errors the way the SDK decodes them.
func serveJSON(w http.ResponseWriter, r *http.Request, call func(ctx context.Context, op string, req map[string]any) (map[string]any, error)) {
	target := r.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	var req map[string]any
	if err := decodeJSON(mustRead(r), &req); err != nil {
		writeAWSError(w, "SerializationException", err.Error())
		return
	}
	out, err := call(r.Context(), op, req)
	var ae awsError
	switch {
	case errors.As(err, &ae):
		writeAWSError(w, ae.code, ae.msg)
	case err != nil:
		writeAWSError(w, "InternalError", err.Error())
	default:
		writeAWS(w, out)
	}
}

func epoch(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func mustRead(r *http.Request) []byte {
	var b bytes.Buffer
	_, _ = b.ReadFrom(r.Body)
	return b.Bytes()
}

func writeAWS(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	_ = json.NewEncoder(w).Encode(v)
}

func writeAWSError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}
