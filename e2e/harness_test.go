package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/internal/devserver"
	"github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/internal/testkit/procstat"
	"github.com/drover-run/drover/internal/testkit/testtools"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/worker"
	"github.com/drover-run/drover/workflows"
)

// suite is shared by every test of the package: one Temporal dev server, one
// database, one drover binary. Tests isolate themselves by task queue.
var suite struct {
	once      sync.Once
	err       error
	temporal  *devserver.Server
	drover    string
	claudeBin string
	dir       string

	binOnce sync.Once
	binErr  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if suite.temporal != nil {
		_ = suite.temporal.Stop()
	}
	stopProduction()
	if suite.dir != "" {
		_ = os.RemoveAll(suite.dir)
	}
	os.Exit(code)
}

// setup starts the shared parts once, or skips when the pinned tools are absent.
func setup(t testing.TB) {
	t.Helper()
	temporalBin, err := testtools.TemporalBin()
	if err != nil {
		t.Skipf("the temporal CLI is not installed (%v): run scripts/tools.sh", err)
	}
	setupBinaries(t)
	suite.once.Do(func() {
		sa := searchAttributes()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		suite.temporal, suite.err = devserver.Start(ctx, devserver.Config{
			Bin: temporalBin, Headless: true, SearchAttributes: sa,
			DBFile: filepath.Join(suite.dir, "temporal.db"),
		})
	})
	if suite.err != nil {
		t.Fatal(suite.err)
	}
}

// setupBinaries finds the Claude CLI and builds drover once, or skips when the CLI is absent.
func setupBinaries(t testing.TB) {
	t.Helper()
	claude, err := testtools.ClaudeBin()
	if err != nil {
		t.Skipf("the real Claude CLI is not installed (%v): run scripts/tools.sh", err)
	}
	suite.binOnce.Do(func() {
		suite.claudeBin = claude
		suite.dir, suite.binErr = os.MkdirTemp("", "drover-e2e-")
		if suite.binErr != nil {
			return
		}
		suite.drover = filepath.Join(suite.dir, "drover")
		build := exec.Command("go", "build", "-o", suite.drover, "../cmd/drover")
		if out, err := build.CombinedOutput(); err != nil {
			suite.binErr = fmt.Errorf("building drover: %v\n%s", err, out)
		}
	})
	if suite.binErr != nil {
		t.Fatal(suite.binErr)
	}
}

// world is what one test or benchmark has to itself: a database, a fake
// Messages API, a task queue, and the CLI's home, config folder and workspace.
type world struct {
	temporal  string // the Temporal frontend workers use
	namespace string // and its namespace
	dsn       string
	// workerDSN, when set, is the database URL workers get instead of dsn (a proxy's).
	workerDSN string
	fake      *offlinemodel.Server
	queue     string
	home      string
	configDir string
	workspace string
}

// newWorld makes a world on the shared dev server; the fake answers with fakeCfg.
func newWorld(tb testing.TB, prefix string, fakeCfg offlinemodel.Config) world {
	tb.Helper()
	return newWorldOn(tb, prefix, fakeCfg, suite.temporal.Address(), suite.temporal.Namespace())
}

// newWorldOn makes a world whose workers use the Temporal frontend at address, in namespace.
func newWorldOn(tb testing.TB, prefix string, fakeCfg offlinemodel.Config, address, namespace string) world {
	tb.Helper()
	w := world{queue: prefix + uuid.NewString()[:8], dsn: pgtest.NewDatabase(tb), temporal: address, namespace: namespace}
	root := tb.TempDir()
	w.home = filepath.Join(root, "home")
	w.configDir = filepath.Join(root, "claude")
	w.workspace = filepath.Join(root, "workspace")
	for _, d := range []string{w.home, w.configDir, w.workspace} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	fake, err := offlinemodel.Start(fakeCfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = fake.Close() })
	// The fake checks every request the way the real API does: a conversation drover made the
	// CLI send wrong (a duplicated prompt, a broken resume) fails the test.
	tb.Cleanup(func() {
		if err := fake.CheckValid(); err != nil {
			tb.Error(err)
		}
	})
	w.fake = fake
	return w
}

