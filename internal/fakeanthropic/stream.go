package fakeanthropic

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

// streamMessage writes a as the API's event sequence: message_start, ping,
// per block content_block_start / content_block_delta… / content_block_stop
// followed by a ping, then message_delta and message_stop — or an error
// event, or a hold, where the Response asks for them.
func streamMessage(s *sseWriter, a streamAnswer) error {
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
	if err := s.ping(); err != nil {
		return err
	}

	r := a.resp
	holdAt := min(r.HoldAfter, len(a.blocks))
	failAt := min(r.StreamErrorAfter, len(a.blocks))
	for i := 0; i <= len(a.blocks); i++ {
		if r.Hold != nil && i == holdAt {
			if err := s.pace.hold(r.Hold, s.ping); err != nil {
				return err
			}
		}
		if r.StreamError && i == failAt {
			return s.send("error", newAPIError(0, streamErrorType(r), r.ErrorMessage, ""))
		}
		if i == len(a.blocks) {
			break
		}
		if err := streamBlock(s, i, a.blocks[i]); err != nil {
			return err
		}
	}

	err = s.send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": r.stopReason(), "stop_sequence": nil},
		"usage": a.usage,
	})
	if err != nil {
		return err
	}
	return s.send("message_stop", map[string]any{"type": "message_stop"})
}

// streamBlock writes the start, delta and stop events of block i, then a
// ping.
func streamBlock(s *sseWriter, i int, b servedBlock) error {
	err := s.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": b.start()})
	if err != nil {
		return err
	}
	for _, d := range b.deltas() {
		if err := s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}); err != nil {
			return err
		}
	}
	if err := s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}); err != nil {
		return err
	}
	return s.ping()
}

// streamErrorType is the error type of r's stream error: overloaded_error
// unless set.
func streamErrorType(r Response) string {
	if r.ErrorType == "" {
		return "overloaded_error"
	}
	return r.ErrorType
}
