package offlinemodel

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// apiError is the body of an Anthropic error response and the data of an SSE
// error event.
type apiError struct {
	Type      string       `json:"type"`
	Error     apiErrorBody `json:"error"`
	RequestID string       `json:"request_id,omitempty"`
}

type apiErrorBody struct {
	Type    string           `json:"type"`
	Message string           `json:"message"`
	Details *apiErrorDetails `json:"details,omitempty"`
}

// apiErrorDetails is error.details, which the API sends with some errors
// (a spend cap's error_code).
type apiErrorDetails struct {
	ErrorCode string `json:"error_code"`
}

// errorTypeFor returns the API's error type for an HTTP status.
func errorTypeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

// statusFor returns the HTTP status the API uses for an error type.
func statusFor(errType string) int {
	switch errType {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return 529
	default:
		return http.StatusInternalServerError
	}
}

// defaultErrorMessage returns the API's usual message for an error type.
func defaultErrorMessage(errType string) string {
	switch errType {
	case "rate_limit_error":
		return "Number of requests has exceeded your rate limit."
	case "overloaded_error":
		return "Overloaded"
	case "not_found_error":
		return "Not found"
	case "invalid_request_error":
		return "Invalid request"
	default:
		return "Internal server error"
	}
}

// newAPIError builds an error body, filling defaults for empty fields.
func newAPIError(status int, errType, msg, requestID string) apiError {
	if errType == "" {
		errType = errorTypeFor(status)
	}
	if msg == "" {
		msg = defaultErrorMessage(errType)
	}
	return apiError{Type: "error", Error: apiErrorBody{Type: errType, Message: msg}, RequestID: requestID}
}

// writeAPIError answers with status, an optional retry-after header (whole
// seconds, as the API sends it) and an Anthropic error body.
func writeAPIError(w http.ResponseWriter, status int, body apiError, retryAfter time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
