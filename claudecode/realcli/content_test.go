package realcli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// tinyPNG returns a small PNG image.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 0xd7, G: 0x00, B: 0x42, A: 0xff})
	img.Set(1, 1, color.RGBA{G: 0x80, B: 0xff, A: 0xff})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestImagePrompt: an image block in our prompt reaches the API as an image block with the same
// base64 data, before the prompt's text.
func TestImagePrompt(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(offlinemodel.Reply(offlinemodel.Text("A tiny picture.")))
	pic := tinyPNG(t)
	res := result(t, h.Turn(ctx, claudecode.Prompt{Text: "What is in this image?", Images: []claudecode.Image{{MediaType: "image/png", Data: pic}}}))
	if res.IsError || res.Result != "A tiny picture." {
		t.Fatalf("result: is_error %v result %q", res.IsError, res.Result)
	}
	main := h.Fake.MainRequests()
	if len(main) != 1 {
		t.Fatalf("%d main requests", len(main))
	}
	want := base64.StdEncoding.EncodeToString(pic)
	var found bool
	for _, m := range main[0].Messages {
		if m.Role != "user" {
			continue
		}
		types := m.BlockTypes()
		for i, raw := range m.Content {
			var b struct {
				Type   string `json:"type"`
				Source struct {
					Type      string `json:"type"`
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				} `json:"source"`
			}
			if json.Unmarshal(raw, &b) != nil || b.Type != "image" {
				continue
			}
			found = b.Source.Type == "base64" && b.Source.MediaType == "image/png" && b.Source.Data == want
			if !found {
				t.Errorf("image block sent: %s/%s, data equal %v", b.Source.Type, b.Source.MediaType, b.Source.Data == want)
			}
			if i+1 >= len(types) || !strings.Contains(m.Text(), "What is in this image?") {
				t.Errorf("the prompt text does not follow the image: %v", types)
			}
		}
	}
	if !found {
		t.Errorf("no image block in the request: %s", roles(main[0]))
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "image")
}

// TestThinking: a thinking block arrives as its own assistant frame, with its text and a signature,
// sharing message.id with the text frame that follows.
func TestThinking(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{})
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Thinking("The user wants drover-thought. Think first."), offlinemodel.Text("Thought it through.")),
		offlinemodel.Reply(offlinemodel.Text("Second answer.")),
	)
	msgs := h.RunTurn(ctx, "Think, then answer.")
	if res := result(t, msgs); res.IsError || res.Result != "Thought it through." {
		t.Fatalf("result: is_error %v result %q", res.IsError, res.Result)
	}
	frames := ofType[*claudecode.AssistantMessage](msgs)
	if len(frames) != 2 {
		t.Fatalf("%d assistant frames, want 2 (one block each)", len(frames))
	}
	th, tx := frames[0].Message, frames[1].Message
	if len(th.Content) != 1 || th.Content[0].Type != claudecode.BlockThinking || th.Content[0].Thinking != "The user wants drover-thought. Think first." || th.Content[0].Signature == "" {
		t.Errorf("thinking frame: %+v", th.Content)
	}
	if len(tx.Content) != 1 || tx.Content[0].Type != claudecode.BlockText || th.ID != tx.ID || frames[0].UUID == frames[1].UUID {
		t.Errorf("text frame: %+v (message ids %s %s)", tx.Content, th.ID, tx.ID)
	}
	// On the next turn the CLI sends the thinking block back with its signature.
	h.RunTurn(ctx, "And again.")
	main := h.Fake.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests", len(main))
	}
	var resent bool
	for _, m := range main[1].Messages {
		for _, raw := range m.Content {
			var b claudecode.ContentBlock
			if m.Role == "assistant" && json.Unmarshal(raw, &b) == nil && b.Type == claudecode.BlockThinking {
				resent = b.Signature == th.Content[0].Signature && b.Thinking == th.Content[0].Thinking
			}
		}
	}
	t.Logf("second request: %s", roles(main[1]))
	if !resent {
		t.Errorf("the thinking block was not sent back with its signature")
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "thinking")
}

