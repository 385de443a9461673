package offlinemodel

import (
	"net/http"
	"time"
)

// Block is one content block of a scripted assistant message. Build blocks
// with Text, Thinking, ToolUse, ToolUseID or the Use* helpers.
type Block struct {
	// Type is "text", "thinking" or "tool_use".
	Type string
	// Text is the text of a text block.
	Text string
	// Thinking and Signature belong to a thinking block. An empty Signature
	// is generated when the block is served.
	Thinking  string
	Signature string
	// ID, Name and Input belong to a tool_use block. An empty ID is generated
	// ("toolu_…") each time the block is served. Input is marshalled to JSON;
	// nil means {}.
	ID    string
	Name  string
	Input any
}

// Text returns a text block.
func Text(text string) Block {
	return Block{Type: "text", Text: text}
}

// Thinking returns a thinking block with a generated signature. It is
// streamed as thinking_delta events followed by one signature_delta.
func Thinking(thinking string) Block {
	return Block{Type: "thinking", Thinking: thinking}
}

// ToolUse returns a tool_use block that calls the named tool with input (any
// value that marshals to a JSON object). Its id is generated when served.
func ToolUse(name string, input any) Block {
	return Block{Type: "tool_use", Name: name, Input: input}
}

// ToolUseID is ToolUse with an explicit tool-use id, for tests that look the
// id up in the CLI's output or in the tool_result the CLI sends back.
func ToolUseID(id, name string, input any) Block {
	return Block{Type: "tool_use", ID: id, Name: name, Input: input}
}

// Usage is the token accounting reported for a response. It mirrors the
// API's usage object.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// Response is what the server answers to one /v1/messages request: an
// assistant message, or an injected failure. The zero value is an empty
// end_turn message. Methods return modified copies, so a Response can be
// built in one expression:
//
//	Reply(Text("a"), Text("b")).WithStreamError(1, "overloaded_error", "Overloaded")
type Response struct {
	// Blocks are the content blocks of the assistant message, in order.
	Blocks []Block
	// StopReason defaults to "tool_use" when a block is a tool_use and to
	// "end_turn" otherwise.
	StopReason string
	// Usage, when set, replaces the estimated usage.
	Usage *Usage

	// Status, when non-zero, answers with this HTTP status and an error body
	// instead of a message.
	Status int
	// ErrorType and ErrorMessage fill the error body of Status and of the
	// stream error. Defaults follow the status (429 rate_limit_error, 529
	// overloaded_error, 500 api_error, …).
	ErrorType    string
	ErrorMessage string
	// ErrorCode, when set, is sent as error.details.error_code with Status
	// (the API names some errors this way, for example
	// "enforced_spend_limit_reached"; the pinned CLI copies it into the
	// result's api_error_code).
	ErrorCode string
	// RetryAfter, when positive, is sent with Status as the retry-after
	// header, in whole seconds rounded up. The pinned CLI waits that long
	// plus up to about 25% jitter before its retry.
	RetryAfter time.Duration

	// StreamErrorAfter, when StreamError is set, is the number of complete
	// blocks streamed before the SSE error event ends the stream.
	StreamErrorAfter int
	// StreamErrorDeltas, when positive, moves the error event inside the
	// next block: after its content_block_start and this many of its
	// content_block_delta events (at most all of them), before its
	// content_block_stop. There must be such a block.
	StreamErrorDeltas int
	// StreamError makes a streaming answer end with an SSE error event
	// instead of message_delta/message_stop. A non-streaming request gets the
	// equivalent HTTP error instead.
	//
	// The pinned CLI recovers from both forms without an error result, even
	// with CLAUDE_CODE_MAX_RETRIES=0, and each recovery is one more main
	// request that takes the next queued Response: after at least one block
	// it keeps the blocks and asks for a continuation (streaming, with a
	// synthetic user note that the answer was cut off); before any block it
	// asks again without streaming ("stream":false, max_tokens 64000).
	StreamError bool

	// Disconnect drops the connection instead of finishing the answer: a
	// stream is cut after DisconnectAfter complete blocks, or, when
	// DisconnectDeltas is positive, inside the next block after that many of
	// its content_block_delta events; a non-streaming request gets no answer
	// at all. The client sees the connection close mid-response.
	Disconnect       bool
	DisconnectAfter  int
	DisconnectDeltas int

	// RateLimit, when set, is sent as anthropic-ratelimit-* headers with this
	// answer, instead of Config.RateLimit.
	RateLimit *RateLimit
	// Header holds extra response headers for this answer.
	Header http.Header

	// Delay is waited before every SSE event (or before the JSON answer).
	Delay time.Duration

	// Hold, when non-nil, stops the answer after HoldAfter complete blocks
	// (0: right after message_start) until Hold is closed, the client goes
	// away or the server closes. After a release the rest is sent; otherwise
	// the stream is cut. Pings are sent while holding.
	Hold      <-chan struct{}
	HoldAfter int

	// DeltaSent, when set, is called with the text of each text_delta event of a streamed
	// answer just before the event is written to the client, so that no client can have read a
	// delta it was not yet told of: benchmarks time what the client does with a delta from that
	// moment. It runs on the request's goroutine.
	DeltaSent func(text string)
}

