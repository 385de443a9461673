package offlinemodel

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// claudeVersion is the pinned CLI version (scripts/tools.sh).
const claudeVersion = "2.1.332"

// claudeBin locates the pinned claude CLI: $DROVER_CLAUDE_BIN, else where
// scripts/tools.sh installs it. It skips the test when neither exists.
func claudeBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DROVER_CLAUDE_BIN"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	root := os.Getenv("DROVER_TOOLS")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "drover", "tools")
	}
	p := filepath.Join(root, "claude-code-"+claudeVersion, "node_modules", "@anthropic-ai", "claude-code-linux-x64", "claude")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Skip("claude CLI not installed: run scripts/tools.sh")
	return ""
}

// cliOptions tune one CLI run.
type cliOptions struct {
	args     []string // extra flags
	env      []string // extra KEY=VALUE, after the defaults (so they win)
	settings string   // settings.json content for CLAUDE_CONFIG_DIR, if any
	root     string   // folder of home, config and work; a new temporary one if empty
}

// cliSession is a running claude CLI in stream-json mode, talking to srv.
type cliSession struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan map[string]any
	seen   []map[string]any
	stderr *strings.Builder
	once   sync.Once
	err    error
}

// startCLI starts the CLI against srv with a fresh HOME and config folder
// and none of the parent's ANTHROPIC_* or CLAUDE_* variables. The process is
// killed at cleanup if still running. The 60 s context is a guard against a
// hung CLI, not an assertion.
func startCLI(t *testing.T, srv *Server, o cliOptions) *cliSession {
	t.Helper()
	bin := claudeBin(t)
	dir := o.root
	if dir == "" {
		dir = t.TempDir()
	}
	home, cfg, work := filepath.Join(dir, "home"), filepath.Join(dir, "config"), filepath.Join(dir, "work")
	for _, d := range []string{home, cfg, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if o.settings != "" {
		if err := os.WriteFile(filepath.Join(cfg, "settings.json"), []byte(o.settings), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	args := append([]string{"-p", "--output-format=stream-json", "--input-format=stream-json", "--verbose"}, o.args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = work
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"CLAUDE_CONFIG_DIR=" + cfg,
		"ANTHROPIC_BASE_URL=" + srv.URL(),
		"ANTHROPIC_API_KEY=sk-ant-test-offlinemodel",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
	}, o.env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &cliSession{t: t, cmd: cmd, stdin: stdin, lines: make(chan map[string]any, 256), stderr: &strings.Builder{}}
	cmd.Stderr = s.stderr // read only after Wait
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting claude: %v", err)
	}
	go s.read(stdout)
	t.Cleanup(func() {
		_ = stdin.Close()
		s.wait()
		cancel()
	})
	return s
}

// read delivers stdout lines to s.lines until EOF. Not a bufio.Scanner: a
// line can be larger than its buffer.
func (s *cliSession) read(r io.Reader) {
	defer close(s.lines)
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				s.lines <- m
			} else {
				s.lines <- map[string]any{"type": "unparsable", "raw": string(line)}
			}
		}
		if err != nil {
			return
		}
	}
}

// send writes one JSON line to the CLI's stdin.
func (s *cliSession) send(v any) {
	s.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.stdin.Write(append(b, '\n')); err != nil {
		s.t.Fatalf("writing to claude: %v", err)
	}
}

// prompt sends a user message.
func (s *cliSession) prompt(text string) {
	s.t.Helper()
	s.send(map[string]any{
		"type":               "user",
		"message":            map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": text}}},
		"parent_tool_use_id": nil,
	})
}

// next returns the next stdout message, or nil at EOF.
func (s *cliSession) next() map[string]any {
	m, ok := <-s.lines
	if !ok {
		return nil
	}
	s.seen = append(s.seen, m)
	return m
}

// waitFor reads stdout until a message satisfies match and returns it; it
// fails the test if the CLI ends first.
func (s *cliSession) waitFor(what string, match func(map[string]any) bool) map[string]any {
	s.t.Helper()
	for {
		m := s.next()
		if m == nil {
			s.t.Fatalf("claude ended before %s; exit: %v\nstdout:\n%s\nstderr:\n%s", what, s.wait(), s.dump(), s.stderr.String())
		}
		if match(m) {
			return m
		}
	}
}

// result waits for the next result message.
func (s *cliSession) result() map[string]any {
	s.t.Helper()
	return s.waitFor("a result", func(m map[string]any) bool { return m["type"] == "result" })
}

// finish closes stdin, reads stdout to EOF and returns the exit code.
func (s *cliSession) finish() int {
	s.t.Helper()
	_ = s.stdin.Close()
	for s.next() != nil {
	}
	err := s.wait()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode()
	}
	if err != nil {
		s.t.Fatalf("claude: %v\nstderr:\n%s", err, s.stderr.String())
	}
	return 0
}

// wait waits for the process once, draining stdout so it cannot block.
func (s *cliSession) wait() error {
	s.once.Do(func() {
		go func() {
			for range s.lines {
			}
		}()
		s.err = s.cmd.Wait()
	})
	return s.err
}

// frames returns the messages seen so far of one type (and subtype, if
// given).
func (s *cliSession) frames(typ, subtype string) []map[string]any {
	var out []map[string]any
	for _, m := range s.seen {
		if m["type"] == typ && (subtype == "" || m["subtype"] == subtype) {
			out = append(out, m)
		}
	}
	return out
}

// contentBlocks returns the message.content blocks of stdout messages of one
// type.
func (s *cliSession) contentBlocks(typ string) []map[string]any {
	var out []map[string]any
	for _, m := range s.frames(typ, "") {
		msg, _ := m["message"].(map[string]any)
		blocks, _ := msg["content"].([]any)
		for _, b := range blocks {
			if bm, ok := b.(map[string]any); ok {
				out = append(out, bm)
			}
		}
	}
	return out
}

// dump renders what stdout said so far, for failure messages.
func (s *cliSession) dump() string {
	var b strings.Builder
	for _, m := range s.seen {
		line, _ := json.Marshal(m)
		if len(line) > 600 {
			line = append(line[:600], "…"...)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}
