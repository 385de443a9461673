package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/task"
	"github.com/drover-run/drover/workspace"
)

// Defaults of the server: the one place they are set.
const (
	// DefaultListen is where drover serve listens: loopback only.
	DefaultListen = "127.0.0.1:8090"
	// DefaultMaxBodyBytes bounds a request's body: room for one prompt of task.MaxPromptBytes
	// (measured as JSON, as it comes) and the fields beside it.
	DefaultMaxBodyBytes = task.MaxPromptBytes + 64<<10
	// DefaultRequestTimeout bounds the reading of a request and the writing of its answer (an
	// event stream excepted).
	DefaultRequestTimeout = time.Minute
	// DefaultReadHeaderTimeout bounds the reading of a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout bounds a kept-alive connection between requests.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultShutdownTimeout bounds how long a stopping server waits for requests in flight.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultKeepAlive is how often an event stream sends a comment while no event comes, so
	// that proxies and clients see the connection alive.
	DefaultKeepAlive = 15 * time.Second
	// DefaultCommandTimeout bounds how long a command (create, prompt, interrupt, close, cancel,
	// budget) waits for its task's answer before the answer is 503: well within the write
	// deadline, so that the client is told.
	DefaultCommandTimeout = 20 * time.Second
	// DefaultDecideWait is how long a decision waits to reach the waiting agent before the
	// answer says it is recorded but not delivered yet.
	DefaultDecideWait = 10 * time.Second
	// DefaultEventsPage and MaxEventsPage bound one page of events read as JSON.
	DefaultEventsPage = 500
	MaxEventsPage     = 5000
	// MaxIdempotencyKeyBytes bounds an Idempotency-Key.
	MaxIdempotencyKeyBytes = 255
	// MaxQueryBytes bounds the text filter of a task listing.
	MaxQueryBytes = 1024
	// DefaultMaxStreams bounds the event streams open at once; one more is answered 503.
	DefaultMaxStreams = 2000
	// DefaultStreamIdleTimeout ends an event stream that has sent no event for this long; a
	// client that still wants it reconnects with Last-Event-ID.
	DefaultStreamIdleTimeout = 30 * time.Minute
	// DefaultWatchPoll is how often an event stream reads the log when no notification came.
	DefaultWatchPoll = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	// Tasks sends commands to tasks. Required.
	Tasks Tasks
	// Reader reads tasks and their permission requests. Required.
	Reader Reader
	// Decider sends decisions on pending requests. Required.
	Decider Decider
	// Workers, when set, says whether a worker polls the tasks' queue: a command that needs one
	// (prompt, interrupt, close, budget) is answered 503 at once, and not sent, when none does.
	Workers func(ctx context.Context) (bool, error)
	// Exists, when set, is asked about a task that neither the event log nor Reader knows (one
	// created a moment ago): nil means it exists; an error that fromError maps to
	// task_not_found means it does not.
	Exists func(ctx context.Context, taskID string) error
	// DB holds the event log and the idempotency keys. Required.
	DB *pgxpool.Pool
	// Tokens are the bearer tokens a request may carry, each "name:secret" or a bare secret
	// (named token-1, token-2… by its place; see SplitToken): what a request does is recorded
	// as done by its token's name. Empty means no authentication, which CheckExposure allows on
	// loopback addresses only, and what requests do is recorded as done by "api".
	Tokens []string
	// Workspaces reads the managed tasks' checkpoints from their remote, for the diff and
	// publish routes. Nil means none: those routes answer unavailable.
	Workspaces *workspace.Manager
	// Console is served at "/" (the API's routes take precedence). Nil means none.
	Console http.Handler
	// TemporalUI is the address of the Temporal UI (http://127.0.0.1:8233): tasks then carry
	// their page there as temporal_url. Empty means none.
	TemporalUI string
	// Namespace is the tasks' Temporal namespace, for those pages. Defaults to task.DefaultNamespace.
	Namespace string
	// MaxBodyBytes bounds a request's body. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RequestTimeout bounds reading a request and writing its answer, streams excepted.
	// Defaults to DefaultRequestTimeout.
	RequestTimeout time.Duration
	// KeepAlive is how often an idle event stream sends a comment. Defaults to DefaultKeepAlive.
	KeepAlive time.Duration
	// CommandTimeout bounds the wait for a command's answer. Defaults to DefaultCommandTimeout.
	CommandTimeout time.Duration
	// DecideWait is how long a decision waits to reach its agent. Defaults to DefaultDecideWait.
	DecideWait time.Duration
	// ShutdownTimeout bounds a graceful stop. Defaults to DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// WatchPoll is how often an event stream reads the log when no notification came (the
	// safety net for a notification never sent). Defaults to DefaultWatchPoll.
	WatchPoll time.Duration
	// MaxStreams bounds the event streams open at once. Defaults to DefaultMaxStreams.
	MaxStreams int
	// StreamIdleTimeout ends a stream that has sent no event for this long. Defaults to
	// DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// Logger gets one line per request (method, path, status, duration; never a header or a
	// body). Nil means silent.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = DefaultCommandTimeout
	}
	if c.DecideWait == 0 {
		c.DecideWait = DefaultDecideWait
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.WatchPoll == 0 {
		c.WatchPoll = DefaultWatchPoll
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Tasks == nil {
		errs = append(errs, errors.New("Tasks is required"))
	}
	if c.Reader == nil {
		errs = append(errs, errors.New("Reader is required"))
	}
	if c.Decider == nil {
		errs = append(errs, errors.New("Decider is required"))
	}
	if c.DB == nil {
		errs = append(errs, errors.New("DB is required"))
	}
	if c.MaxBodyBytes < 0 || c.RequestTimeout < 0 || c.KeepAlive < 0 || c.CommandTimeout < 0 || c.DecideWait < 0 || c.ShutdownTimeout < 0 || c.WatchPoll < 0 ||
		c.MaxStreams < 0 || c.StreamIdleTimeout < 0 {
		errs = append(errs, errors.New("limits and timeouts must not be negative"))
	}
	names := map[string]bool{}
	for i, t := range c.Tokens {
		name, secret := SplitToken(t, i+1)
		if len(secret) < MinTokenBytes {
			errs = append(errs, fmt.Errorf("token %d (%s) is %d bytes; use at least %d random bytes", i+1, name, len(secret), MinTokenBytes))
		}
		if names[name] {
			errs = append(errs, fmt.Errorf("token %d: the name %s is taken by another token; give each token its own name", i+1, name))
		}
		names[name] = true
	}
	return errors.Join(errs...)
}
