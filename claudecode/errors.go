package claudecode

import (
	"fmt"
	"strings"
	"syscall"
)

// ExitError reports that the CLI exited unsuccessfully: a non-zero code (1 when the last result had
// is_error, or start-up failed) or a signal.
type ExitError struct {
	// Code is the exit code, or -1 when a signal ended the process.
	Code int
	// Signal is the signal that ended the process, or 0.
	Signal syscall.Signal
	// Stderr holds the last lines of the CLI's stderr, escape sequences stripped, secrets redacted.
	Stderr []string
	// Err is the underlying *exec.ExitError.
	Err error
}

func (e *ExitError) Error() string {
	var what string
	if e.Signal != 0 {
		what = fmt.Sprintf("claude was killed by signal %s", e.Signal)
	} else {
		what = fmt.Sprintf("claude exited with code %d", e.Code)
	}
	if n := len(e.Stderr); n > 0 {
		what += ": " + e.Stderr[n-1]
	}
	return what
}

func (e *ExitError) Unwrap() error { return e.Err }

// ResumeRejectedError reports that the CLI refused to resume: the session or the uuid to resume at
// does not exist in its transcripts. Retrying cannot help.
type ResumeRejectedError struct {
	// Reason is the stderr line that says why.
	Reason string
	// Err is the *ExitError.
	Err error
}

func (e *ResumeRejectedError) Error() string {
	return "claude rejected the resume: " + e.Reason
}

func (e *ResumeRejectedError) Unwrap() error { return e.Err }

// ProtocolError reports that the CLI's output could not be read as stream-json.
type ProtocolError struct {
	Msg string
	Err error
}

func (e *ProtocolError) Error() string {
	if e.Err == nil {
		return "claude protocol error: " + e.Msg
	}
	return "claude protocol error: " + e.Msg + ": " + e.Err.Error()
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// resumeRejection returns the stderr line saying a resume was rejected, if any.
func resumeRejection(stderr []string) (string, bool) {
	for _, l := range stderr {
		if strings.Contains(l, "No message found with message.uuid") ||
			strings.Contains(l, "No conversation found") {
			return l, true
		}
	}
	return "", false
}
