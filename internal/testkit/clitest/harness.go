package clitest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/internal/tools"
)

// Options configures New. The zero value runs the CLI in its default permission mode with no
// permission prompt tool, no retries and claudecode's default answers to control requests.
type Options struct {
	// Command sets the CLI's flags (PermissionMode, PermissionPromptToolStdio,
	// IncludePartialMessages, MaxTurns, Resume, …). Path, Dir, Env, APIKey, BaseURL and ConfigDir
	// belong to the harness and are overwritten.
	Command claudecode.Command
	// Handler answers the CLI's control requests (can_use_tool, hook_callback). Nil answers as
	// claudecode does without a handler: tools denied, hooks without opinion. Answers are recorded.
	Handler claudecode.Handler
	// MaxRetries is CLAUDE_CODE_MAX_RETRIES. Defaults to 0: an API error ends the turn at once.
	MaxRetries int
	// OAuth gives the CLI a fake claude.ai OAuth token (CLAUDE_CODE_OAUTH_TOKEN) instead of an API
	// key: it then sends "Authorization: Bearer", reads the anthropic-ratelimit-unified-* headers,
	// prints rate_limit_event frames, and takes a usage limit as final (no retry).
	OAuth bool
	// Env holds extra KEY=VALUE pairs for the CLI, placed after the harness's own so they win.
	Env []string
	// Fake configures the fake Messages API.
	Fake offlinemodel.Config
	// Lifetime bounds the life of each CLI process, as a guard against a hung CLI (not an
	// assertion). Defaults to 3 minutes.
	Lifetime time.Duration
	// Logger receives the claudecode client's logs. Nil means silent.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Lifetime <= 0 {
		o.Lifetime = 3 * time.Minute
	}
	return o
}

func (o Options) validate() error {
	if o.MaxRetries < 0 {
		return fmt.Errorf("negative MaxRetries %d", o.MaxRetries)
	}
	for _, kv := range o.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("environment entry %q is not KEY=VALUE", kv)
		}
	}
	return nil
}

// Harness is one offline CLI session: the fake API, the session's directories, and the CLI
// process currently serving it (a new one after Resume or Restart).
type Harness struct {
	// Fake is the fake Messages API the CLI talks to. Script it with Enqueue before a turn.
	Fake *offlinemodel.Server
	// Root holds Home, ConfigDir, WorkDir and TmpDir; it is replaced by RootPlaceholder in written
	// transcripts.
	Root      string
	Home      string
	ConfigDir string
	// WorkDir is the CLI's working directory, where its tools run.
	WorkDir string
	TmpDir  string

	tb     testing.TB
	opts   Options
	bin    string
	apiKey string // the fake credential: an API key, or the OAuth token with Options.OAuth

	reqMu sync.Mutex // one of our control requests at a time, so that its id can be learned

	mu     sync.Mutex
	cur    *run
	runs   []*run
	closed bool
}

// run is one CLI process and what went through its stdio.
type run struct {
	cmd    claudecode.Command
	proc   *claudecode.Process
	cancel context.CancelFunc
	rec    *recorder
	start  time.Time
	// stopErr is what Stop returned, valid once stopped.
	stopped bool
	stopErr error
}

// New starts the fake API and a CLI process with opts. It skips the test when the CLI is not
// installed. Everything is torn down when the test ends; Close does it earlier.
func New(tb testing.TB, opts Options) *Harness {
	tb.Helper()
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		tb.Fatalf("clitest options: %v", err)
	}
	bin, err := testtools.ClaudeBin()
	if errors.Is(err, tools.ErrNotInstalled) {
		tb.Skipf("claude CLI is absent (%v): run scripts/tools.sh", err)
	}
	if err != nil {
		tb.Fatalf("locating claude: %v", err)
	}

	root := tb.TempDir()
	h := &Harness{
		Root:      root,
		Home:      filepath.Join(root, "home"),
		ConfigDir: filepath.Join(root, "config"),
		WorkDir:   filepath.Join(root, "dir"),
		TmpDir:    filepath.Join(root, "tmp"),
		tb:        tb,
		opts:      opts,
		bin:       bin,
		apiKey:    "sk-ant-test-clitest-" + randomHex(12),
	}
	if opts.OAuth {
		h.apiKey = "sk-ant-oat01-clitest-" + randomHex(12)
	}
	for _, d := range []string{h.Home, h.ConfigDir, h.WorkDir, h.TmpDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatalf("making %s: %v", d, err)
		}
	}
	h.Fake, err = offlinemodel.Start(opts.Fake)
	if err != nil {
		tb.Fatalf("starting the fake Messages API: %v", err)
	}
	// Registered after TempDir, so it runs before the directories are removed.
	tb.Cleanup(h.Close)
	h.start(opts.Command)
	return h
}

// APIKey returns the fake credential the CLI was given (the API key, or the OAuth token with
// Options.OAuth), for tests that look for leaks.
func (h *Harness) APIKey() string { return h.apiKey }

// Account returns the fake Messages API's account of the CLI's credential, for the fake's account
// limits (offlinemodel.Server.SetLimit) and request log.
func (h *Harness) Account() offlinemodel.Account {
	if h.opts.OAuth {
		return offlinemodel.OAuthAccount(h.apiKey)
	}
	return offlinemodel.APIKeyAccount(h.apiKey)
}

