package streamjson

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/drover-run/drover/claudecode"
	"github.com/drover-run/drover/events"
)

// DefaultMaxPending is the default bound on tool calls, prompts and permission requests the
// adapter remembers between results.
const DefaultMaxPending = 1024

// syntheticModel is the model name of assistant messages the CLI makes up itself (API errors,
// local command output).
const syntheticModel = "<synthetic>"

// Config configures an Adapter.
type Config struct {
	// Sink receives the events. Required.
	Sink Sink
	// ResumedSessionID is the session the CLI was started to resume (--resume), if any: the
	// session_status event says "resumed" when the CLI reports this id.
	ResumedSessionID string
	// PriorTotalCostUSD is the session's total cost the host had recorded before this process
	// started. The CLI's total_cost_usd continues across --resume; the adapter only needs this
	// when the CLI does not report per-turn usage (model_usage_since_last_result).
	PriorTotalCostUSD float64
	// PartialMessages says the CLI runs with --include-partial-messages. Text and thinking then
	// come from stream_event deltas as they arrive, and the complete assistant frames only supply
	// what was not streamed (the CLI does not stream subagents). When false, stream_event
	// messages are ignored and text comes from the assistant frames.
	PartialMessages bool
	// ContextWindowSize is the main model's context window when the host knows it; the window
	// the CLI reports (SetContextWindow, or a result's modelUsage) replaces it. While no window
	// is known, context_window events wait: a guessed size would mislead.
	ContextWindowSize int64
	// Clock stamps events with a time. Nil leaves events unstamped, which keeps output
	// deterministic.
	Clock func() time.Time
	// MaxPending bounds how many open tool calls, announced prompts and permission requests the
	// adapter remembers. Defaults to DefaultMaxPending.
	MaxPending int
	// HostPermissions says the host records and reports permission requests itself (under ids
	// of its own, durably): the adapter then emits no permission_request or
	// permission_cancelled events. PermissionEvent builds the event for the host.
	HostPermissions bool
	// Logger receives debug logs about ignored messages. Nil means silent.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Sink == nil {
		return errors.New("streamjson: Config.Sink is required")
	}
	if c.PriorTotalCostUSD < 0 {
		return fmt.Errorf("streamjson: negative PriorTotalCostUSD %v", c.PriorTotalCostUSD)
	}
	return nil
}

// Adapter turns the messages of one Claude Code session into AgentEvents. Feed it every message
// the CLI writes, in order, from one goroutine; its methods are safe to call from others (a
// heartbeat reading TurnState, say), but the Sink is called with the adapter locked and must not
// call back into it.
type Adapter struct {
	mu   sync.Mutex
	cfg  Config
	sink Sink
	log  *slog.Logger

	sessionID    string
	statusSentID string // the session id session_status was last emitted for
	mainModel    string
	commands     []events.Command
	commandIndex map[string]int

	// Resume point: lastUUID is committed; pendingUUID waits for a successful result.
	lastUUID    string
	pendingUUID string

	// Context window: windows are the sizes known per model (from the host and from results);
	// windowSize is the main model's, 0 while unknown.
	windows     map[string]int64
	windowSize  int64
	windowUsed  int64
	lastWindow  events.ContextWindow
	usageMsgID  string // the main assistant message whose usage was last counted
	windowKnown bool   // a context_window event was emitted

	// Cost accounting.
	lastTotalCost float64
	last          *events.Completion

	turn turnState

	// panics counts recovered panics (tests assert it stays zero).
	panics int

	// Remembered across results, bounded by MaxPending.
	tools       map[string]*openTool // tool_use_id → open tool call
	prompts     map[string]bool      // prompts announced by PromptSent, by uuid or text
	taskTools   map[string]string    // task_id (= agent id) → tool_use_id of the Task call
	permissions map[string]bool      // request_id of can_use_tool requests → true; hook callbacks → false
}

// turnState is what the adapter tracks from one result to the next.
type turnState struct {
	active       bool
	textEmitted  bool // the main agent's text reached the sink this turn
	interrupted  bool
	compacting   bool
	adopted      map[string]bool   // prompt uuids already committed this turn
	streamMsg    map[string]string // parent_tool_use_id → message id being streamed
	streamedText map[string]bool   // message ids whose text came from deltas
	streamedThk  map[string]bool   // message ids whose thinking came from deltas
}

