// Package devserver runs the pinned Temporal CLI's development server as a child
// process: on loopback, optionally backed by a SQLite file so that its state
// survives a restart, and stopped together with its whole process group.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Config describes one dev server.
type Config struct {
	// Bin is the path of the temporal CLI. Required.
	Bin string
	// IP is the address to listen on. Defaults to 127.0.0.1.
	IP string
	// Port is the gRPC frontend port. Defaults to a free port.
	Port int
	// UIPort is the web UI port; 0 with Headless false picks Port+1000 as the
	// CLI does. Ignored when Headless.
	UIPort int
	// Headless disables the web UI.
	Headless bool
	// DBFile keeps the server's state in this SQLite file (with WAL journaling).
	// Empty means in memory.
	DBFile string
	// Namespace is created at start. Defaults to "default".
	Namespace string
	// SearchAttributes are registered at start, name → type (Keyword, Text,
	// Int, Double, Bool, Datetime, KeywordList).
	SearchAttributes map[string]string
	// Retention, when set, is how long the namespace keeps a closed workflow's history, set at
	// every start (the dev server registers its namespaces with a day). drover dev sets it to
	// the archive job's retention, so that Temporal and Postgres keep a finished task as long.
	Retention time.Duration
	// Log receives the server's own output. Nil discards it.
	Log io.Writer
	// Logger reports lifecycle events. Nil means silent.
	Logger *slog.Logger
	// StartTimeout bounds the wait for the frontend. Defaults to 60s.
	StartTimeout time.Duration
}

func (c *Config) withDefaults() error {
	if c.IP == "" {
		c.IP = "127.0.0.1"
	}
	if c.Namespace == "" {
		c.Namespace = "default"
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 60 * time.Second
	}
	if c.Port == 0 {
		p, err := FreePort(c.IP)
		if err != nil {
			return err
		}
		c.Port = p
	}
	if !c.Headless && c.UIPort == 0 {
		c.UIPort = c.Port + 1000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (c *Config) validate() error {
	if c.Bin == "" {
		return errors.New("devserver: the temporal CLI path is required (run scripts/tools.sh)")
	}
	if _, err := os.Stat(c.Bin); err != nil {
		return fmt.Errorf("devserver: temporal CLI: %w (run scripts/tools.sh)", err)
	}
	return nil
}

// Server is a running dev server.
type Server struct {
	cfg  Config
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	stopOnce sync.Once
}

// Start launches the server and returns once its frontend answers a health check.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, fmt.Errorf("devserver: %w", err)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	args := []string{"server", "start-dev",
		"--ip", cfg.IP,
		"--port", strconv.Itoa(cfg.Port),
		"--namespace", cfg.Namespace,
		"--log-level", "warn",
		// Task queue priorities: a host takes a task's next turn, on its warm process, before
		// other tasks' first turns (workflows.warmTurnPriority).
		"--dynamic-config-value", "matching.useNewMatcher=true",
	}
	if cfg.Headless {
		args = append(args, "--headless")
	} else {
		args = append(args, "--ui-port", strconv.Itoa(cfg.UIPort), "--ui-ip", cfg.IP)
	}
	if cfg.DBFile != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.DBFile), 0o755); err != nil {
			return nil, fmt.Errorf("devserver: creating the state folder: %w", err)
		}
		args = append(args, "--db-filename", cfg.DBFile,
			"--sqlite-pragma", "journal_mode=wal",
			"--sqlite-pragma", "synchronous=normal")
	}
	for _, name := range sortedKeys(cfg.SearchAttributes) {
		args = append(args, "--search-attribute", name+"="+cfg.SearchAttributes[name])
	}
	cmd := exec.Command(cfg.Bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out := cfg.Log
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devserver: starting temporal: %w", err)
	}
	s := &Server{cfg: cfg, cmd: cmd, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	cfg.Logger.Info("temporal dev server starting", "address", s.Address(), "pid", cmd.Process.Pid, "db", cfg.DBFile)
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	if err := s.setRetention(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// setRetention sets the namespace's retention of closed histories to Config.Retention.
func (s *Server) setRetention(ctx context.Context) error {
	if s.cfg.Retention <= 0 {
		return nil
	}
	c, err := client.Dial(client.Options{HostPort: s.Address(), Namespace: s.cfg.Namespace, Logger: nopLogger{}})
	if err != nil {
		return fmt.Errorf("devserver: setting the namespace's retention: %w", err)
	}
	defer c.Close()
	_, err = c.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{Namespace: s.cfg.Namespace,
		Config: &namespacepb.NamespaceConfig{WorkflowExecutionRetentionTtl: durationpb.New(s.cfg.Retention)}})
	if err != nil {
		return fmt.Errorf("devserver: setting the namespace's retention to %s: %w", s.cfg.Retention, err)
	}
	return nil
}

// Address is the frontend's host:port.
func (s *Server) Address() string {
	return net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.Port))
}

// UIAddress is the web UI's URL, or "" when headless.
func (s *Server) UIAddress() string {
	if s.cfg.Headless {
		return ""
	}
	return "http://" + net.JoinHostPort(s.cfg.IP, strconv.Itoa(s.cfg.UIPort))
}

// Namespace is the namespace created at start.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// Done is closed when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return fmt.Errorf("devserver: temporal exited during start: %v", s.err)
		case <-ctx.Done():
			return fmt.Errorf("devserver: waiting for %s: %w", s.Address(), ctx.Err())
		case <-tick.C:
		}
		conn, err := net.DialTimeout("tcp", s.Address(), time.Second)
		if err != nil {
			continue
		}
		_ = conn.Close()
		c, err := client.Dial(client.Options{HostPort: s.Address(), Namespace: s.cfg.Namespace, Logger: nopLogger{}})
		if err != nil {
			continue
		}
		_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
		if err == nil {
			// The namespace may lag behind the frontend.
			_, err = c.WorkflowService().DescribeNamespace(ctx, describeNamespace(s.cfg.Namespace))
		}
		c.Close()
		if err == nil {
			return nil
		}
	}
}

// Stop ends the server: SIGTERM to its process group, then SIGKILL after 10s.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		pgid := s.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-s.done
		}
		// Anything the server left in its group goes too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		s.cfg.Logger.Info("temporal dev server stopped", "address", s.Address())
	})
	return nil
}

// Kill ends the server at once with SIGKILL, as a crash would.
func (s *Server) Kill() {
	s.stopOnce.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	})
}

// FreePort asks the kernel for a free TCP port on ip.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
