package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
	"github.com/drover-run/drover/streamjson"
)

// turnEnd is how a turn of the CLI ended: the accumulated accounting of its results and the
// error the adapter reported, if any.
type turnEnd struct {
	complete *events.Completion
	err      *events.ErrorInfo
	// retryAfter is the last delay the CLI was told to wait before retrying the API.
	retryAfter time.Duration
	// limit is the process's last rate_limit_event, when it rejected a request.
	limit *events.RateLimit
}

// executor is one live CLI process serving one task on this host, with the adapter that turns
// its output into events. One goroutine (loop) reads the process and feeds the adapter; the
// adapter calls emit, which hands each event to the running turn's sink and watches for the
// end of the turn. Between turns the process waits, idle, for the next prompt.
//
// Lock order: the adapter's own lock, then mu. Nothing holding mu calls into the adapter.
type executor struct {
	taskID string
	proc   Process
	// workspace is the folder the CLI runs in; model, the model it was asked to run ("" for its
	// default).
	workspace string
	model     string
	// windows are the host's context windows; windowSeen says the process reported its own.
	windows    *contextWindows
	windowSeen bool
	adapter    *streamjson.Adapter
	logger     *slog.Logger
	debug      *streamjson.DebugCapture
	// privateDir holds files only this process may read (its MCP configuration); removed
	// when it stops.
	privateDir string
	// supervisable: the process was launched so that permission requests reach drover
	// (bypass, stdio permission prompts, drover's hooks): it can serve any mode. Otherwise it
	// runs autonomous only.
	supervisable bool
	// approvals answers the control requests of the running turn; nil between turns.
	approvals atomic.Pointer[turnApprovals]
	// spend meters what the running turn's attempt is billed; nil between turns.
	spend atomic.Pointer[budgetMeter]

	mu        sync.Mutex
	sink      streamjson.Sink     // the running turn's; nil between turns
	held      []events.AgentEvent // emitted between turns, for the next one
	ended     chan turnEnd
	turnErr   *events.ErrorInfo
	retryWait time.Duration
	limitEv   *events.RateLimit
	// rateLimited hears the running turn's retry that ends it (see noteRetry).
	rateLimited chan retryStop
	busy        bool
	idleAt      time.Time // when the last turn ended
	turn        int       // the running turn, while busy
	sessionID   string    // the session the process serves
	// position is the transcript uuid the session stands at after the last committed turn;
	// only a process at the committed position may be reused.
	position string
	// owner is the attempt that committed the process's last turn: the one whose executor row
	// records it while it idles.
	owner string
	// clean is false once a turn failed or was abandoned in this process: its in-memory
	// conversation no longer matches what is committed.
	clean     bool
	idleTimer *time.Timer
	// runner is the attempt running the turn, once its prompt is sent; handoff is closed when
	// it lets go of the turn that a newer attempt claimed; parked holds the events of a turn its
	// attempt left for the next one, until parkTimer stops the CLI (see takeover.go).
	runner    *turnRunner
	handoff   chan struct{}
	parked    *parkSink
	parkTimer *time.Timer
	// heldUntil: the task has prompts queued behind the last turn, so the process waits for the
	// next one and is not evicted for another task's start before then (see hold).
	heldUntil time.Time

	// background holds the subagents and background shells the session started and that have
	// not reported back. While any runs, a result is not the end of the drover turn: the CLI
	// starts a turn of its own when they finish, and that turn's output and cost belong to
	// this one.
	background map[string]struct{}
	pending    *events.Completion // accumulated results while background work runs

	bgTimer *time.Timer
	bgWait  time.Duration

	// The pause of an idle process (pause.go).
	pauseIdle  time.Duration
	pauseTimer *time.Timer
	paused     bool
	awake      int       // calls to the CLI between turns under way (stayAwake)
	wokeAt     time.Time // the last wake

	lastSeen atomic.Int64 // unix nanoseconds of the last line read

	exited  chan struct{}
	exitErr error

	stopOnce sync.Once
	stopTO   time.Duration
}

