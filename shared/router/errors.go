package router

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/icehold/icehold/shared/authz"
	"github.com/icehold/icehold/shared/catalog"
	"github.com/icehold/icehold/shared/credentials"
	"github.com/icehold/icehold/shared/partitions"
	"github.com/icehold/icehold/shared/purge"
	"github.com/icehold/icehold/shared/sigv4"
	"github.com/icehold/icehold/shared/softdelete"
	"github.com/icehold/icehold/shared/storagesweep"
)

var (
	errBodyTooLarge     = errors.New("request body too large")
	errNoRoute          = errors.New("no such route")
	errMethodNotAllowed = errors.New("method not allowed")
	errNotImplemented   = errors.New("not implemented")
)

// ErrorModel is the Iceberg REST spec's error body.
type ErrorModel struct {
	Message string   `json:"message"`
	Type    string   `json:"type"`
	Code    int      `json:"code"`
	Stack   []string `json:"stack,omitempty"`
}

type errorResponse struct {
	Error ErrorModel `json:"error"`
}

// detailed is an error with structure beyond its message (a 409 naming the
// table that holds a name, or the generations to choose from): the details
// go beside the ErrorModel, where clients that do not know them ignore them.
type detailed interface {
	Details() (string, map[string]any)
}

// statusOf maps domain errors to the REST spec's status codes and types; the
// one place where that happens.
func statusOf(err error) (int, string) {
	table := []struct {
		err    error
		status int
		typ    string
	}{
		{authz.ErrUnauthenticated, http.StatusUnauthorized, "NotAuthorizedException"},
		{authz.ErrForbidden, http.StatusForbidden, "ForbiddenException"},
		{authz.ErrTooManyPatterns, http.StatusBadRequest, "BadRequestException"},
		{authz.ErrBadPrincipal, http.StatusBadRequest, "BadRequestException"},
		// A SigV4 signature refused (locally; in AWS API Gateway answers
		// these with the stack's gateway responses, the same shape).
		{sigv4.ErrNotSigned, http.StatusForbidden, "NotAuthorizedException"},
		{sigv4.ErrMalformed, http.StatusForbidden, "NotAuthorizedException"},
		{sigv4.ErrUnknownKey, http.StatusForbidden, "NotAuthorizedException"},
		{sigv4.ErrSignature, http.StatusForbidden, "NotAuthorizedException"},
		{sigv4.ErrSkew, http.StatusForbidden, "NotAuthorizedException"},
		{sigv4.ErrExpired, http.StatusForbidden, "NotAuthorizedException"},
		{errNoVending, http.StatusBadRequest, "BadRequestException"},
		{credentials.ErrTooLong, http.StatusUnprocessableEntity, "UnprocessableEntityException"},
		{errBodyTooLarge, http.StatusRequestEntityTooLarge, "RequestEntityTooLargeException"},
		{errNoRoute, http.StatusNotFound, "NotFoundException"},
		{errMethodNotAllowed, http.StatusMethodNotAllowed, "MethodNotAllowedException"},
		{errNotImplemented, http.StatusNotImplemented, "NotImplementedException"},
		{catalog.ErrBadRequest, http.StatusBadRequest, "BadRequestException"},
		{catalog.ErrUnprocessable, http.StatusUnprocessableEntity, "UnprocessableEntityException"},
		{catalog.ErrNoSuchCatalog, http.StatusNotFound, "NoSuchCatalogException"},
		{catalog.ErrNoSuchNamespace, http.StatusNotFound, "NoSuchNamespaceException"},
		{catalog.ErrNoSuchTable, http.StatusNotFound, "NoSuchTableException"},
		{catalog.ErrNoSuchView, http.StatusNotFound, "NoSuchViewException"},
		{catalog.ErrNotFound, http.StatusNotFound, "NotFoundException"},
		{catalog.ErrCatalogExists, http.StatusConflict, "AlreadyExistsException"},
		{catalog.ErrNamespaceExists, http.StatusConflict, "AlreadyExistsException"},
		{catalog.ErrTableExists, http.StatusConflict, "AlreadyExistsException"},
		{catalog.ErrViewExists, http.StatusConflict, "AlreadyExistsException"},
		{catalog.ErrNamespaceNotEmpty, http.StatusConflict, "NamespaceNotEmptyException"},
		{catalog.ErrCommitFailed, http.StatusConflict, "CommitFailedException"},
		{catalog.ErrPurging, http.StatusConflict, "AlreadyExistsException"},
		{catalog.ErrLocationOwned, http.StatusConflict, "LocationOwnedException"},
		{catalog.ErrTooLarge, http.StatusRequestEntityTooLarge, "RequestEntityTooLargeException"},
		{softdelete.ErrNoRecord, http.StatusNotFound, "NoSuchSoftDeletedTableException"},
		{softdelete.ErrAmbiguous, http.StatusConflict, "AmbiguousTableException"},
		{softdelete.ErrNameTaken, http.StatusConflict, "AlreadyExistsException"},
		{softdelete.ErrLegalHold, http.StatusConflict, "LegalHoldException"},
		{softdelete.ErrBadHoldPeriod, http.StatusConflict, "InvalidHoldPeriodException"},
		{purge.ErrLegalHold, http.StatusConflict, "LegalHoldException"},
		{purge.ErrNotRetryable, http.StatusConflict, "JobStateException"},
		{partitions.ErrTableUUIDMismatch, http.StatusConflict, "CommitFailedException"},
		{partitions.ErrDataRemoved, http.StatusConflict, "CommitFailedException"},
		{partitions.ErrFilesMissing, http.StatusUnprocessableEntity, "UnprocessableEntityException"},
		{partitions.ErrUnrepairable, http.StatusConflict, "UnrepairableException"},
		{partitions.ErrNoRetention, http.StatusNotFound, "NoSuchRetentionPolicyException"},
		{storagesweep.ErrReportRefused, http.StatusUnprocessableEntity, "InventoryReportRefusedException"},
		{storagesweep.ErrNoReport, http.StatusNotFound, "NoSuchInventoryReportException"},
		{storagesweep.ErrSweepRunning, http.StatusConflict, "StorageSweepRunningException"},
		{errAnswerTooLarge, http.StatusNotAcceptable, "NotAcceptableException"},
		{errKeyInFlight, http.StatusConflict, "IdempotencyKeyInFlightException"},
		{errKeyReused, http.StatusUnprocessableEntity, "IdempotencyKeyReusedException"},
	}
	for _, m := range table {
		if errors.Is(err, m.err) {
			return m.status, m.typ
		}
	}
	return http.StatusInternalServerError, "InternalServerError"
}