// testAPIKey is the key workers hand the CLI; no log may show it.
const testAPIKey = "sk-ant-e2e-secret-value"

// workerEnv is the whole environment of `drover worker` as host hostID.
func (w world) workerEnv(hostID, logLevel string) []string {
	dsn := w.dsn
	if w.workerDSN != "" {
		dsn = w.workerDSN
	}
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + w.home,
		"DROVER_DATABASE_URL=" + dsn,
		"TEMPORAL_ADDRESS=" + w.temporal,
		"TEMPORAL_NAMESPACE=" + w.namespace,
		"DROVER_TASK_QUEUE=" + w.queue,
		"DROVER_HOST_ID=" + hostID,
		"DROVER_CLAUDE_BIN=" + suite.claudeBin,
		"DROVER_CLAUDE_CONFIG_DIR=" + w.configDir,
		"DROVER_LOG_LEVEL=" + logLevel,
		"ANTHROPIC_BASE_URL=" + w.fake.URL(),
		"ANTHROPIC_API_KEY=" + testAPIKey,
		"DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
	}
}

// params are a task's parameters in the world's workspace.
func (w world) params() task.Params {
	return task.Params{Workspace: w.workspace, Profile: task.Profile{PermissionMode: task.Autonomous}, MaxAttempts: 3}
}

// launchWorker starts cmd (a `drover worker`) and stops it when owner ends,
// showing its log if owner failed and failing owner if the log shows the key.
func launchWorker(owner, tb testing.TB, name string, cmd *exec.Cmd) *workerProc {
	tb.Helper()
	w := &workerProc{cmd: cmd, done: make(chan struct{}), log: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = w.log, w.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(w.done) }()
	owner.Cleanup(func() {
		w.stop()
		if owner.Failed() {
			owner.Logf("worker %s log:\n%s", name, w.log.String())
		}
		if strings.Contains(w.log.String(), testAPIKey) {
			owner.Errorf("worker %s logged the API key", name)
		}
	})
	return w
}

// searchAttributes are drover's, for the dev server's --search-attribute.
func searchAttributes() map[string]string {
	return devserver.SearchAttributeFlags(workflows.SearchAttributes())
}

// portOf is the port of a host:port address.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// env is one test's world and the workers it starts.
type env struct {
	world
	t    *testing.T
	ctx  context.Context
	pool *pgxpool.Pool
	tc   *taskclient.Client

	respondMu sync.Mutex
	respond   func(*offlinemodel.Request) (offlinemodel.Response, bool)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	setup(t)
	return newEnvOn(t, suite.temporal.Address(), suite.temporal.Namespace())
}

// envGuard bounds one test's waits. It is a safety net, not a figure: every wait is on a
// witness, and on a machine whose CPU is taken (make test-load) one CLI start takes half a
// minute and a test several, so it is far above what any test takes on an idle machine.
const envGuard = 10 * time.Minute

// newEnvOn makes an env whose workers and task client use the Temporal frontend at address, in
// namespace (setupBinaries must have run).
func newEnvOn(t *testing.T, address, namespace string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), envGuard)
	t.Cleanup(cancel)
	e := &env{t: t, ctx: ctx}
	e.world = newWorldOn(t, "e2e-", offlinemodel.Config{Responder: e.responder}, address, namespace)

	c, err := worker.Dial(ctx, address, namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e.tc = &taskclient.Client{Temporal: c, TaskQueue: e.queue}
	return e
}

func (e *env) responder(r *offlinemodel.Request) (offlinemodel.Response, bool) {
	e.respondMu.Lock()
	fn := e.respond
	e.respondMu.Unlock()
	if fn == nil {
		return offlinemodel.Response{}, false
	}
	return fn(r)
}

// setResponder answers requests the queues do not cover.
func (e *env) setResponder(fn func(*offlinemodel.Request) (offlinemodel.Response, bool)) {
	e.respondMu.Lock()
	e.respond = fn
	e.respondMu.Unlock()
}

// db opens (once) a pool on the test's database, migrated by the first worker.
func (e *env) db() *pgxpool.Pool {
	if e.pool == nil {
		p, err := store.Connect(e.ctx, e.dsn)
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(p.Close)
		e.pool = p
	}
	return e.pool
}