// openTool is a tool call waiting for its result.
type openTool struct {
	name   string
	title  string
	input  []byte
	parent string
}

// TurnState is the adapter's view of the session for the host.
type TurnState struct {
	SessionID string
	// LastMessageUUID is the last transcript entry that is safe to resume at
	// (--resume-session-at). See the package documentation for the rule.
	LastMessageUUID string
	// InTurn is true from the first message of a turn (of the main agent) until its result.
	InTurn bool
	// Last is the accounting of the last completed turn; nil before the first result.
	Last *events.Completion
}

// New returns an adapter for one session.
func New(cfg Config) (*Adapter, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Adapter{
		cfg:           cfg,
		sink:          cfg.Sink,
		log:           cfg.Logger,
		windowSize:    max(cfg.ContextWindowSize, 0),
		windows:       map[string]int64{},
		lastTotalCost: cfg.PriorTotalCostUSD,
		commandIndex:  map[string]int{},
		tools:         map[string]*openTool{},
		prompts:       map[string]bool{},
		taskTools:     map[string]string{},
		permissions:   map[string]bool{},
	}, nil
}

// TurnState returns the session id, the resume point and the last turn's accounting.
func (a *Adapter) TurnState() TurnState {
	a.mu.Lock()
	defer a.mu.Unlock()
	ts := TurnState{SessionID: a.sessionID, LastMessageUUID: a.lastUUID, InTurn: a.turn.active}
	if a.last != nil {
		c := *a.last
		ts.Last = &c
	}
	return ts
}

// PromptSent tells the adapter that the host wrote a prompt with this uuid (which the CLI adopts
// as the transcript entry's uuid). It emits a user_message event at once; the CLI's echo of the
// same prompt (--replay-user-messages) is then not emitted again. Pass the uuid that was sent;
// without one, the echo is matched by its text.
func (a *Adapter) PromptSent(uuid, text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.prompts) >= a.cfg.MaxPending {
		clear(a.prompts)
	}
	a.prompts[promptKey(uuid, text)] = true
	a.emit(events.AgentEvent{Type: events.TypeUserMessage, Text: text, UUID: uuid})
}

func promptKey(uuid, text string) string {
	if uuid != "" {
		return "uuid:" + uuid
	}
	return "text:" + text
}

// HandleInitialize takes the CLI's answer to our initialize request: its slash commands join the
// available commands. (Its model list carries no context windows, so it is not used.)
func (a *Adapter) HandleInitialize(resp claudecode.InitializeResponse) {
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := false
	for _, c := range resp.Commands {
		changed = a.addCommand(events.Command{Name: c.Name, Description: c.Description, ArgumentHint: c.ArgumentHint}) || changed
	}
	if changed {
		a.emitCommands()
	}
}

// Handle processes one message of the CLI. Unknown messages are ignored; nothing is an error.
func (a *Adapter) Handle(msg claudecode.Message) {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer func() {
		// The adapter must survive any input. A panic here is a bug; it is reported as a
		// protocol error event rather than taking the session down.
		if r := recover(); r != nil {
			a.panics++
			a.log.Error("streamjson: panic handling a message", "type", msgType(msg), "panic", r)
			a.emit(events.AgentEvent{Type: events.TypeError, Error: &events.ErrorInfo{
				Kind: events.ErrorProtocol, Message: fmt.Sprintf("internal error handling a %q message", msgType(msg)),
			}})
		}
	}()
	switch m := msg.(type) {
	case *claudecode.SystemInit:
		a.handleInit(m)
	case *claudecode.SystemStatus:
		a.handleStatus(m)
	case *claudecode.SystemAPIRetry:
		a.handleAPIRetry(m)
	case *claudecode.SystemCompactBoundary:
		a.handleCompactBoundary(m)
	case *claudecode.SystemTask:
		a.handleTask(m.SessionID, taskInfo{
			Subtype: m.Subtype, TaskID: m.TaskID, ToolUseID: m.ToolUseID, Description: m.Description,
			TaskType: m.TaskType, Status: m.Status, Summary: m.Summary, LastToolName: m.LastToolName, Patch: m.Patch, Usage: m.Usage,
		})
	case *claudecode.SystemPermissionDenied:
		a.handlePermissionDenied(m)
	case *claudecode.AssistantMessage:
		a.handleAssistant(m)
	case *claudecode.StreamEvent:
		a.handleStreamEvent(m)
	case *claudecode.UserMessage:
		a.handleUser(m)
	case *claudecode.ResultMessage:
		a.handleResult(m)
	case *claudecode.ControlRequest:
		a.handleControlRequest(m)
	case *claudecode.ControlCancelRequest:
		a.handleControlCancel(m)
	case *claudecode.RateLimitEvent:
		a.handleRateLimitEvent(m)
	case *claudecode.Malformed:
		a.handleMalformed(m)
	case *claudecode.SystemInformational:
		a.noteSession(m.SessionID) // notices for a terminal; the events already tell what happened
	case *claudecode.SystemNotification:
		a.noteSession(m.SessionID)
	case *claudecode.Unknown:
		a.handleUnknown(m)
	case nil:
	default:
		a.log.Debug("streamjson: ignoring message", "type", msg.Type())
	}
}