// Process returns the running CLI process.
func (h *Harness) Process() *claudecode.Process { return h.current().proc }

// Command returns the command of the current process, as started.
func (h *Harness) Command() claudecode.Command { return h.current().cmd }

// Started returns when the current process was started.
func (h *Harness) Started() time.Time { return h.current().start }

// ColdStart returns the time from the start of the current process to its first system/init line,
// or 0 if none arrived yet. The CLI prints system/init when a turn starts, so this includes the
// wait for the first prompt: send it right after New.
func (h *Harness) ColdStart() time.Duration {
	r := h.current()
	at := r.rec.firstInit()
	if at.IsZero() {
		return 0
	}
	return at.Sub(r.start)
}

func (h *Harness) current() *run {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur
}

// environ is the CLI's whole environment: nothing of ours but PATH.
func (h *Harness) environ() []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + h.Home,
		"TMPDIR=" + h.TmpDir,
		"CLAUDE_CODE_MAX_RETRIES=" + strconv.Itoa(h.opts.MaxRetries),
	}
	env = append(env, claudecode.OfflineEnv()...)
	if h.opts.OAuth {
		env = append(env, "CLAUDE_CODE_OAUTH_TOKEN="+h.apiKey)
	}
	return append(env, h.opts.Env...)
}

// start starts a CLI process with the flags of c and makes it current.
func (h *Harness) start(c claudecode.Command) {
	h.tb.Helper()
	c.Path = h.bin
	c.Dir = h.WorkDir
	c.Env = h.environ()
	c.APIKey = h.apiKey
	if h.opts.OAuth {
		c.APIKey = "" // the token is in the environment
	}
	c.BaseURL = h.Fake.URL()
	c.ConfigDir = h.ConfigDir

	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Lifetime)
	cmd, err := c.Build(ctx)
	if err != nil {
		cancel()
		h.tb.Fatalf("building the claude command: %v", err)
	}
	r := &run{cmd: c, cancel: cancel, rec: newRecorder()}
	handler := &recordingHandler{next: h.opts.Handler, rec: r.rec}
	r.start = time.Now()
	proc, err := claudecode.Start(ctx, cmd, claudecode.ProcessConfig{
		Client: claudecode.ClientConfig{Handler: handler, Tap: r.rec.tap, Logger: h.opts.Logger},
	})
	if err != nil {
		cancel()
		h.tb.Fatalf("starting claude: %v", err)
	}
	r.proc = proc
	h.mu.Lock()
	h.cur = r
	h.runs = append(h.runs, r)
	h.mu.Unlock()
}

// Stop ends the current process (close stdin, then signals if it does not exit) and returns what
// claudecode.Process.Stop returned: nil, or an *ExitError (exit 1 when the last result had
// is_error). It fails the test if the process or a member of its group is left. Calling it again
// returns the same result.
func (h *Harness) Stop(ctx context.Context) error {
	h.tb.Helper()
	r := h.current()
	if r.stopped {
		return r.stopErr
	}
	err := r.proc.Stop(ctx)
	r.cancel()
	r.stopped, r.stopErr = true, err
	h.checkGone(r.proc.Pid())
	return err
}

// checkGone fails the test if pid or its process group still exists.
func (h *Harness) checkGone(pid int) {
	h.tb.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		h.tb.Errorf("claude pid %d is still there after Stop (kill 0: %v)", pid, err)
	}
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		h.tb.Errorf("claude process group %d still has members after Stop (kill 0: %v)", pid, err)
	}
}

// Restart stops the current process and starts a new one on the same directories (so it sees the
// same session transcripts) with the flags of c.
func (h *Harness) Restart(ctx context.Context, c claudecode.Command) {
	h.tb.Helper()
	if err := h.Stop(ctx); err != nil {
		h.tb.Logf("previous claude process: %v", err)
	}
	h.start(c)
}

// Resume restarts the CLI with the current flags plus --resume sessionID and, when at is not
// empty, --resume-session-at at.
func (h *Harness) Resume(ctx context.Context, sessionID, at string) {
	h.tb.Helper()
	c := h.Command()
	c.Resume, c.ResumeSessionAt = sessionID, at
	c.SessionID, c.ForkSession = "", false
	h.Restart(ctx, c)
}

// Close stops every process still running, checks none is left and that the credential appears in
// nothing the CLI printed, closes the fake API, and fails the test if the fake refused a request as
// invalid (see offlinemodel.Server.Invalid). It is idempotent and runs at cleanup.
func (h *Harness) Close() {
	h.tb.Helper()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	runs := h.runs
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range runs {
		if !r.stopped {
			r.stopErr = r.proc.Stop(ctx)
			r.stopped = true
			r.cancel()
			h.checkGone(r.proc.Pid())
		}
		for i, line := range r.rec.stdoutLines() {
			if strings.Contains(string(line), h.apiKey) {
				h.tb.Errorf("stdout line %d of claude holds the credential", i+1)
			}
		}
	}
	if err := h.Fake.Close(); err != nil {
		h.tb.Errorf("closing the fake Messages API: %v", err)
	}
	if err := h.Fake.CheckValid(); err != nil {
		h.tb.Error(err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