func writeError(w http.ResponseWriter, err error) {
	status, typ := statusOf(err)
	msg := err.Error()
	if status == http.StatusInternalServerError {
		slog.Error("request failed", "error", err)
	}
	var d detailed
	if errors.As(err, &d) {
		key, details := d.Details()
		writeJSON(w, status, map[string]any{"error": ErrorModel{Message: msg, Type: typ, Code: status}, key: details})
		return
	}
	writeJSON(w, status, errorResponse{Error: ErrorModel{Message: msg, Type: typ, Code: status}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"encode response","type":"InternalServerError","code":500}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// refusalBody is the ErrorModel of a refusal of net/http's ("400 Bad
// Request: invalid header value").
func refusalBody(status int, text string) []byte {
	msg := strings.TrimSpace(text)
	if strings.HasSuffix(msg, "invalid header value") {
		msg += ": a header value holds a control character (a byte 0x00 to 0x1F but tab, or 0x7F); an Idempotency-Key is 1 to 128 visible ASCII characters"
	}
	typ := strings.ReplaceAll(http.StatusText(status), " ", "") + "Exception"
	if status == http.StatusBadRequest {
		_, typ = statusOf(catalog.ErrBadRequest)
	}
	b, _ := json.Marshal(errorResponse{Error: ErrorModel{Message: msg, Type: typ, Code: status}})
	return b
}