// privateDirPattern names the private folders of a host's CLI processes, so that a host that
// starts again can remove the ones its earlier run left (see removeLeftoverDirs).
func privateDirPattern(hostID string) string {
	// Hex keeps the name safe and makes the prefix of one host never the prefix of another's.
	return "drover-claude-" + hex.EncodeToString([]byte(hostID)) + "-"
}

// removeLeftoverDirs removes the private folders an earlier run of this host left behind (its
// processes were killed with it): they may hold MCP configuration.
func removeLeftoverDirs(hostID string, log *slog.Logger) {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), privateDirPattern(hostID)+"*"))
	for _, m := range matches {
		if err := os.RemoveAll(m); err != nil {
			log.Warn("removing a private folder left by an earlier run", "path", m, "error", err)
		}
	}
}

// executorSpec is everything needed to start the CLI for a task.
type executorSpec struct {
	hostID            string
	supervisable      bool
	cmd               claudecode.Command
	sessionID         string // the session the process will serve
	resumeSessionID   string // set when it resumes an existing session
	resumeAt          string
	priorTotalCostUSD float64
	debug             *streamjson.DebugCapture
	stopTimeout       time.Duration
	backgroundWait    time.Duration
	pauseIdle         time.Duration
	windows           *contextWindows
}

// startExecutor starts the CLI and the reading goroutine.
func startExecutor(ctx context.Context, launcher Launcher, taskID string, spec executorSpec, logger *slog.Logger) (*executor, error) {
	ex := &executor{
		taskID:       taskID,
		workspace:    spec.cmd.Dir,
		model:        spec.cmd.Model,
		windows:      spec.windows,
		logger:       logger,
		debug:        spec.debug,
		exited:       make(chan struct{}),
		stopTO:       spec.stopTimeout,
		clean:        true,
		bgWait:       spec.backgroundWait,
		pauseIdle:    spec.pauseIdle,
		sessionID:    spec.sessionID,
		position:     spec.resumeAt,
		background:   make(map[string]struct{}),
		supervisable: spec.supervisable,
	}
	adapter, err := streamjson.New(streamjson.Config{
		Sink:              streamjson.SinkFunc(ex.emit),
		ResumedSessionID:  spec.resumeSessionID,
		PartialMessages:   spec.cmd.IncludePartialMessages,
		PriorTotalCostUSD: spec.priorTotalCostUSD,
		ContextWindowSize: spec.windows.size(spec.cmd.Model),
		HostPermissions:   true, // the engine records, reports and answers them (turnApprovals)
		Logger:            logger,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the adapter: %w", err)
	}
	ex.adapter = adapter
	cmd := spec.cmd
	if len(cmd.MCPServers) > 0 {
		// The MCP configuration may hold credentials: it goes to the CLI as a file only the
		// worker's user can read, never in argv.
		dir, err := os.MkdirTemp("", privateDirPattern(spec.hostID))
		if err != nil {
			return nil, fmt.Errorf("making a private folder for the MCP configuration: %w", err)
		}
		ex.privateDir = dir
		cmd.MCPConfigFile = dir + "/mcp.json"
	}
	pcfg := claudecode.ProcessConfig{
		Client:      claudecode.ClientConfig{Handler: ex, Logger: logger},
		StopTimeout: spec.stopTimeout,
		TermTimeout: spec.stopTimeout,
	}
	if ex.debug != nil {
		pcfg.Client.Tap = ex.debug.RawLine
	}
	proc, err := launcher.Launch(ctx, cmd, pcfg)
	if err != nil {
		ex.removePrivate()
		return nil, fmt.Errorf("starting claude: %w", err)
	}
	ex.proc = proc
	go ex.loop()
	return ex, nil
}

func (ex *executor) pid() int { return ex.proc.Pid() }

// loop reads the CLI until its output ends, feeding the adapter.
func (ex *executor) loop() {
	defer close(ex.exited)
	for {
		msg, err := ex.proc.Recv(context.Background())
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			ex.exitErr = err
			// A turn cut short leaves no tool call open in its log.
			ex.adapter.Abandon("claude stopped before the turn ended")
			return
		}
		ex.lastSeen.Store(time.Now().UnixNano())
		if m := ex.spend.Load(); m != nil {
			m.observe(msg)
		}
		ex.adapter.Handle(msg)
	}
}

