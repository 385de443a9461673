package offlinemodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// holdPingInterval is how often a held stream sends a ping event.
const holdPingInterval = 2 * time.Second

// errCut reports that an answer stopped early: the client went away or the
// server is closing.
var errCut = errors.New("answer cut: client gone or server closing")

// pacer waits for per-event delays and holds, giving up when the client goes
// away or the server closes.
type pacer struct {
	ctx     context.Context // the request's context: done when the client goes away
	closing <-chan struct{} // closed by Server.Close
}

// sleep waits d.
func (p pacer) sleep(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-p.ctx.Done():
		return errCut
	case <-p.closing:
		return errCut
	}
}

// hold waits until release is closed; tick, if not nil, runs every
// holdPingInterval meanwhile.
func (p pacer) hold(release <-chan struct{}, tick func() error) error {
	t := time.NewTicker(holdPingInterval)
	defer t.Stop()
	for {
		select {
		case <-release:
			return nil
		case <-p.ctx.Done():
			return errCut
		case <-p.closing:
			return errCut
		case <-t.C:
			if tick != nil {
				if err := tick(); err != nil {
					return err
				}
			}
		}
	}
}

// sseWriter writes server-sent events, one flush per event.
type sseWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	pace  pacer
	delay time.Duration
	// deltaSent is told the text of each text delta as it is sent, just before its bytes are
	// written (Response.DeltaSent).
	deltaSent func(text string)
}

// send writes one event after the per-event delay.
func (s *sseWriter) send(event string, data any) error {
	if err := s.pace.sleep(s.delay); err != nil {
		return err
	}
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("marshalling %s event: %w", event, err)
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return fmt.Errorf("writing %s event: %w", event, err)
	}
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("flushing %s event: %w", event, err)
	}
	return nil
}

func (s *sseWriter) ping() error {
	return s.send("ping", map[string]any{"type": "ping"})
}

// streamAnswer is everything needed to stream one message.
type streamAnswer struct {
	id     string
	model  string
	blocks []servedBlock
	resp   Response
	usage  Usage
}

// errDisconnect asks the handler to drop the connection.
var errDisconnect = errors.New("injected disconnect")

// streamed is what a stream reported before it ended.
type streamed struct {
	started   bool  // message_start was sent
	usage     Usage // the last usage sent
	blocks    int   // blocks sent whole
	completed bool  // message_stop was sent
	errEvent  bool  // an injected error event was sent
}

// cutPoint is where a stream stops early: after blocks complete blocks, or,
// with deltas > 0, inside the next block after that many deltas.
type cutPoint struct {
	on     bool
	blocks int
	deltas int
}

// at reports whether the cut comes before block i (between blocks), and the
// number of deltas of block i to send before a cut inside it (-1: none).
func (c cutPoint) at(i, nblocks int) (between bool, inside int) {
	if !c.on {
		return false, -1
	}
	at := min(c.blocks, nblocks)
	if i != at {
		return false, -1
	}
	if c.deltas > 0 && i < nblocks {
		return false, c.deltas
	}
	return true, -1
}

// streamMessage writes a as the API's event sequence: message_start, ping,
// per block content_block_start / content_block_delta… / content_block_stop
// followed by a ping, then message_delta and message_stop — or an error
// event, a dropped connection (errDisconnect) or a hold, where the Response
// asks for them, between blocks or inside one.
func streamMessage(s *sseWriter, a streamAnswer) (streamed, error) {
	var out streamed
	for _, step := range []func(*sseWriter, streamAnswer, *streamed) error{startStream, streamBlocks, endStream} {
		if err := step(s, a, &out); err != nil || out.errEvent {
			return out, err
		}
	}
	return out, nil
}