// workerProc is a `drover worker` process.
type workerProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *lockedBuffer
}

// startWorker runs `drover worker` as host executorID.
func (e *env) startWorker(executorID string, extraArgs ...string) *workerProc {
	e.t.Helper()
	cmd := exec.Command(suite.drover, append([]string{"worker", "--keep-alive", "2m"}, extraArgs...)...)
	cmd.Env = e.workerEnv(executorID, "debug")
	return launchWorker(e.t, e.t, executorID, cmd)
}

// hostDirs are one host's own CLI state: its HOME and the CLI's config folder. Hosts of a world
// share its workspace and nothing else.
type hostDirs struct {
	home, configDir string
}

// newHostDirs makes a host's folders beside the world's.
func (e *env) newHostDirs(name string) hostDirs {
	e.t.Helper()
	root := filepath.Join(filepath.Dir(e.workspace), "hosts", name)
	d := hostDirs{home: filepath.Join(root, "home"), configDir: filepath.Join(root, "claude")}
	for _, dir := range []string{d.home, d.configDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			e.t.Fatal(err)
		}
	}
	return d
}

// startWorkerIn runs `drover worker` as host hostID with the host's own HOME and CLI config
// folder.
func (e *env) startWorkerIn(hostID string, dirs hostDirs, extraArgs ...string) *workerProc {
	e.t.Helper()
	cmd := exec.Command(suite.drover, append([]string{"worker", "--keep-alive", "2m"}, extraArgs...)...)
	cmd.Env = setEnv(e.workerEnv(hostID, "debug"), "HOME="+dirs.home, "DROVER_CLAUDE_CONFIG_DIR="+dirs.configDir)
	return launchWorker(e.t, e.t, hostID, cmd)
}

// setEnv returns environ with each KEY=value of kvs in place of the variable's earlier value.
func setEnv(environ []string, kvs ...string) []string {
	out := slices.Clone(environ)
	for _, kv := range kvs {
		key, _, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(s string) bool { return strings.HasPrefix(s, key+"=") })
		out = append(out, kv)
	}
	return out
}

// taskID names a task of this test: unique in the shared Temporal server, so
// that a task of an earlier run (-count) is never found running.
func (w world) taskID(name string) string { return name + "-" + w.queue }

// kill ends the worker with SIGKILL, as a crash would.
func (w *workerProc) kill() {
	_ = w.cmd.Process.Kill()
	<-w.done
}

// term sends the worker SIGTERM, which starts its drain, and returns at once.
func (w *workerProc) term() {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
}

// exited reports whether the worker's process has ended.
func (w *workerProc) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// stop ends the worker gracefully.
func (w *workerProc) stop() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(40 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor polls cond until it holds.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	for !cond() {
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitTurns waits until the task has ended n turns and is idle.
func (e *env) waitTurns(taskID string, n int) task.State {
	e.t.Helper()
	var st task.State
	e.waitFor(fmt.Sprintf("task %s to end %d turns", taskID, n), func() bool {
		var err error
		st, err = e.tc.State(e.ctx, taskID)
		return err == nil && st.Totals.Turns >= n && st.RunningTurn == 0 && len(st.Pending) == 0
	})
	return st
}

// events returns the task's logged events, decoded.
func (e *env) events(taskID string) []loggedEvent {
	e.t.Helper()
	evs, err := store.ListEvents(e.ctx, e.db(), taskID, 0, 100000)
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]loggedEvent, len(evs))
	for i, ev := range evs {
		out[i].Event = ev
		if err := json.Unmarshal(ev.Payload, &out[i].Agent); err != nil {
			e.t.Fatalf("event %d: %v", ev.Seq, err)
		}
	}
	return out
}

type loggedEvent struct {
	store.Event
	Agent events.AgentEvent
}

// executorPID is the pid the executor row records for the task.
func (e *env) executorPID(taskID string) int {
	x, err := store.GetExecutor(e.ctx, e.db(), taskID)
	if err != nil {
		return 0
	}
	return x.PID
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	s := procstat.State(pid)
	return s != "" && s != "Z"
}

