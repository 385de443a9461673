package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/telemetry"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/taskclient"
	"github.com/drover-run/drover/taskview"
	"github.com/drover-run/drover/worker"
	"github.com/drover-run/drover/workspace"
)

func newServeCommand(a *app) *cobra.Command {
	var o apiOptions
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API (and the web console) until Ctrl-C",
		Long: `Serve drover's HTTP API under /api/v1 (see docs/api.md and /api/v1/openapi.json),
and the web console at /. It listens on loopback by default; on any other address
it refuses to start unless DROVER_API_TOKENS or DROVER_API_TOKEN_FILE gives the
bearer tokens every request must carry: each NAME:TOKEN, whose name the server records
as the author of what its requests do (decisions, prompts, interrupts, cancels, budget
changes), or a bare TOKEN, named token-1, token-2… by its place. Its pool of Postgres connections is set in
DROVER_DATABASE_URL (?pool_max_conns=N); an open event stream holds none of them.`,
		Example: `  drover serve
  DROVER_API_TOKEN_FILE=/run/secrets/drover-api drover serve --listen 0.0.0.0:8090
  DROVER_API_TOKENS=ana:$(cat ana.token),ci:$(cat ci.token) drover serve`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ctx := c.Context()
			tel, err := telemetry.Setup(ctx, telemetry.Config{Service: "drover-api", Version: version,
				Traces: a.env.otlpTraces, Metrics: a.env.otlpMetrics, Logger: a.log})
			if err != nil {
				return err
			}
			defer tel.Shutdown(context.WithoutCancel(ctx))
			o.temporalAddress, o.databaseURL = a.env.temporalAddress, a.env.databaseURL
			srv, err := startAPI(ctx, a, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "drover api listening on %s (Ctrl-C stops it)\n", srv.url)
			return srv.wait()
		},
	}
	c.Flags().StringVar(&o.listen, "listen", api.DefaultListen, "address to listen on (host:port); beyond loopback, tokens are required")
	o.view = addWorkspaceViewFlags(c, a)
	c.Flags().StringVar(&o.temporalUI, "temporal-ui", "", "address of the Temporal UI (http://HOST:PORT), for each task's temporal_url")
	return c
}

// apiServer is a running HTTP API.
type apiServer struct {
	url  string
	done chan error
}

// wait returns once the server has stopped (its context ended) and released what it held.
func (s *apiServer) wait() error { return <-s.done }

// apiOptions say where the API listens and what it talks to.
type apiOptions struct {
	listen, temporalAddress, databaseURL string
	// temporalUI is the Temporal UI's address, for the tasks' temporal_url; empty means none.
	temporalUI string
	// view says where the managed tasks' checkpoints are read from (diff, publish); nil or no
	// remote: those routes answer unavailable.
	view *workspaceViewOptions
}

// startAPI starts the HTTP API on o.listen, talking to Temporal at o.temporalAddress and to
// the database at o.databaseURL (migrated first), until ctx ends.
func startAPI(ctx context.Context, a *app, o apiOptions) (*apiServer, error) {
	e := a.env
	listen, temporalAddress, databaseURL := o.listen, o.temporalAddress, o.databaseURL
	if e.apiTokensErr != nil {
		return nil, e.apiTokensErr
	}
	if err := api.CheckExposure(listen, len(e.apiTokens)); err != nil {
		return nil, err
	}
	if err := store.EnsureDatabase(ctx, databaseURL); err != nil {
		return nil, err
	}
	pool, err := store.Connect(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			pool.Close()
		}
	}()
	if _, err := store.Migrate(ctx, pool, a.log); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tc, err := worker.Dial(dctx, temporalAddress, e.namespace, a.log.With("component", "temporal"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if !ok {
			tc.Close()
		}
	}()
	workspaces, err := a.apiWorkspaces(ctx, o.view)
	if err != nil {
		return nil, err
	}
	tasks := &taskclient.Client{Temporal: tc, TaskQueue: e.taskQueue, DB: pool}
	view := taskview.New(pool)
	srv, err := api.New(api.Config{
		Tasks:   tasks,
		Reader:  view,
		Decider: &taskclient.Decider{Temporal: tc, View: view},
		Workers: tasks.WorkersPolling,
		Exists: func(ctx context.Context, id string) error {
			_, err := tc.DescribeWorkflow(ctx, id, "")
			return err
		},
		DB:         pool,
		Workspaces: workspaces,
		Tokens:     e.apiTokens,
		Console:    consoleHandler(),
		TemporalUI: o.temporalUI,
		Namespace:  e.namespace,
		Logger:     a.log.With("component", "api"),
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", listen, err)
	}
	ok = true
	s := &apiServer{url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	go func() {
		err := srv.Serve(ctx, ln)
		tc.Close()
		pool.Close()
		s.done <- err
	}()
	a.log.Info("api listening", slog.String("url", s.url), slog.Bool("tokens", len(e.apiTokens) > 0))
	return s, nil
}

// apiWorkspaces is the API's reader of checkpoints, or nil when no remote is known.
func (a *app) apiWorkspaces(ctx context.Context, o *workspaceViewOptions) (*workspace.Manager, error) {
	if o == nil || (o.remote == "" && a.env.defaultWorkspaceRemote() == "") {
		a.log.Info("no workspace remote: the API shows no diffs and publishes nothing (set DROVER_WORKSPACE_REMOTE)")
		return nil, nil
	}
	return a.workspaceView(ctx, o)
}