// emit receives the adapter's events, with the adapter locked.
func (ex *executor) emit(ev events.AgentEvent) {
	if ex.debug != nil {
		ex.debug.Event(ev)
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	// The event reaches the log before the turn can end on it: a complete handed over first
	// could be committed without being stored.
	if ex.sink != nil {
		ex.sink.Emit(ev)
	} else if len(ex.held) < maxHeld {
		// Between turns (the initialize answer, late output): the next turn's log receives it
		// first.
		ex.held = append(ex.held, ev)
	} else {
		ex.logger.Warn("dropping an event between turns", "task_id", ex.taskID, "type", ev.Type)
	}
	switch ev.Type {
	case events.TypeError:
		if ex.busy && ev.Error != nil {
			ex.turnErr = ev.Error
		}
	case events.TypeRateLimit:
		if ev.RateLimit != nil && ev.RateLimit.RetryDelayMS > 0 {
			ex.retryWait = time.Duration(ev.RateLimit.RetryDelayMS) * time.Millisecond
		}
		ex.noteRetry(ev.RateLimit)
		if rl := ev.RateLimit; rl != nil && (rl.Source == events.RateLimitSourceEvent || rl.Source == events.RateLimitSourceAPIError) {
			// The CLI reports the account's state when it changes, not on every answer: the
			// last report stands until the next. An API error names the state it met.
			ex.limitEv = nil
			if rl.Status == "rejected" {
				ex.limitEv = rl
			}
		}
	case events.TypeSubagentTask:
		ex.trackBackground(ev)
	case events.TypeContextWindow:
		if ev.ContextWindow != nil && ev.ContextWindow.Size > 0 {
			ex.windowSeen = true
			ex.windows.learn(ex.model, ev.ContextWindow.Size)
		}
	case events.TypeComplete:
		if ev.ParentToolCallID == "" && !ex.windowSeen && ex.windows.claimAsk(ex.model) {
			go ex.learnContextWindow(2 * ex.stopTO)
		}
		if ex.busy && ev.Data != nil && ev.Data.Completion != nil && ev.ParentToolCallID == "" {
			ex.pending = addCompletion(ex.pending, ev.Data.Completion)
			if len(ex.background) == 0 {
				ex.deliverLocked()
			} else if ex.bgTimer == nil {
				ex.logger.Info("the turn waits for background work", "task_id", ex.taskID, "running", len(ex.background))
				ex.bgTimer = time.AfterFunc(ex.bgWait, ex.giveUpOnBackground)
			}
		}
	}
}

// HandleControl answers the CLI's control requests through the running turn's approvals.
// Between turns nothing may run: a tool call is denied, a hook has no opinion.
func (ex *executor) HandleControl(ctx context.Context, req *claudecode.ControlRequest) (any, error) {
	if a := ex.approvals.Load(); a != nil {
		return a.HandleControl(ctx, req)
	}
	if req.CanUseTool != nil {
		return claudecode.DenyTool("no turn is running", false), nil
	}
	return claudecode.HookOutput{}, nil
}

// maxHeld bounds the events kept between two turns.
const maxHeld = 256

// maxBackground bounds the background work one process tracks.
const maxBackground = 1024

// trackBackground follows the session's subagents and background shells.
func (ex *executor) trackBackground(ev events.AgentEvent) {
	sp := ev.Subagent
	if sp == nil || sp.TaskID == "" {
		return
	}
	switch sp.Phase {
	case events.SubagentStarted:
		if len(ex.background) < maxBackground {
			ex.background[sp.TaskID] = struct{}{}
		}
	case events.SubagentNotification:
		delete(ex.background, sp.TaskID)
	}
}

// deliverLocked ends the turn with what the results said. ex.mu is held.
func (ex *executor) deliverLocked() {
	if ex.bgTimer != nil {
		ex.bgTimer.Stop()
		ex.bgTimer = nil
	}
	if ex.pending == nil || ex.ended == nil {
		return
	}
	end := turnEnd{complete: ex.pending, err: ex.turnErr, retryAfter: ex.retryWait, limit: ex.limitEv}
	ex.pending = nil
	select {
	case ex.ended <- end:
	default:
	}
}

// giveUpOnBackground ends a turn whose background work outlived bgWait.
func (ex *executor) giveUpOnBackground() {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.busy && ex.pending != nil {
		ex.logger.Warn("background work still runs; the turn ends without it", "task_id", ex.taskID, "running", len(ex.background))
		ex.deliverLocked()
	}
}

// addCompletion adds a result to the ones already seen in this turn: costs, tokens and
// durations add up; positions and outcome are the latest result's.
func addCompletion(acc, c *events.Completion) *events.Completion {
	if acc == nil {
		cp := *c
		return &cp
	}
	sum := *c
	sum.CostUSD += acc.CostUSD
	sum.DurationMS += acc.DurationMS
	sum.NumTurns += acc.NumTurns
	sum.InputTokens += acc.InputTokens
	sum.OutputTokens += acc.OutputTokens
	sum.CacheCreationInputTokens += acc.CacheCreationInputTokens
	sum.CacheReadInputTokens += acc.CacheReadInputTokens
	sum.Models = nil
	if sum.LastMessageUUID == "" {
		sum.LastMessageUUID = acc.LastMessageUUID
	}
	return &sum
}

// initialize sends the initialize request and hands its answer to the adapter.
func (ex *executor) initialize(ctx context.Context, req claudecode.InitializeRequest) error {
	resp, err := ex.proc.Client().Initialize(ctx, req)
	if err != nil {
		return fmt.Errorf("initializing claude: %w", err)
	}
	ex.adapter.HandleInitialize(resp)
	return nil
}

// alive reports whether the process still runs.
func (ex *executor) alive() bool {
	select {
	case <-ex.exited:
		return false
	default:
		return true
	}
}

// idleSince reports when the process, alive and reusable, finished its last turn; false while
// it runs a turn or cannot serve another.
func (ex *executor) idleSince() (time.Time, bool) {
	if !ex.alive() {
		return time.Time{}, false
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.idleAt, !ex.busy && ex.clean && !ex.idleAt.IsZero()
}

// quietFor is how long the CLI has printed nothing.
func (ex *executor) quietFor() time.Duration {
	return time.Since(time.Unix(0, ex.lastSeen.Load()))
}

// runningTurn reports whether the process runs the given turn now.
func (ex *executor) runningTurn(turn int) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.busy && ex.turn == turn
}

// beginTurn attaches the turn's sink and hands it the events held since the last turn. It
// fails when a turn already runs.
func (ex *executor) beginTurn(turn int, sink streamjson.Sink) (<-chan turnEnd, error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.busy {
		return nil, errors.New("a turn is already running in this process")
	}
	ex.wakeLocked()
	if ex.idleTimer != nil {
		ex.idleTimer.Stop()
		ex.idleTimer = nil
	}
	ex.busy = true
	ex.heldUntil = time.Time{}
	ex.lastSeen.Store(time.Now().UnixNano())
	ex.turn = turn
	ex.pending = nil
	ex.sink = sink
	for _, ev := range ex.held {
		sink.Emit(ev)
	}
	ex.held = nil
	ex.turnErr = nil
	ex.retryWait = 0
	ex.rateLimited = make(chan retryStop, 1)
	ex.ended = make(chan turnEnd, 1)
	return ex.ended, nil
}

// endTurn detaches the turn's sink. committed is the position the session now stands at (and
// owner the attempt that committed it), or "" when the turn did not commit: the process is then
// unfit for reuse.
func (ex *executor) endTurn(sessionID, committed, owner string) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.busy = false
	ex.idleAt = time.Now()
	ex.sink = nil
	ex.runner, ex.parked = nil, nil
	if ex.handoff != nil {
		close(ex.handoff)
		ex.handoff = nil
	}
	ex.approvals.Store(nil)
	ex.pending = nil
	if ex.bgTimer != nil {
		ex.bgTimer.Stop()
		ex.bgTimer = nil
	}
	if committed == "" {
		ex.clean = false
		return
	}
	ex.sessionID, ex.position, ex.owner = sessionID, committed, owner
	ex.schedulePauseLocked(ex.pauseIdle)
}

