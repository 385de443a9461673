package streamjson

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/drover-run/drover/events"
)

func TestNormalizeCarriesOnAfterMalformedLines(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200<<10) // longer than any reader buffer
	in := strings.Join([]string{
		initLine(sess),
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"half`, // cut short
		`[1,2,3]`,
		``,
		assistantLine("msg_1", "u1", "", textBlock(big)),
		"not json at all",
		resultLine("r1", big, 0.01, 0.01, "") + "\r",
	}, "\n") // no final newline
	var out bytes.Buffer
	if err := Normalize(strings.NewReader(in), &out); err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	evs := parseEvents(t, out.Bytes())
	var protocol []string
	var text string
	for _, ev := range evs {
		switch ev.Type {
		case events.TypeError:
			if ev.Error.Kind != events.ErrorProtocol {
				t.Errorf("unexpected error %+v", ev.Error)
			}
			protocol = append(protocol, ev.Error.Message)
		case events.TypeMessageChunk:
			text += ev.Text
		}
	}
	if len(protocol) != 3 || !strings.Contains(protocol[0], "line 2") || !strings.Contains(protocol[1], "line 3") || !strings.Contains(protocol[2], "line 6") {
		t.Errorf("protocol errors %q, want lines 2, 3 and 6", protocol)
	}
	if text != big {
		t.Errorf("the long text arrived %d bytes long, want %d (once)", len(text), len(big))
	}
	if last := evs[len(evs)-1]; last.Type != events.TypeComplete || last.Data.CostUSD != 0.01 {
		t.Errorf("last event %+v", last)
	}
}

func TestNormalizeDoesNotEscapeHTML(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := Normalize(strings.NewReader(assistantLine("m", "u", "", toolUseBlock("t1", "Bash", `{"command":"a > b && c"}`))), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "a > b && c") {
		t.Errorf("output: %s", out.String())
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return len(p), nil
}

func TestNormalizeReportsIOErrors(t *testing.T) {
	t.Parallel()
	raw := strings.Repeat(assistantLine("msg_1", "u1", "", textBlock(strings.Repeat("y", 1000)))+"\n", 200)
	err := Normalize(strings.NewReader(raw), &failingWriter{n: 1})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("write failure: %v", err)
	}
	err = Normalize(iotest.TimeoutReader(strings.NewReader(raw)), &bytes.Buffer{})
	if !errors.Is(err, iotest.ErrTimeout) {
		t.Errorf("read failure: %v", err)
	}
}
