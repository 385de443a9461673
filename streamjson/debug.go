package streamjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/drover-run/drover/events"
)

// SecretEnv lists the environment variables of the CLI whose values are credentials: a caller
// passes their values in DebugConfig.Secrets, and debug capture never writes them.
var SecretEnv = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

// secretPattern matches Anthropic credentials by their shape.
var secretPattern = regexp.MustCompile(`sk-ant-[A-Za-z0-9_\-]{4,}`)

// secretPrefix starts every match of secretPattern: lines without it skip the regular expression.
var secretPrefix = []byte("sk-ant-")

const redacted = "[REDACTED]"

// DebugConfig configures a DebugCapture.
type DebugConfig struct {
	// Dir is where the files go. Defaults to the working directory.
	Dir string
	// AgentID names the files: raw-streamjson-<AgentID>.jsonl and
	// normalized-streamjson-<AgentID>.jsonl. Characters other than letters, digits, '.', '_'
	// and '-' become '_'. Required.
	AgentID string
	// Secrets are values never to write (an API key given to the CLI, the values of SecretEnv
	// in its environment). Anything shaped like an Anthropic key is always redacted too.
	Secrets []string
	// Logger reports write failures. Nil means silent.
	Logger *slog.Logger
}

func (c DebugConfig) withDefaults() DebugConfig {
	if c.Dir == "" {
		c.Dir = "."
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c DebugConfig) validate() error {
	if c.AgentID == "" {
		return errors.New("debug capture: AgentID is required")
	}
	return nil
}

// DebugCapture writes the CLI's raw stdout lines and the adapter's events to two JSONL files,
// for side-by-side reading. A nil *DebugCapture does nothing, so callers can hold one
// unconditionally. It is safe for concurrent use.
type DebugCapture struct {
	log     *slog.Logger
	secrets [][]byte

	mu         sync.Mutex
	raw        *os.File
	normalized *os.File
	failed     bool
	buf        []byte // the line being written and its newline, reused
}

// OpenDebugCapture creates (or appends to) the two capture files in cfg.Dir.
func OpenDebugCapture(cfg DebugConfig) (*DebugCapture, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	id := sanitizeID(cfg.AgentID)
	open := func(prefix string) (*os.File, error) {
		name := filepath.Join(cfg.Dir, prefix+"-streamjson-"+id+".jsonl")
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("opening debug capture: %w", err)
		}
		return f, nil
	}
	raw, err := open("raw")
	if err != nil {
		return nil, err
	}
	normalized, err := open("normalized")
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	d := &DebugCapture{log: cfg.Logger, raw: raw, normalized: normalized}
	for _, s := range cfg.Secrets {
		d.addSecret(s)
	}
	return d, nil
}

func (d *DebugCapture) addSecret(s string) {
	// Very short values would redact ordinary text; they are not credentials anyway.
	if len(s) >= 8 {
		d.secrets = append(d.secrets, []byte(s))
	}
}

func sanitizeID(id string) string {
	b := []byte(id)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

// redact replaces every secret in line. It returns line itself when there is none.
func (d *DebugCapture) redact(line []byte) []byte {
	for _, s := range d.secrets {
		if bytes.Contains(line, s) {
			line = bytes.ReplaceAll(line, s, []byte(redacted))
		}
	}
	if bytes.Contains(line, secretPrefix) && secretPattern.Match(line) {
		line = secretPattern.ReplaceAll(line, []byte(redacted))
	}
	return line
}

// RawLine records one stdout line of the CLI verbatim (secrets redacted). It has the shape of a
// raw-line tap.
func (d *DebugCapture) RawLine(line []byte) {
	if d == nil {
		return
	}
	d.write(d.raw, bytes.TrimRight(line, "\r\n"))
}

// Event records one normalized event.
func (d *DebugCapture) Event(ev events.AgentEvent) {
	if d == nil {
		return
	}
	b, err := json.Marshal(ev)
	if err != nil {
		d.log.Warn("debug capture: encoding event", "type", ev.Type, "error", err)
		return
	}
	d.write(d.normalized, b)
}

// Sink wraps next so that every event is also recorded. With a nil capture it returns next.
func (d *DebugCapture) Sink(next Sink) Sink {
	if d == nil {
		return next
	}
	return SinkFunc(func(ev events.AgentEvent) {
		d.Event(ev)
		if next != nil {
			next.Emit(ev)
		}
	})
}

func (d *DebugCapture) write(f *os.File, line []byte) {
	line = d.redact(line)
	d.mu.Lock()
	defer d.mu.Unlock()
	if f == nil || d.failed {
		return
	}
	// One write per line, so that a line is never split; the buffer is reused, and dropped after
	// a very long line so that one tool result does not pin its size.
	d.buf = append(append(d.buf[:0], line...), '\n')
	_, err := f.Write(d.buf)
	if cap(d.buf) > 1<<20 {
		d.buf = nil
	}
	if err != nil {
		// One warning, then the capture goes quiet: it must never disturb the session.
		d.failed = true
		d.log.Warn("debug capture: writing failed, capture stopped", "error", err)
	}
}

// Close closes both files.
func (d *DebugCapture) Close() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.raw == nil {
		return nil
	}
	err := errors.Join(d.raw.Close(), d.normalized.Close())
	d.raw, d.normalized = nil, nil
	if err != nil {
		return fmt.Errorf("closing debug capture: %w", err)
	}
	return nil
}