// reusableAt reports whether the process is alive, idle and standing exactly at the given
// resume point.
func (ex *executor) reusableAt(sessionID, position string) bool {
	if !ex.alive() {
		return false
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.clean && !ex.busy && sessionID != "" && ex.sessionID == sessionID && ex.position == position
}

// idleOwner is the attempt whose committed turn the idle process stands at; "" when the process
// is busy or unfit.
func (ex *executor) idleOwner() string {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.busy || !ex.clean {
		return ""
	}
	return ex.owner
}

// hold keeps the idle process for its task's next turn until then: no other task's start
// evicts it meanwhile.
func (ex *executor) hold(until time.Time) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.heldUntil = until
}

// heldAt reports whether the process is kept for its task's queued next turn at now.
func (ex *executor) heldAt(now time.Time) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return now.Before(ex.heldUntil)
}

// idleFor arranges for onIdle to run when no turn starts within d.
func (ex *executor) idleFor(d time.Duration, onIdle func()) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.idleTimer != nil {
		ex.idleTimer.Stop()
	}
	ex.idleTimer = time.AfterFunc(d, onIdle)
}

// sendPrompt tells the adapter about the prompt, then writes it.
func (ex *executor) sendPrompt(ctx context.Context, p claudecode.Prompt) error {
	ex.adapter.PromptSent(p.UUID, p.Text)
	if err := ex.proc.Client().SendUser(ctx, p); err != nil {
		return fmt.Errorf("sending the prompt: %w", err)
	}
	return nil
}