// Reply returns a Response with the given content blocks.
func Reply(blocks ...Block) Response {
	return Response{Blocks: blocks}
}

// Fail returns a Response that answers with an HTTP error: status (429, 500,
// 529, …), an Anthropic error body of type errType (empty: derived from the
// status) and, when retryAfter is positive, a retry-after header.
func Fail(status int, errType string, retryAfter time.Duration) Response {
	return Response{Status: status, ErrorType: errType, RetryAfter: retryAfter}
}

// StreamError returns a Response that streams blocks and then, instead of
// finishing the message, sends an SSE error event of type errType with msg.
func StreamError(errType, msg string, blocks ...Block) Response {
	return Reply(blocks...).WithStreamError(len(blocks), errType, msg)
}

// WithStreamError makes the stream end with an SSE error event after
// afterBlocks complete blocks.
func (r Response) WithStreamError(afterBlocks int, errType, msg string) Response {
	r.StreamError = true
	r.StreamErrorAfter = afterBlocks
	r.StreamErrorDeltas = 0
	r.ErrorType = errType
	r.ErrorMessage = msg
	return r
}

// WithStreamErrorMidBlock makes the stream end with an SSE error event
// inside block number block (counting from 0), after deltas of its
// content_block_delta events and before its content_block_stop; the blocks
// before it are complete.
func (r Response) WithStreamErrorMidBlock(block, deltas int, errType, msg string) Response {
	r = r.WithStreamError(block, errType, msg)
	r.StreamErrorDeltas = max(1, deltas)
	return r
}

// WithDisconnect drops the connection after afterBlocks complete blocks (a
// non-streaming request gets no answer).
func (r Response) WithDisconnect(afterBlocks int) Response {
	r.Disconnect = true
	r.DisconnectAfter = afterBlocks
	r.DisconnectDeltas = 0
	return r
}

// WithDisconnectMidBlock drops the connection inside block number block,
// after deltas of its content_block_delta events and before its
// content_block_stop.
func (r Response) WithDisconnectMidBlock(block, deltas int) Response {
	r = r.WithDisconnect(block)
	r.DisconnectDeltas = max(1, deltas)
	return r
}

// WithRateLimit sends rl as anthropic-ratelimit-* headers with this answer.
func (r Response) WithRateLimit(rl RateLimit) Response {
	r.RateLimit = &rl
	return r
}

// WithErrorCode sends code as error.details.error_code with the HTTP error
// of this answer.
func (r Response) WithErrorCode(code string) Response {
	r.ErrorCode = code
	return r
}

// WithHeader adds a response header to this answer.
func (r Response) WithHeader(name, value string) Response {
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Add(name, value)
	r.Header = h
	return r
}

// WithDelay waits d before every event of the answer.
func (r Response) WithDelay(d time.Duration) Response {
	r.Delay = d
	return r
}

// WithHold holds the answer after afterBlocks complete blocks until release
// is closed, the client goes away or the server closes.
func (r Response) WithHold(afterBlocks int, release <-chan struct{}) Response {
	r.Hold = release
	r.HoldAfter = afterBlocks
	return r
}

// WithDeltaSent calls fn with the text of each text delta as it is sent, just before its bytes
// are written, so that nobody can read a delta before fn has been told of it.
func (r Response) WithDeltaSent(fn func(text string)) Response {
	r.DeltaSent = fn
	return r
}

// WithUsage reports u instead of the estimated usage.
func (r Response) WithUsage(u Usage) Response {
	r.Usage = &u
	return r
}

// WithStopReason reports reason ("end_turn", "tool_use", "max_tokens",
// "stop_sequence", "pause_turn", "refusal") instead of the default.
func (r Response) WithStopReason(reason string) Response {
	r.StopReason = reason
	return r
}

// stopReason is the stop reason to report.
func (r Response) stopReason() string {
	if r.StopReason != "" {
		return r.StopReason
	}
	for _, b := range r.Blocks {
		if b.Type == "tool_use" {
			return "tool_use"
		}
	}
	return "end_turn"
}