func msgType(msg claudecode.Message) string {
	if msg == nil {
		return ""
	}
	return msg.Type()
}

// emit stamps ev with the session and the clock and hands it to the sink.
func (a *Adapter) emit(ev events.AgentEvent) {
	if ev.SessionID == "" {
		ev.SessionID = a.sessionID
	}
	if a.cfg.Clock != nil {
		ev.Time = a.cfg.Clock()
	}
	a.sink.Emit(ev)
}

// noteSession learns the session id from any message that carries one.
func (a *Adapter) noteSession(id string) {
	if a.sessionID == "" && id != "" {
		a.sessionID = id
	}
}

// startTurn marks the beginning of a turn: the first message of the main agent after a result.
// (A background subagent's messages may come between turns.)
func (a *Adapter) startTurn() {
	a.turn.active = true
}

// endTurn forgets the per-turn state.
func (a *Adapter) endTurn() {
	a.turn = turnState{}
}

func (a *Adapter) addCommand(c events.Command) bool {
	if c.Name == "" {
		return false
	}
	i, ok := a.commandIndex[c.Name]
	if !ok {
		a.commandIndex[c.Name] = len(a.commands)
		a.commands = append(a.commands, c)
		return true
	}
	old := &a.commands[i]
	changed := false
	if c.Description != "" && c.Description != old.Description {
		old.Description, changed = c.Description, true
	}
	if c.ArgumentHint != "" && c.ArgumentHint != old.ArgumentHint {
		old.ArgumentHint, changed = c.ArgumentHint, true
	}
	return changed
}

func (a *Adapter) emitCommands() {
	a.emit(events.AgentEvent{Type: events.TypeAvailableCommands, AvailableCommands: append([]events.Command(nil), a.commands...)})
}

// commit records uuid as the last entry that is safe to resume at. Anything pending before it is
// superseded: a user entry comes after the assistant entries it answers.
func (a *Adapter) commit(uuid string) {
	if uuid == "" {
		return
	}
	a.lastUUID = uuid
	a.pendingUUID = ""
}

// setMap lazily allocates a per-turn set and adds key, forgetting everything when the set is full.
func setMap[V any](m *map[string]V, key string, v V, limit int) {
	if *m == nil {
		*m = map[string]V{}
	}
	if len(*m) >= limit {
		clear(*m)
	}
	(*m)[key] = v
}

// Abandon ends a turn that will get no result: the CLI's output ended (it
// crashed, was killed, or a transcript stops mid-turn). Tool calls still open
// are closed as failed with reason, and an error event says the turn ended
// without a result. Assistant messages not confirmed by a result are not
// made resumable. It does nothing between turns.
func (a *Adapter) Abandon(reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.turn.active && len(a.tools) == 0 {
		return
	}
	a.closeTools(func(*openTool) bool { return true }, events.ToolError, reason)
	if a.turn.active {
		a.emit(events.AgentEvent{Type: events.TypeError, Error: &events.ErrorInfo{
			Kind: events.ErrorExecution, Message: "the turn ended without a result: " + reason,
		}})
	}
	a.endTurn()
}
