package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// payloadJSON is the wire form of NormalizedPayload.
type payloadJSON struct {
	Kind         Kind          `json:"kind"`
	ReadFile     *ReadFile     `json:"read_file,omitempty"`
	ModifyFile   *ModifyFile   `json:"modify_file,omitempty"`
	ShellExec    *ShellExec    `json:"shell_exec,omitempty"`
	CodeSearch   *CodeSearch   `json:"code_search,omitempty"`
	HTTPRequest  *HTTPRequest  `json:"http_request,omitempty"`
	SubagentTask *SubagentTask `json:"subagent_task,omitempty"`
	CreateTask   *CreateTask   `json:"create_task,omitempty"`
	ManageTodos  *ManageTodos  `json:"manage_todos,omitempty"`
	Generic      *Generic      `json:"generic,omitempty"`
	Misc         *Misc         `json:"misc,omitempty"`
}

// ErrInvalidPayload is wrapped by every error that Validate, MarshalJSON and UnmarshalJSON
// return for a payload that is not exactly one variant of a known kind.
var ErrInvalidPayload = errors.New("invalid normalized payload")

// Validate reports whether p holds exactly one variant and Kind names it.
func (p *NormalizedPayload) Validate() error {
	var set []Kind
	add := func(ok bool, k Kind) {
		if ok {
			set = append(set, k)
		}
	}
	add(p.ReadFile != nil, KindReadFile)
	add(p.ModifyFile != nil, KindModifyFile)
	add(p.ShellExec != nil, KindShellExec)
	add(p.CodeSearch != nil, KindCodeSearch)
	add(p.HTTPRequest != nil, KindHTTPRequest)
	add(p.SubagentTask != nil, KindSubagentTask)
	add(p.CreateTask != nil, KindCreateTask)
	add(p.ManageTodos != nil, KindManageTodos)
	add(p.Generic != nil, KindGeneric)
	add(p.Misc != nil, KindMisc)
	switch {
	case len(set) == 0:
		return fmt.Errorf("%w: kind %q but no variant field is set", ErrInvalidPayload, p.Kind)
	case len(set) > 1:
		return fmt.Errorf("%w: kind %q but fields %v are all set", ErrInvalidPayload, p.Kind, set)
	case set[0] != p.Kind:
		return fmt.Errorf("%w: kind %q but field %s is set", ErrInvalidPayload, p.Kind, set[0])
	}
	return nil
}

// MarshalJSON encodes p as {"kind": …, "<kind>": {…}}. It fails when p is not valid.
func (p NormalizedPayload) MarshalJSON() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	// The caller's encoder decides about HTML escaping: it re-encodes what this returns.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payloadJSON(p)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON decodes the form MarshalJSON writes and refuses anything that is not exactly one
// variant of a known kind. A JSON null leaves p unchanged.
func (p *NormalizedPayload) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	var w payloadJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("decoding normalized payload: %w", err)
	}
	v := NormalizedPayload(w)
	if err := v.Validate(); err != nil {
		return err
	}
	*p = v
	return nil
}
