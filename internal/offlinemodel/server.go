package offlinemodel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Config configures a Server. The zero value is ready to use.
type Config struct {
	// Addr is the address to listen on. It must be a loopback address
	// (127.0.0.0/8, ::1 or localhost); anything else is refused. Defaults to
	// "127.0.0.1:0", a free port.
	Addr string

	// Responder, if set, answers requests that their class's queue does not
	// cover: main and subagent requests whose queue is empty, and every
	// compaction and auxiliary request (check Request.Class). Returning false
	// falls back to the automatic answer. It is called from request
	// goroutines, possibly concurrently.
	Responder func(*Request) (Response, bool)

	// DefaultText is the text of the reply to a main or subagent request
	// that nothing answered. Defaults to the DefaultText constant.
	DefaultText string

	// Models adds models to the built-in ones (see BuiltinModels), or
	// replaces built-in ones of the same id. A request for a model in
	// neither is refused as the API refuses it: 404 not_found_error
	// "model: NAME".
	Models map[string]Model

	// CacheSplit shares the estimated prompt tokens of an answer without
	// WithUsage between cache reads, cache writes and plain input. Nil means
	// DefaultCacheSplit; a zero CacheSplit reports every prompt token as
	// plain input.
	CacheSplit *CacheSplit

	// RateLimit, if set, is sent as anthropic-ratelimit-* headers with
	// every answer to a Messages request, errors and refusals included. A
	// Response's own RateLimit replaces it.
	RateLimit *RateLimit

	// ShutdownTimeout bounds how long Close waits for answers in progress.
	// Defaults to 5s.
	ShutdownTimeout time.Duration

	// MaxBodyBytes bounds a request body. Defaults to 64 MiB.
	MaxBodyBytes int64

	// Logger receives one record per request and per injected failure. It
	// never sees headers or bodies, and names accounts by their label only.
	// Nil means silent.
	Logger *slog.Logger

	// Clock tells the time for account limits (when they lift, what
	// retry-after says) and for the request log (Calls). Nil means
	// time.Now.
	Clock func() time.Time

	// answered, if set, is told when the answer to a streaming request ends,
	// with the error that cut it short, if any. Tests use it.
	answered func(seq int, err error)
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.DefaultText == "" {
		c.DefaultText = DefaultText
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 5 * time.Second
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 64 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.CacheSplit == nil {
		split := DefaultCacheSplit
		c.CacheSplit = &split
	}
	return c
}

func (c Config) validate() error {
	if sp := c.CacheSplit; sp.Read < 0 || sp.Write < 0 || sp.Read+sp.Write > 1 {
		return fmt.Errorf("cache split %+v: each share must be at least 0 and together at most 1", *sp)
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", c.Addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: only loopback addresses are allowed", c.Addr)
	}
	return nil
}

// Server is a running fake Messages API. Its methods are safe for concurrent
// use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	url     string
	httpSrv *http.Server
	served  chan struct{} // closed when Serve returns

	closing   chan struct{} // closed by Close: cuts held and delayed answers
	closeOnce sync.Once
	closeErr  error

	mu         sync.Mutex
	seq        int
	requests   []Request
	mainQueue  []Response
	subQueue   []Response
	unscripted int
	rejections []Rejection
	ledger     []LedgerEntry
	limits     map[Account]AccountLimit
	quotas     map[Account]Quota
	calls      []Call
	callIndex  map[int]int // Seq → index in calls
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("starting offline model: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("starting offline model: %w", err)
	}
	s := &Server{
		cfg:       cfg,
		log:       cfg.Logger,
		url:       "http://" + ln.Addr().String(),
		served:    make(chan struct{}),
		closing:   make(chan struct{}),
		limits:    map[Account]AccountLimit{},
		quotas:    map[Account]Quota{},
		callIndex: map[int]int{},
	}
	s.httpSrv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	go func() {
		defer close(s.served)
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("offline model: serving", "err", err)
		}
	}()
	s.log.Info("offline model: listening", "url", s.url)
	return s, nil
}

// URL returns the base URL to use as ANTHROPIC_BASE_URL, for example
// "http://127.0.0.1:41234".
func (s *Server) URL() string {
	return s.url
}

