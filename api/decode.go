package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/drover-run/drover/taskerr"
)

// decode reads r's body, one JSON object, into v: unknown fields, trailing data, a wrong type
// or a body over the limit are refused with what was wrong.
func decode(r *http.Request, v any) *taskerr.Error {
	if e := checkJSON(r); e != nil {
		return e
	}
	b, err := io.ReadAll(r.Body)
	if err == nil {
		if e := checkBodyText(b); e != nil {
			return e
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(v)
		if err == nil {
			if _, terr := dec.Token(); !errors.Is(terr, io.EOF) {
				err = errors.New("more than one JSON value")
			}
		}
	}
	if err == nil {
		if f := nulField(reflect.ValueOf(v), ""); f != "" {
			return textProblem(f, "holds a NUL byte, which no field takes")
		}
		return nil
	}
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooLarge):
		return errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
			fmt.Sprintf("the body is over %d bytes; send a shorter prompt (at most %d bytes, measured as JSON)", tooLarge.Limit, maxPromptBytes))
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "the body is empty; send a JSON object")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "the body is not valid JSON ("+err.Error()+"); send a JSON object")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return errorf(http.StatusBadRequest, CodeInvalidJSON, "the body must be a JSON object, not "+typ.Value)
		}
		return &taskerr.Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON,
			Message:  fmt.Sprintf("%s: is %s, want %s", field, typ.Value, typ.Type),
			Problems: []taskerr.Problem{{Field: field, Reason: fmt.Sprintf("is %s, want %s", typ.Value, typ.Type)}}}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return errorf(http.StatusBadRequest, CodeUnknownField,
			fmt.Sprintf("unknown field %s; the fields are listed in /api/v1/openapi.json", name))
	}
	var de *durationError
	if errors.As(err, &de) {
		return &taskerr.Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: de.Error()}
	}
	return errorf(http.StatusBadRequest, CodeInvalidJSON, "the body could not be read: "+err.Error())
}

// checkJSON refuses a body of any Content-Type but JSON (none is taken as JSON): the types a
// web page may send to another origin without asking (form, text) never reach a handler.
func checkJSON(r *http.Request) *taskerr.Error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia,
			fmt.Sprintf("the body is %q; send JSON with Content-Type: application/json", ct))
	}
	return nil
}

// decodeOptional is decode for a body that may be left out: an empty body leaves v as it is.
func decodeOptional(r *http.Request, v any) *taskerr.Error {
	if e := checkJSON(r); e != nil {
		return e
	}
	if r.ContentLength == 0 {
		return nil
	}
	b, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, fmt.Sprintf("the body is over %d bytes", tooLarge.Limit))
	}
	if err != nil {
		return errorf(http.StatusBadRequest, CodeInvalidJSON, "the body could not be read: "+err.Error())
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return decode(r, v)
}

// Duration is a time.Duration written in JSON as a Go duration string ("90s", "1h30m").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &durationError{value: string(b)}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &durationError{value: s}
	}
	*d = Duration(v)
	return nil
}

// durationError is a duration field that is not a Go duration string.
type durationError struct{ value string }

func (e *durationError) Error() string {
	return fmt.Sprintf("%s is not a duration; write one as a string such as \"90s\", \"30m\" or \"2h\"", e.value)
}
