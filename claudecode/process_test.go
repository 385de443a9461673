package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/procstat"
)

// quick makes Stop and the drain fast for scripts that will not exit by themselves.
var quick = ProcessConfig{StopTimeout: 50 * time.Millisecond, TermTimeout: 200 * time.Millisecond, DrainTimeout: 200 * time.Millisecond}

func startSh(t *testing.T, ctx context.Context, script string, cfg ProcessConfig) *Process {
	t.Helper()
	cfg.Client.Logger = testLogger(t)
	p, err := Start(ctx, exec.Command("/bin/sh", "-c", script), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// gone reports whether pid no longer runs (absent, or a zombie nobody reaped yet).
func gone(pid int) bool {
	s := procstat.State(pid)
	return s == "" || s == "Z"
}

// eventually waits for cond: the kernel delivers SIGKILL asynchronously.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never happened", what)
}

// pidLine reads the {"type":"pid","pid":N} line a script printed.
func pidLine(t *testing.T, p *Process) int {
	t.Helper()
	m := recv(t, p)
	var v struct{ Pid int }
	if err := json.Unmarshal(m.Raw(), &v); err != nil || v.Pid == 0 {
		t.Fatalf("expected a pid line, got %s", m.Raw())
	}
	return v.Pid
}

func TestProcessBuildStartEcho(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "fake-claude")
	// The fake CLI reports its argv and environment on stderr, then echoes stdin.
	body := "#!/bin/sh\nfor a in \"$@\"; do printf 'arg:%s\\n' \"$a\" >&2; done\n" +
		"printf 'key:%s\\n' \"$ANTHROPIC_API_KEY\" >&2\nprintf 'pwd:%s\\n' \"$(pwd)\" >&2\nexec cat\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	c := Command{Path: script, Dir: dir, APIKey: testSecret, Env: []string{"PATH=/usr/bin:/bin"},
		AppendSystemPrompt: `it's "quoted" $HOME; exit 3`}
	ctx := waitCtx(t)
	cmd, err := c.Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Start(ctx, cmd, ProcessConfig{Client: ClientConfig{Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() <= 0 {
		t.Fatalf("Pid() = %d", p.Pid())
	}
	if err := p.Client().SendUser(ctx, Prompt{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	u, ok := recv(t, p).(*UserMessage)
	if !ok || u.Message.Content.String() != "hello" {
		t.Fatalf("echo = %+v", u)
	}
	if err := p.Client().CloseInput(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Recv(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv at the end: %v, want io.EOF", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	stderr := p.Stderr()
	for _, want := range []string{"arg:-p", "arg:--verbose", `arg:--append-system-prompt=it's "quoted" $HOME; exit 3`,
		"key:" + Redacted, "pwd:" + dir} {
		if !slices.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
	for _, l := range stderr {
		if strings.Contains(l, testSecret) {
			t.Errorf("the API key reached the stderr ring: %q", l)
		}
	}
	if err := p.Stop(ctx); err != nil {
		t.Errorf("Stop after a clean exit: %v", err)
	}
}

func TestProcessExitError(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p := startSh(t, ctx, `printf '\033[1;31mfatal:\033[0m boom\r\n' >&2; printf '\033]0;title\007second\n' >&2; exit 3`, ProcessConfig{})
	_, err := p.Recv(ctx)
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Recv: %v (%T), want *ExitError", err, err)
	}
	if ee.Code != 3 || ee.Signal != 0 || !slices.Equal(ee.Stderr, []string{"fatal: boom", "second"}) {
		t.Errorf("ExitError = %+v", ee)
	}
	if !strings.Contains(ee.Error(), "code 3") || !strings.Contains(ee.Error(), "second") {
		t.Errorf("message = %q", ee.Error())
	}
	if err2 := p.Wait(ctx); err2 != err {
		t.Errorf("Wait = %v, want the same error as Recv", err2)
	}
	var xe *exec.ExitError
	if !errors.As(err, &xe) {
		t.Errorf("ExitError does not unwrap to *exec.ExitError: %v", err)
	}
}

func TestProcessResumeRejected(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	for _, msg := range []string{"No message found with message.uuid of: 9999", "No conversation found with session ID: 1111"} {
		p := startSh(t, ctx, `echo '{"type":"result","subtype":"error_during_execution","is_error":true}'; echo '`+msg+`' >&2; exit 1`, ProcessConfig{})
		if m := recv(t, p); m.Type() != TypeResult {
			t.Errorf("first message = %T", m)
		}
		err := p.Wait(ctx)
		var rr *ResumeRejectedError
		var ee *ExitError
		if !errors.As(err, &rr) || rr.Reason != msg || !errors.As(err, &ee) || ee.Code != 1 {
			t.Errorf("Wait = %v, want ResumeRejectedError wrapping ExitError", err)
		}
	}
}

func TestProcessStopClosesStdin(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p := startSh(t, ctx, `cat >/dev/null; echo bye >&2; exit 0`, ProcessConfig{})
	if err := p.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !slices.Equal(p.Stderr(), []string{"bye"}) {
		t.Errorf("stderr = %q: the script did not end through stdin EOF", p.Stderr())
	}
	if err := p.Stop(ctx); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestProcessStopTerm(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p := startSh(t, ctx, `trap 'exit 7' TERM; while :; do sleep 0.05; done`, quick)
	var ee *ExitError
	if err := p.Stop(ctx); !errors.As(err, &ee) || ee.Code != 7 {
		t.Fatalf("Stop: %v, want exit 7 from the TERM trap", err)
	}
}

func TestProcessStopKill(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p := startSh(t, ctx, `trap '' TERM; echo '{"type":"ready"}'; while :; do sleep 0.05; done`, quick)
	recv(t, p) // the trap is set
	var ee *ExitError
	if err := p.Stop(ctx); !errors.As(err, &ee) || ee.Signal != syscall.SIGKILL || ee.Code != -1 {
		t.Fatalf("Stop: %v, want killed by SIGKILL", err)
	}
}

func TestProcessStopKillsGrandchildren(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p := startSh(t, ctx, `sleep 100 & echo "{\"type\":\"pid\",\"pid\":$!}"; wait`, quick)
	pid := pidLine(t, p)
	if gone(pid) {
		t.Fatal("grandchild not running")
	}
	if err := p.Stop(ctx); err == nil {
		t.Error("Stop returned nil for a shell killed by a signal")
	}
	eventually(t, "grandchild exit", func() bool { return gone(pid) })
}

// TestProcessExitKillsLeftovers: the CLI exits by itself while a background grandchild still holds its
// stdout; the grandchild is killed and the stream ends.
func TestProcessExitKillsLeftovers(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p := startSh(t, ctx, `sleep 100 & echo "{\"type\":\"pid\",\"pid\":$!}"; exit 0`, ProcessConfig{})
	pid := pidLine(t, p)
	if _, err := p.Recv(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("Recv: %v, want io.EOF", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	eventually(t, "grandchild exit", func() bool { return gone(pid) })
}

// TestProcessEscapedHolder: a process that left the group keeps stdout open; Wait still returns.
func TestProcessEscapedHolder(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p := startSh(t, ctx, `setsid sleep 100 & echo "{\"type\":\"pid\",\"pid\":$!}"; exit 0`, quick)
	pid := pidLine(t, p)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := p.Recv(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("Recv after exit: %v, want io.EOF", err)
	}
}

func TestProcessContextCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	p := startSh(t, ctx, `trap '' TERM; sleep 100 & echo "{\"type\":\"pid\",\"pid\":$!}"; wait`, ProcessConfig{})
	pid := pidLine(t, p)
	cancel()
	wctx := waitCtx(t)
	var ee *ExitError
	if err := p.Wait(wctx); !errors.As(err, &ee) || ee.Signal != syscall.SIGKILL {
		t.Fatalf("Wait after cancel: %v, want killed by SIGKILL", err)
	}
	eventually(t, "grandchild exit", func() bool { return gone(pid) })

	// A command built with a context is killed through cmd.Cancel as well.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cmd, err := (&Command{Path: "/bin/sleep", ExtraArgs: []string{"100"}}).Build(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Args = []string{"sleep", "100"} // sleep does not take the CLI's flags
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cancel2()
	if err := cmd.Wait(); err == nil {
		t.Error("cancelled command exited cleanly")
	}
}

func TestProcessStderrBounds(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p := startSh(t, ctx, `i=0; while [ $i -lt 500 ]; do echo "line $i" >&2; i=$((i+1)); done
head -c 100000 /dev/zero | tr '\0' x >&2; echo >&2; echo last >&2`, ProcessConfig{StderrLines: 10, StderrBytes: 8000})
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	got := p.Stderr()
	size := 0
	for _, l := range got {
		size += len(l)
		if len(l) > maxStderrLine {
			t.Errorf("a %d-byte line was kept", len(l))
		}
	}
	if len(got) > 10 || size > 8000 || got[len(got)-1] != "last" {
		t.Errorf("%d lines, %d bytes, last %q", len(got), size, got[len(got)-1])
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := Start(ctx, exec.Command("/nonexistent/claude"), ProcessConfig{}); err == nil || !strings.HasPrefix(err.Error(), "starting claude") {
		t.Errorf("missing binary: %v", err)
	}
	c := exec.Command("/bin/true")
	c.Stdout = io.Discard
	if _, err := Start(ctx, c, ProcessConfig{}); err == nil {
		t.Error("a command with Stdout set was accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Start(cctx, exec.Command("/bin/true"), ProcessConfig{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestStripANSI(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"\x1b[31mred\x1b[0m":              "red",
		"\x1b[2K\x1b[1Gprogress\r":        "progress",
		"\x1b]8;;http://x\x1b\\link":      "link",
		"\x1b]0;title\x07text":            "text",
		"plain [brackets] stay":           "plain [brackets] stay",
		"\x1b(Bcharset":                   "charset",
		"\x1b[?25lhidden cursor\x1b[?25h": "hidden cursor",
	} {
		if got := stripANSI(in); got != want {
			t.Errorf("stripANSI(%q) = %q, want %q", in, got, want)
		}
	}
}
