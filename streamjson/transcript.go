package streamjson

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// Normalize reads a transcript of the CLI's stdout (stream-json, one message per line) from r
// and writes the events an Adapter makes of it to w, one JSON object per line. It assumes partial
// messages may be present (Config.PartialMessages), which is right for transcripts with and
// without them. A malformed line becomes an "error" event of kind "protocol" and the transcript
// goes on; only reading or writing failures are returned.
func Normalize(r io.Reader, w io.Writer) error {
	return NormalizeWith(r, w, Config{PartialMessages: true})
}

// NormalizeWith is Normalize with an adapter configuration (its Sink is replaced).
func NormalizeWith(r io.Reader, w io.Writer, cfg Config) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	var werr error
	cur := new(events.AgentEvent) // reused: encoding a value would copy each event to the heap
	cfg.Sink = SinkFunc(func(ev events.AgentEvent) {
		if werr == nil {
			*cur = ev
			if err := enc.Encode(cur); err != nil {
				werr = fmt.Errorf("writing event: %w", err)
			}
		}
	})
	a, err := New(cfg)
	if err != nil {
		return err
	}
	rd := claudecode.NewReader(r)
	for werr == nil {
		msg, err := rd.ReadMessageView() // the adapter keeps no bytes of a message
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading transcript: %w", err)
		}
		a.Handle(msg)
	}
	a.Abandon("the transcript ends before the turn's result")
	if werr != nil {
		return werr
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}