// interrupt asks the CLI to stop the running turn.
func (ex *executor) interrupt(ctx context.Context) error {
	defer ex.stayAwake()()
	if err := ex.proc.Client().Interrupt(ctx); err != nil {
		return fmt.Errorf("interrupting claude: %w", err)
	}
	return nil
}

// stop ends the process (close stdin, SIGTERM, SIGKILL, each bounded; then whatever is left of
// its tree) and waits for the reading goroutine. Safe to call more than once.
func (ex *executor) stop(ctx context.Context, reason string) {
	ex.stopOnce.Do(func() {
		ex.mu.Lock()
		if ex.idleTimer != nil {
			ex.idleTimer.Stop()
		}
		ex.clean = false
		ex.wakeLocked()
		ex.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*ex.stopTO)
		defer cancel()
		if err := ex.proc.Stop(ctx); err != nil {
			ex.logger.Debug("claude stopped", "task_id", ex.taskID, "reason", reason, "result", err)
		}
		select {
		case <-ex.exited:
		case <-ctx.Done():
			ex.logger.Warn("claude reader did not finish after stop", "task_id", ex.taskID)
		}
		if ex.debug != nil {
			_ = ex.debug.Close()
		}
		ex.removePrivate()
		ex.logger.Info("claude process stopped", "task_id", ex.taskID, "reason", reason)
	})
}

func (ex *executor) removePrivate() {
	if ex.privateDir != "" {
		_ = os.RemoveAll(ex.privateDir)
	}
}
