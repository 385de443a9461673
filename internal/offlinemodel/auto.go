package offlinemodel

import (
	"encoding/json"
	"fmt"
)

// DefaultText is the text of the reply to a main or subagent request that
// nothing scripted, unless Config.DefaultText says otherwise.
const DefaultText = "This is an unscripted reply from the fake Anthropic API."

// compactSummary answers compaction requests: the CLI keeps what is inside
// <summary>.
const compactSummary = "<analysis>\nThe fake Anthropic API summarizes automatically.\n</analysis>\n\n" +
	"<summary>\n1. Primary Request and Intent:\n   Automatic summary from the fake Anthropic API; " +
	"the transcript holds the details.\n</summary>"

// autoString fills string fields of synthesized structured answers.
const autoString = "automatic answer from the fake Anthropic API"

// autoReply returns the automatic answer to a compaction or auxiliary
// request: a summary, a JSON value that satisfies the requested schema, or a
// short text.
func autoReply(r *Request) Response {
	switch {
	case r.Class == ClassCompact:
		return Reply(Text(compactSummary))
	case r.StructuredOutput:
		var schema any
		_ = json.Unmarshal(r.Schema, &schema)
		b, err := json.Marshal(valueFor(schema))
		if err != nil {
			b = []byte("{}")
		}
		return Reply(Text(string(b)))
	default:
		return Reply(Text("OK"))
	}
}

// valueFor returns a small value that satisfies a JSON schema: the const or
// first enum value, true for booleans, the minimum for numbers, the required
// properties of objects, minItems items of arrays, the first alternative of
// anyOf/oneOf/allOf. It builds at most maxSchemaNodes values, so a deep or
// recursive schema cannot make it explode.
func valueFor(schema any) any {
	budget := maxSchemaNodes
	return synth(schema, &budget)
}

const maxSchemaNodes = 1000

func synth(schema any, budget *int) any {
	*budget--
	s, ok := schema.(map[string]any)
	if !ok || *budget < 0 {
		return map[string]any{}
	}
	if v, ok := s["const"]; ok {
		return v
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			return synth(alts[0], budget)
		}
	}
	switch schemaType(s) {
	case "boolean":
		return true
	case "string":
		return autoString
	case "integer", "number":
		if m, ok := s["minimum"].(float64); ok {
			return m
		}
		return 0
	case "null":
		return nil
	case "array":
		n, _ := s["minItems"].(float64)
		items := []any{}
		for i := 0; float64(i) < n && *budget > 0; i++ {
			items = append(items, synth(s["items"], budget))
		}
		return items
	default:
		obj := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, name := range req {
			if *budget <= 0 {
				break
			}
			n := fmt.Sprint(name)
			obj[n] = synth(props[n], budget)
		}
		return obj
	}
}

// schemaType returns the schema's type, the first non-null one of a list.
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if str, ok := x.(string); ok && str != "null" {
				return str
			}
		}
	}
	return "object"
}

// estimateTokens is a rough token count for n bytes of text or JSON.
func estimateTokens(n int) int {
	return max(1, n/4)
}

// CacheSplit shares the prompt tokens of an estimated usage: Read of them
// are reported as cache_read_input_tokens, Write as
// cache_creation_input_tokens and the rest as input_tokens. Each share is at
// least 0 and together at most 1.
type CacheSplit struct {
	Read  float64
	Write float64
}

// DefaultCacheSplit is the split of Config.CacheSplit's default: half of the
// prompt read from the cache, a quarter written to it, so that every answer
// without WithUsage reports cache tokens of both kinds.
var DefaultCacheSplit = CacheSplit{Read: 0.5, Write: 0.25}

// estimateUsage estimates the usage of answering a request of bodyLen bytes
// with blocks, the prompt shared out by split. A non-zero share is at least
// one token, and input_tokens is never zero.
func estimateUsage(bodyLen int, blocks []servedBlock, split CacheSplit) Usage {
	out := 0
	for _, b := range blocks {
		out += len(b.Text) + len(b.Thinking) + len(b.input)
	}
	prompt := estimateTokens(bodyLen)
	share := func(f float64) int {
		if f <= 0 {
			return 0
		}
		return max(1, int(float64(prompt)*f))
	}
	read, write := share(split.Read), share(split.Write)
	return Usage{
		InputTokens:              max(1, prompt-read-write),
		OutputTokens:             estimateTokens(out),
		CacheReadInputTokens:     read,
		CacheCreationInputTokens: write,
	}
}
