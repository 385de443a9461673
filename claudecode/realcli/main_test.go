package realcli

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/clitest"
)

// TestMain fails the run if a goroutine (a client reader, a handler, a process waiter, the fake's
// server) outlives the tests. Started by the CLI as an MCP server (mcpServerEnv), the binary serves
// MCP instead.
func TestMain(m *testing.M) {
	if os.Getenv(mcpServerEnv) == "1" {
		serveMCP(os.Stdin, os.Stdout)
		return
	}
	goleak.VerifyTestMain(m)
}

var update = flag.Bool("update", false, "rewrite the recorded transcripts in ../testdata/transcripts")

// transcriptDir is where the recorded transcripts live.
var transcriptDir = filepath.Join("..", "testdata", "transcripts")

// guard bounds a whole test against a hung CLI. It is a safety net, not an assertion.
const guard = 3 * time.Minute

// testContext returns a context for one test, ended at cleanup or after guard.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	t.Cleanup(cancel)
	return ctx
}

// start makes a harness whose client logs go to t.
func start(t *testing.T, opts clitest.Options) *clitest.Harness {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return clitest.New(t, opts)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// record stops the CLI and, with -update, writes its transcript as name.
func record(t *testing.T, h *clitest.Harness, name string) {
	t.Helper()
	ctx := testContext(t)
	_ = h.Stop(ctx)
	if !*update {
		return
	}
	if err := os.MkdirAll(transcriptDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.WriteTranscript(transcriptDir, name); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s.jsonl (%d lines) and %s.stdin.jsonl (%d lines)", name, len(h.Stdout()), name, len(h.Stdin()))
}

// recordConfig writes, with -update, the adapter configuration beside a transcript
// (<name>.config.json, read by the streamjson golden tests).
func recordConfig(t *testing.T, name string, cfg any) {
	t.Helper()
	if !*update {
		return
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(transcriptDir, name+".config.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// result returns the result of a turn's messages (the last message), failing if there is none.
func result(t *testing.T, msgs []claudecode.Message) *claudecode.ResultMessage {
	t.Helper()
	if len(msgs) > 0 {
		if r, ok := msgs[len(msgs)-1].(*claudecode.ResultMessage); ok {
			return r
		}
	}
	t.Fatalf("turn without a result (%d messages)", len(msgs))
	return nil
}

// ofType returns the messages of msgs whose dynamic type is T.
func ofType[T claudecode.Message](msgs []claudecode.Message) []T {
	var out []T
	for _, m := range msgs {
		if v, ok := m.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// controlRequests returns the CLI's control requests of one subtype in msgs.
func controlRequests(msgs []claudecode.Message, subtype string) []*claudecode.ControlRequest {
	var out []*claudecode.ControlRequest
	for _, r := range ofType[*claudecode.ControlRequest](msgs) {
		if r.Subtype == subtype {
			out = append(out, r)
		}
	}
	return out
}

// index returns the position of the first message in msgs satisfying match, or -1.
func index(msgs []claudecode.Message, match func(claudecode.Message) bool) int {
	for i, m := range msgs {
		if match(m) {
			return i
		}
	}
	return -1
}

// assistantBlocks returns the content blocks of the main agent's assistant frames in msgs.
func assistantBlocks(msgs []claudecode.Message) []claudecode.ContentBlock {
	var out []claudecode.ContentBlock
	for _, a := range ofType[*claudecode.AssistantMessage](msgs) {
		if a.ParentToolUseID == "" {
			out = append(out, a.Message.Content...)
		}
	}
	return out
}

// toolResultFrames returns the tool_result blocks of the user frames in msgs.
func toolResultFrames(msgs []claudecode.Message) []claudecode.ContentBlock {
	var out []claudecode.ContentBlock
	for _, u := range ofType[*claudecode.UserMessage](msgs) {
		for _, b := range u.Message.Content.Blocks {
			if b.Type == claudecode.BlockToolResult {
				out = append(out, b)
			}
		}
	}
	return out
}

// finish stops the CLI and returns its exit error (nil for exit 0).
func finish(t *testing.T, h *clitest.Harness) error {
	t.Helper()
	began := time.Now()
	err := h.Stop(testContext(t))
	t.Logf("stop (stdin closed to exit): %v, %v", time.Since(began), err)
	return err
}

// roles renders a request's messages as role:blocktypes, for logs.
func roles(r offlinemodel.Request) string {
	var parts []string
	for _, m := range r.Messages {
		parts = append(parts, m.Role+":"+strings.Join(m.BlockTypes(), "+"))
	}
	return strings.Join(parts, " ")
}