// transcriptFiles lists the session's transcript files in a CLI config folder.
func transcriptFiles(configDir, sessionID string) []string {
	matches, _ := filepath.Glob(filepath.Join(configDir, "projects", "*", sessionID+".jsonl"))
	return matches
}

// transcriptIn reads the session's transcript file from the CLI config folder configDir.
func transcriptIn(t testing.TB, configDir, sessionID string) []map[string]any {
	t.Helper()
	out, err := readTranscript(configDir, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readTranscript reads the session's transcript file from the CLI config folder configDir.
func readTranscript(configDir, sessionID string) ([]map[string]any, error) {
	matches := transcriptFiles(configDir, sessionID)
	if len(matches) != 1 {
		return nil, fmt.Errorf("transcript of session %s: found %v", sessionID, matches)
	}
	f, err := os.Open(matches[0])
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []map[string]any
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var m map[string]any
			if json.Unmarshal(line, &m) == nil {
				out = append(out, m)
			}
		}
		if err != nil {
			break
		}
	}
	return out, nil
}

// transcriptChain is the conversation the CLI resumes from leaf (chainTo), read from the
// session's transcript in the CLI config folder configDir once the file holds leaf. The CLI
// appends its entries on its own schedule, so the message that ended a committed turn may reach
// the file a moment after the CLI printed it.
func (e *env) transcriptChain(configDir, sessionID, leaf string) []map[string]any {
	e.t.Helper()
	var entries []map[string]any
	var err error
	e.waitFor(fmt.Sprintf("the transcript of session %s to hold message %s", sessionID, leaf), func() bool {
		entries, err = readTranscript(configDir, sessionID)
		return err == nil && slices.ContainsFunc(entries, func(m map[string]any) bool { return leaf != "" && m["uuid"] == leaf })
	})
	return chainTo(entries, leaf)
}

// promptCount counts the user entries of the transcript whose text is prompt.
func promptCount(entries []map[string]any, prompt string) int {
	n := 0
	for _, m := range entries {
		if m["type"] != "user" {
			continue
		}
		msg, _ := m["message"].(map[string]any)
		b, _ := json.Marshal(msg["content"])
		if strings.Contains(string(b), prompt) {
			n++
		}
	}
	return n
}

// chainTo returns the transcript entries from the first one to leaf, following
// parentUuid links back from leaf: the conversation as the CLI resumes it.
func chainTo(entries []map[string]any, leaf string) []map[string]any {
	byUUID := map[string]map[string]any{}
	for _, m := range entries {
		if u, ok := m["uuid"].(string); ok && u != "" {
			byUUID[u] = m
		}
	}
	var chain []map[string]any
	for u := leaf; u != ""; {
		m, ok := byUUID[u]
		if !ok || len(chain) > len(entries) {
			break
		}
		chain = append([]map[string]any{m}, chain...)
		u, _ = m["parentUuid"].(string)
	}
	return chain
}

// streamedText joins the text the log streamed for each model message, in log order, with the
// turn and attempt it came in: what a reader of the log sees, however the text was cut into
// events (a chunk per delta, or coalesced).
type streamedText struct {
	Turn, Attempt int
	MessageID     string
	Text          string
}

func messagesOf(evs []loggedEvent) []streamedText {
	var out []streamedText
	at := map[string]int{}
	for _, ev := range evs {
		if ev.Agent.Type != events.TypeMessageChunk || ev.Agent.ParentToolCallID != "" {
			continue
		}
		key := fmt.Sprintf("%d/%d/%s", ev.Turn, ev.Attempt, ev.Agent.MessageID)
		i, ok := at[key]
		if !ok || ev.Agent.MessageID == "" {
			i = len(out)
			at[key] = i
			out = append(out, streamedText{Turn: ev.Turn, Attempt: ev.Attempt, MessageID: ev.Agent.MessageID})
		}
		out[i].Text += ev.Agent.Text
	}
	return out
}

// streamed reports whether a message of the turn (0: any) streamed text containing s, and in
// which attempt.
func streamed(evs []loggedEvent, turn int, s string) (attempt int, ok bool) {
	for _, m := range messagesOf(evs) {
		if (turn == 0 || m.Turn == turn) && strings.Contains(m.Text, s) {
			return m.Attempt, true
		}
	}
	return 0, false
}
