package streamjson

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the transcripts")

// transcriptConfig is the optional <name>.config.json beside a transcript: how the adapter was
// configured when the transcript was recorded.
type transcriptConfig struct {
	ResumedSessionID  string  `json:"resumed_session_id"`
	PriorTotalCostUSD float64 `json:"prior_total_cost_usd"`
	PartialMessages   *bool   `json:"partial_messages"`
}

type transcript struct {
	name string // golden name
	path string
	cfg  transcriptConfig
}

// transcripts lists the recorded CLI transcripts (stdout, verbatim): the shared ones of package
// claudecode and the adapter's own (prefixed "recorded-"). <name>.stdin.jsonl files beside them
// hold what was written to the CLI and are skipped.
func transcripts(t testing.TB) []transcript {
	t.Helper()
	var out []transcript
	for _, src := range []struct{ glob, prefix string }{
		{"../claudecode/testdata/transcripts/*.jsonl", ""},
		{"testdata/recorded/*.jsonl", "recorded-"},
	} {
		paths, err := filepath.Glob(src.glob)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if strings.HasSuffix(p, ".stdin.jsonl") {
				continue // what was written to the CLI, not its output
			}
			tr := transcript{name: src.prefix + strings.TrimSuffix(filepath.Base(p), ".jsonl"), path: p}
			if b, err := os.ReadFile(strings.TrimSuffix(p, ".jsonl") + ".config.json"); err == nil {
				if err := json.Unmarshal(b, &tr.cfg); err != nil {
					t.Fatalf("%s: config: %v", p, err)
				}
			}
			out = append(out, tr)
		}
	}
	return out
}

func (tr transcript) adapterConfig() Config {
	partial := true
	if tr.cfg.PartialMessages != nil {
		partial = *tr.cfg.PartialMessages
	}
	return Config{ResumedSessionID: tr.cfg.ResumedSessionID, PriorTotalCostUSD: tr.cfg.PriorTotalCostUSD, PartialMessages: partial}
}

// TestGoldenTranscripts normalizes every recorded transcript, checks the invariants that must hold
// for any session, and compares the events with testdata/golden/<name>.events.jsonl (rewritten
// with -update).
func TestGoldenTranscripts(t *testing.T) {
	trs := transcripts(t)
	if len(trs) == 0 {
		t.Fatal("no transcripts found")
	}
	for _, tr := range trs {
		t.Run(tr.name, func(t *testing.T) {
			raw, err := os.ReadFile(tr.path)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := NormalizeWith(bytes.NewReader(raw), &out, tr.adapterConfig()); err != nil {
				t.Fatalf("NormalizeWith: %v", err)
			}
			evs := parseEvents(t, out.Bytes())
			checkInvariants(t, raw, evs, tr.cfg.PriorTotalCostUSD)

			golden := filepath.Join("testdata", "golden", tr.name+".events.jsonl")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./streamjson -run TestGoldenTranscripts -update)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("events differ from %s (run with -update and review the diff):\n%s", golden, firstDiff(out.Bytes(), want))
			}
		})
	}
}

func parseEvents(t testing.TB, b []byte) []events.AgentEvent {
	t.Helper()
	var evs []events.AgentEvent
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var ev events.AgentEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("event %d does not decode: %v\n%s", i+1, err, line)
		}
		evs = append(evs, ev)
	}
	return evs
}

func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + itoa(i+1) + ":\n got: " + gl + "\nwant: " + wl
		}
	}
	return "(no line differs)"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// checkInvariants checks what must hold for the events of any transcript:
//   - one complete per result, and one error per failed result;
//   - every tool_call is closed by exactly one later tool_update, and no tool_update comes
//     without its tool_call;
//   - the text of every model message reaches the events exactly once (no duplicate, no loss),
//     and so does its thinking;
//   - the per-turn costs add up to the CLI's final total_cost_usd;
//   - once the session id is known, every event carries it.
func checkInvariants(t *testing.T, raw []byte, evs []events.AgentEvent, priorCost float64) {
	t.Helper()
	var (
		results, failed int
		total           = priorCost
		wantText        = map[string]string{}
		wantThinking    = map[string]string{}
		mainModel       string
		windows         = map[string]int64{} // context windows per model, from the results
	)
	rd := claudecode.NewReader(bytes.NewReader(raw))
	for {
		msg, err := rd.ReadMessage()
		if err != nil {
			break
		}
		switch m := msg.(type) {
		case *claudecode.ResultMessage:
			results++
			if m.IsError {
				failed++
			}
			total = max(total, m.TotalCostUSD)
			for name, u := range m.ModelUsage {
				if u.ContextWindow > 0 {
					windows[name] = u.ContextWindow
				}
			}
		case *claudecode.SystemInit:
			mainModel = m.Model
		case *claudecode.AssistantMessage:
			if m.IsAPIErrorMessage || (m.Message.Model == syntheticModel && m.Error != "") {
				continue
			}
			for _, b := range m.Message.Content {
				switch b.Type {
				case claudecode.BlockText:
					wantText[m.Message.ID] += b.Text
				case claudecode.BlockThinking:
					wantThinking[m.Message.ID] += b.Thinking
				}
			}
		}
	}

	var completes, errs int
	var cost float64
	gotText, gotThinking := map[string]string{}, map[string]string{}
	open := map[string]bool{}
	closed := map[string]bool{}
	session := ""
	for i, ev := range evs {
		if session == "" {
			session = ev.SessionID
		} else if ev.SessionID == "" {
			t.Errorf("event %d (%s) has no session_id although the session is known", i+1, ev.Type)
		}
		switch ev.Type {
		case events.TypeComplete:
			completes++
			if ev.Data == nil || ev.Data.Completion == nil {
				t.Fatalf("event %d: complete without data", i+1)
			}
			cost += ev.Data.CostUSD
		case events.TypeError:
			if ev.Error != nil && ev.Error.Kind != events.ErrorProtocol {
				errs++
			}
		case events.TypeMessageChunk:
			if ev.MessageID != "" {
				gotText[ev.MessageID] += ev.Text
			}
		case events.TypeReasoning:
			gotThinking[ev.MessageID] += ev.ReasoningText
		case events.TypeToolCall:
			if open[ev.ToolCallID] || closed[ev.ToolCallID] {
				t.Errorf("event %d: second tool_call %s", i+1, ev.ToolCallID)
			}
			open[ev.ToolCallID] = true
		case events.TypeToolUpdate:
			if !open[ev.ToolCallID] {
				t.Errorf("event %d: tool_update %s without an open tool_call", i+1, ev.ToolCallID)
			}
			delete(open, ev.ToolCallID)
			closed[ev.ToolCallID] = true
		}
	}
	if completes != results {
		t.Errorf("%d complete events for %d results", completes, results)
	}
	if errs != failed {
		t.Errorf("%d error events for %d failed results", errs, failed)
	}
	for id := range open {
		t.Errorf("tool_call %s never closed", id)
	}
	for id, want := range wantText {
		if gotText[id] != want {
			t.Errorf("text of message %s:\n got %q\nwant %q", id, gotText[id], want)
		}
	}
	for id, got := range gotText {
		if _, ok := wantText[id]; !ok {
			t.Errorf("text for message %s that the transcript does not have: %q", id, got)
		}
	}
	for id, want := range wantThinking {
		if gotThinking[id] != want {
			t.Errorf("thinking of message %s:\n got %q\nwant %q", id, gotThinking[id], want)
		}
	}
	if math.Abs(priorCost+cost-total) > 1e-9 {
		t.Errorf("per-turn costs %v + prior %v do not add up to the final total %v", cost, priorCost, total)
	}
	// Every context_window event is the main model's window, labelled with it: never a guess,
	// never another model's (a subagent on another model has its own).
	for _, ev := range evs {
		if ev.Type != events.TypeContextWindow {
			continue
		}
		if ev.ContextWindow.Model != mainModel {
			t.Errorf("context_window labelled %q, want the main model %q", ev.ContextWindow.Model, mainModel)
		}
		if w, ok := windows[mainModel]; ok && ev.ContextWindow.Size != w {
			t.Errorf("context_window of size %d, want the main model's %d", ev.ContextWindow.Size, w)
		}
	}
}