// startStream sends the stream's headers, message_start and a ping.
func startStream(s *sseWriter, a streamAnswer, out *streamed) error {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	if err := s.rc.Flush(); err != nil {
		return fmt.Errorf("flushing headers: %w", err)
	}
	startUsage := a.usage
	startUsage.OutputTokens = min(1, a.usage.OutputTokens)
	err := s.send("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id":            a.id,
			"type":          "message",
			"role":          "assistant",
			"model":         a.model,
			"content":       []any{},
			"stop_reason":   nil,
			"stop_sequence": nil,
			"usage":         startUsage,
		},
	})
	if err != nil {
		return err
	}
	out.started, out.usage = true, startUsage
	return s.ping()
}

// streamBlocks sends each block whole, or stops where the Response asks: an error event (which
// sets out.errEvent), a dropped connection (errDisconnect) or a hold, between blocks or inside
// one.
func streamBlocks(s *sseWriter, a streamAnswer, out *streamed) error {
	r := a.resp
	errEvent := func() error {
		err := s.send("error", newAPIError(0, streamErrorType(r), r.ErrorMessage, ""))
		out.errEvent = err == nil
		return err
	}
	failure := cutPoint{on: r.StreamError, blocks: r.StreamErrorAfter, deltas: r.StreamErrorDeltas}
	drop := cutPoint{on: r.Disconnect, blocks: r.DisconnectAfter, deltas: r.DisconnectDeltas}
	holdAt := min(r.HoldAfter, len(a.blocks))
	for i := 0; i <= len(a.blocks); i++ {
		if r.Hold != nil && i == holdAt {
			if err := s.pace.hold(r.Hold, s.ping); err != nil {
				return err
			}
		}
		if between, _ := failure.at(i, len(a.blocks)); between {
			return errEvent()
		}
		if between, _ := drop.at(i, len(a.blocks)); between {
			return errDisconnect
		}
		if i == len(a.blocks) {
			break
		}
		if _, n := failure.at(i, len(a.blocks)); n > 0 {
			if err := streamPartialBlock(s, i, a.blocks[i], n); err != nil {
				return err
			}
			return errEvent()
		}
		if _, n := drop.at(i, len(a.blocks)); n > 0 {
			if err := streamPartialBlock(s, i, a.blocks[i], n); err != nil {
				return err
			}
			return errDisconnect
		}
		if err := streamBlock(s, i, a.blocks[i]); err != nil {
			return err
		}
		out.blocks++
	}
	return nil
}

// endStream sends message_delta with the final usage, and message_stop.
func endStream(s *sseWriter, a streamAnswer, out *streamed) error {
	err := s.send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": a.resp.stopReason(), "stop_sequence": nil},
		"usage": a.usage,
	})
	if err != nil {
		return err
	}
	out.usage = a.usage
	if err := s.send("message_stop", map[string]any{"type": "message_stop"}); err != nil {
		return err
	}
	out.completed = true
	return nil
}

// streamBlock writes the start, delta and stop events of block i, then a
// ping.
func streamBlock(s *sseWriter, i int, b servedBlock) error {
	err := s.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b.start()})
	if err != nil {
		return err
	}
	for _, d := range b.deltas() {
		// Told before the write: a reader that sees the delta can never have seen it before the
		// witness noted it as sent.
		if s.deltaSent != nil && b.Type == "text" {
			text, _ := d["text"].(string)
			s.deltaSent(text)
		}
		if err := s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}); err != nil {
			return err
		}
	}
	if err := s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}); err != nil {
		return err
	}
	return s.ping()
}

// streamPartialBlock writes the start of block i and its first n delta
// events (at most all of them), and no stop.
func streamPartialBlock(s *sseWriter, i int, b servedBlock, n int) error {
	err := s.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b.start()})
	if err != nil {
		return err
	}
	deltas := b.deltas()
	for _, d := range deltas[:min(n, len(deltas))] {
		if err := s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}); err != nil {
			return err
		}
	}
	return nil
}

// streamErrorType is the error type of r's stream error: overloaded_error
// unless set.
func streamErrorType(r Response) string {
	if r.ErrorType == "" {
		return "overloaded_error"
	}
	return r.ErrorType
}