// partialScript is thinking, text and a Bash call, then a closing text.
func partialScript(h *clitest.Harness) {
	h.Fake.Enqueue(
		offlinemodel.Reply(offlinemodel.Thinking("Plan: run the marker."), offlinemodel.Text("Running the marker."),
			offlinemodel.ToolUseID("toolu_drover_partial", "Bash", map[string]any{"command": bashMarker})),
		offlinemodel.Reply(offlinemodel.Text("The marker says drover-bash-42.")),
	)
}

// TestPartialMessagesOn: with --include-partial-messages the raw API events come as stream_event
// lines (thinking, text and tool-input deltas) before each complete assistant frame; the deltas add
// up to the frames' content.
func TestPartialMessagesOn(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{IncludePartialMessages: true, PermissionMode: claudecode.PermissionBypass}})
	partialScript(h)
	msgs := h.RunTurn(ctx, "Run the marker, with partial messages.")
	if res := result(t, msgs); res.IsError || res.Result != "The marker says drover-bash-42." {
		t.Fatalf("result: is_error %v result %q", res.IsError, res.Result)
	}
	var text, thinking, input strings.Builder
	kinds := map[string]int{}
	for _, e := range ofType[*claudecode.StreamEvent](msgs) {
		kinds[e.Event.Type]++
		if e.Event.Delta == nil {
			continue
		}
		switch e.Event.Delta.Type {
		case "text_delta":
			text.WriteString(e.Event.Delta.Text)
		case "thinking_delta":
			thinking.WriteString(e.Event.Delta.Thinking)
		case "input_json_delta":
			input.WriteString(e.Event.Delta.PartialJSON)
		}
	}
	t.Logf("stream_event kinds: %v; system/status frames: %d", kinds, len(ofType[*claudecode.SystemStatus](msgs)))
	if kinds["message_start"] != 2 || kinds["message_stop"] != 2 {
		t.Errorf("stream_event kinds %v, want 2 message_start and 2 message_stop", kinds)
	}
	if thinking.String() != "Plan: run the marker." {
		t.Errorf("thinking deltas add up to %q", thinking.String())
	}
	if text.String() != "Running the marker."+"The marker says drover-bash-42." {
		t.Errorf("text deltas add up to %q", text.String())
	}
	if inputField(json.RawMessage(input.String()), "command") != bashMarker {
		t.Errorf("input_json deltas add up to %q", input.String())
	}
	// Every complete assistant frame still comes, after the deltas of its block.
	frames := ofType[*claudecode.AssistantMessage](msgs)
	if len(frames) != 4 {
		t.Errorf("%d assistant frames, want 4", len(frames))
	}
	firstDelta := index(msgs, func(m claudecode.Message) bool {
		e, ok := m.(*claudecode.StreamEvent)
		return ok && e.Event.Delta != nil && e.Event.Delta.Type == "text_delta"
	})
	firstText := index(msgs, func(m claudecode.Message) bool {
		a, ok := m.(*claudecode.AssistantMessage)
		return ok && a.Message.Content[0].Type == claudecode.BlockText
	})
	if firstDelta < 0 || firstDelta > firstText {
		t.Errorf("first text_delta at %d, first text frame at %d", firstDelta, firstText)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "partial-on")
}

// TestPartialMessagesOff: without --include-partial-messages the same turn has no stream_event
// line, only the complete frames.
func TestPartialMessagesOff(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	h := start(t, clitest.Options{Command: claudecode.Command{PermissionMode: claudecode.PermissionBypass}})
	partialScript(h)
	msgs := h.RunTurn(ctx, "Run the marker, without partial messages.")
	if res := result(t, msgs); res.IsError || res.Result != "The marker says drover-bash-42." {
		t.Fatalf("result: is_error %v result %q", res.IsError, res.Result)
	}
	if n := len(ofType[*claudecode.StreamEvent](msgs)); n != 0 {
		t.Errorf("%d stream_event lines without --include-partial-messages", n)
	}
	var types []string
	for _, b := range assistantBlocks(msgs) {
		types = append(types, b.Type)
	}
	if strings.Join(types, ",") != "thinking,text,tool_use,text" {
		t.Errorf("assistant blocks %v", types)
	}
	if err := finish(t, h); err != nil {
		t.Errorf("exit: %v", err)
	}
	record(t, h, "partial-off")
}
