package streamjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/drover-run/drover/claudecode"
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

// TestNormalizeKeepsNoMessageBytes: Normalize reads lines without copying them (the Reader reuses
// its buffer and its messages), so the adapter must keep nothing of a message after Handle. Its
// output must equal that of the same transcripts read with owned messages, with tool calls left
// open over many later lines in between, so that a kept byte would have been overwritten.
func TestNormalizeKeepsNoMessageBytes(t *testing.T) {
	t.Parallel()
	filler := strings.Repeat(assistantLine("msg_f", "uf", "", textBlock(strings.Repeat("z", 3000)))+"\n", 40)
	var in strings.Builder
	in.WriteString(initLine(sess) + "\n")
	in.WriteString(assistantLine("msg_1", "u1", "", toolUseBlock("t1", "Bash", `{"command":"echo kept","description":"say"}`)) + "\n")
	in.WriteString(assistantLine("msg_1", "u2", "", toolUseBlock("t2", "Edit", `{"file_path":"/w/a.go","old_string":"a","new_string":"b"}`)) + "\n")
	in.WriteString(filler)
	in.WriteString(resultLine("r1", "done", 0.01, 0.01, "") + "\n") // closes both calls from what was kept
	for _, f := range goldenInputs(t) {
		in.Write(f)
	}

	var view bytes.Buffer
	if err := Normalize(strings.NewReader(in.String()), &view); err != nil {
		t.Fatal(err)
	}
	var owned bytes.Buffer
	enc := json.NewEncoder(&owned)
	enc.SetEscapeHTML(false)
	a, err := New(Config{PartialMessages: true, Sink: SinkFunc(func(ev events.AgentEvent) { _ = enc.Encode(ev) })})
	if err != nil {
		t.Fatal(err)
	}
	rd := claudecode.NewReader(strings.NewReader(in.String()))
	for {
		m, err := rd.ReadMessage()
		if err != nil {
			break
		}
		a.Handle(m)
	}
	a.Abandon("the transcript ends before the turn's result")
	if !bytes.Equal(view.Bytes(), owned.Bytes()) {
		t.Errorf("Normalize differs from the adapter fed owned messages: %s", firstDiff(view.Bytes(), owned.Bytes()))
	}
	if !bytes.Contains(view.Bytes(), []byte("Run `echo kept`")) || !bytes.Contains(view.Bytes(), []byte(`"old_content":"a"`)) {
		t.Errorf("tool calls lost their input:\n%.2000s", view.String())
	}
}

// goldenInputs returns every recorded transcript the golden tests read.
func goldenInputs(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for _, dir := range []string{"testdata/recorded", "../claudecode/testdata/transcripts"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, ".stdin.jsonl") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, append(bytes.TrimRight(b, "\n"), '\n'))
		}
	}
	if len(out) == 0 {
		t.Fatal("no transcripts")
	}
	return out
}
