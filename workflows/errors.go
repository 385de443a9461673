package workflows

import (
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
)

// rejection is the error a validator returns. It is retryable only in the
// sense that a later attempt may be accepted (for example once the queue drains).
func rejection(errType, msg string) error {
	return temporal.NewApplicationError(msg, errType)
}

// describeError names the cause of an activity failure: its error type (the
// application error type, or "Timeout", "Canceled", "Error") and its message.
func describeError(err error) (errType, msg string) {
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		return "Timeout", timeoutName(timeoutErr.TimeoutType()) + " timeout"
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		errType = appErr.Type()
		if errType == "" {
			errType = "ApplicationError"
		}
		return errType, appErr.Message()
	}
	var canceledErr *temporal.CanceledError
	if errors.As(err, &canceledErr) {
		return "Canceled", "canceled"
	}
	return "Error", err.Error()
}

// isScheduleToStartTimeout reports whether err says that no worker picked the
// activity up in time: on a host queue, the host is gone.
func isScheduleToStartTimeout(err error) bool {
	var timeoutErr *temporal.TimeoutError
	return errors.As(err, &timeoutErr) && timeoutErr.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}

func timeoutName(t enumspb.TimeoutType) string {
	switch t {
	case enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
		return "start-to-close"
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
		return "schedule-to-start"
	case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE:
		return "schedule-to-close"
	case enumspb.TIMEOUT_TYPE_HEARTBEAT:
		return "heartbeat"
	}
	return "unknown"
}

// truncate shortens s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + ellipsis
}
