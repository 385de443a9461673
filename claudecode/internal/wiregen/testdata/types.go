// Package sample is a small set of wire types for wiregen's tests: every kind of field it reads,
// embedding, hiding, and objects kept verbatim.
package sample

import "encoding/json"

type line struct{ raw []byte }

// Header only appears embedded: it gets no decoder of its own.
type Header struct {
	Kind string `json:"kind"`
	ID   string `json:"id" wire:"text"`
}

// Event has a field of every kind.
type Event struct {
	line
	Header
	Name   string          `json:"name"`
	Prompt string          `json:"prompt,omitempty" wire:"text"`
	Count  int64           `json:"count"`
	Code   *int64          `json:"code,omitempty"`
	Ratio  float64         `json:"ratio"`
	On     bool            `json:"on,omitempty"`
	Tags   []string        `json:"tags"`
	Body   json.RawMessage `json:"body,omitempty"`
	Item   Item            `json:"item"`
	Opt    *Item           `json:"opt,omitempty"`
	Items  []Item          `json:"items"`
	ByName map[string]Item `json:"by_name"`
	Note   *Note           `json:"note,omitempty"`
	Text   Text            `json:"text"`
	Plain  string          `json:",omitempty"`
	Hidden string          `json:"-"`
	secret string
}

// Shadow's own id hides its header's.
type Shadow struct {
	Header
	ID int64 `json:"id"`
}

type Item struct {
	Name string `json:"name"`
}

// Note keeps its object when keep says so.
type Note struct {
	Body string          `json:"body" wire:"text"`
	Raw  json.RawMessage `json:"-" wire:"verbatim,if=keep"`
}

// Text has no tags: its decoder is written by hand.
type Text struct {
	S string
}