// Close stops the server: it cuts held and delayed answers, waits up to
// Config.ShutdownTimeout for answers in progress, then closes what is left.
// It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		defer cancel()
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			s.closeErr = fmt.Errorf("closing offline model: %w", err)
			_ = s.httpSrv.Close()
		}
		<-s.served
	})
	return s.closeErr
}

// Enqueue appends responses to the main conversation's queue. Each main
// request takes the next one, in order.
func (s *Server) Enqueue(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mainQueue = append(s.mainQueue, rs...)
}

// EnqueueSubagent appends responses to the subagents' queue. Each subagent
// request (of any subagent) takes the next one, in order.
func (s *Server) EnqueueSubagent(rs ...Response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subQueue = append(s.subQueue, rs...)
}

// Pending returns how many scripted responses are still queued, main and
// subagent together.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mainQueue) + len(s.subQueue)
}

// Unscripted returns how many main-conversation requests got the default
// reply because neither the queue nor the Responder answered them.
func (s *Server) Unscripted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unscripted
}

// Requests returns every request received so far, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// MainRequests returns the main conversation's requests, in order.
func (s *Server) MainRequests() []Request {
	return s.RequestsOf(ClassMain)
}

// RequestsOf returns the requests of one class, in order.
func (s *Server) RequestsOf(c Class) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if r.Class == c {
			out = append(out, r)
		}
	}
	return out
}

// Invalid returns the requests the server refused because the real API
// would refuse them (see the package documentation), in order. The pinned
// CLI sends none in any scenario it was run through, so a test that drives
// the CLI should find none.
func (s *Server) Invalid() []Rejection {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Rejection(nil), s.rejections...)
}

// CheckValid returns nil if the server refused no request, else an error
// that lists every refusal. Harnesses call it at the end of a test.
func (s *Server) CheckValid() error {
	bad := s.Invalid()
	if len(bad) == 0 {
		return nil
	}
	lines := make([]string, 0, len(bad))
	for _, r := range bad {
		lines = append(lines, "  "+r.String())
	}
	return fmt.Errorf("the fake Messages API refused %d invalid request(s):\n%s", len(bad), strings.Join(lines, "\n"))
}

// model looks a model up in Config.Models, then in the built-in ones.
func (s *Server) model(id string) (Model, bool) {
	if m, ok := s.cfg.Models[id]; ok {
		return m, true
	}
	return BuiltinModel(id)
}

// now is the server's clock.
func (s *Server) now() time.Time {
	return s.cfg.Clock()
}

// record numbers r (setting r.Seq), stores a copy and starts its call in
// the request log.
func (s *Server) record(r *Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	r.Seq = s.seq
	s.requests = append(s.requests, *r)
	s.callIndex[r.Seq] = len(s.calls)
	s.calls = append(s.calls, Call{Seq: r.Seq, Account: r.Account, Class: r.Class, Path: r.Path, Start: r.Received})
}

// answerSource tells where an answer came from, for logs.
type answerSource string

const (
	fromQueue     answerSource = "queue"
	fromResponder answerSource = "responder"
	fromAuto      answerSource = "automatic"
	fromDefault   answerSource = "default"
)

// choose picks the answer to a /v1/messages request: its class's queue, then
// the Responder, then the automatic or default answer.
func (s *Server) choose(r *Request) (Response, answerSource) {
	s.mu.Lock()
	var q *[]Response
	switch r.Class {
	case ClassMain:
		q = &s.mainQueue
	case ClassSubagent:
		q = &s.subQueue
	}
	if q != nil && len(*q) > 0 {
		resp := (*q)[0]
		*q = (*q)[1:]
		s.mu.Unlock()
		return resp, fromQueue
	}
	s.mu.Unlock()

	if s.cfg.Responder != nil {
		if resp, ok := s.cfg.Responder(r); ok {
			return resp, fromResponder
		}
	}
	switch r.Class {
	case ClassMain, ClassSubagent:
		if r.Class == ClassMain {
			s.mu.Lock()
			s.unscripted++
			s.mu.Unlock()
		}
		return Reply(Text(s.cfg.DefaultText)), fromDefault
	default:
		return autoReply(r), fromAuto
	}
}
