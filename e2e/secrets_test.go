package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/google/uuid"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/drover-run/drover/claudecode"
	fa "github.com/drover-run/drover/internal/offlinemodel"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// A worker whose API key and MCP credentials are canaries runs a turn of a task whose MCP
// servers name those credentials as ${VAR}: the credentials reach the API and the MCP servers,
// and appear in none of the worker's debug log, the event log, the debug capture, the
// workflow's Temporal history, the exported spans, or any process's command line. The MCP
// configuration reaches the CLI as a private file that is gone once the CLI stops.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	canary := func(what string) string {
		return "canary-" + what + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	secrets := map[string]string{
		"API key":          canary("apikey"),
		"MCP server env":   canary("mcpenv"),
		"MCP server token": canary("mcptoken"),
	}
	// The worker's environment holds the MCP credentials under these names; the task's
	// parameters only name them.
	const envVar, tokenVar = "SOAKTEST_MCP_ENV_SECRET", "SOAKTEST_MCP_TOKEN"

	api := newKeyCheckingProxy(t, e.fake.URL(), secrets["API key"])
	httpMCP := newRecordingMCPServer(t)
	spans := newOTLPCollector(t)
	mcpenv := buildTestProgram(t, "./testdata/mcpenv")
	envRecord := filepath.Join(t.TempDir(), "mcpenv.json")
	captureDir := t.TempDir()

	host := "secrets-" + e.queue
	cmd := exec.Command(suite.drover, "worker", "--keep-alive", "2m")
	cmd.Dir = captureDir
	cmd.Env = withEnv(e.workerEnv(host, "debug"),
		"ANTHROPIC_API_KEY="+secrets["API key"],
		"ANTHROPIC_BASE_URL="+api.URL,
		envVar+"="+secrets["MCP server env"],
		tokenVar+"="+secrets["MCP server token"],
		"DROVER_DEBUG_AGENT_MESSAGES=true",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://"+spans.addr,
		"OTEL_BSP_SCHEDULE_DELAY=200",
	)
	w := launchWorker(t, t, host, cmd)

	params := e.params()
	params.Profile.MCPServers = map[string]task.MCPServer{
		"witness-stdio": {Command: mcpenv, Args: []string{envRecord}, Env: map[string]string{
			"WITNESS_SECRET": "${" + envVar + "}",
		}},
		"witness-http": {Type: "http", URL: httpMCP.URL + "/mcp", Headers: map[string]string{
			"Authorization": "Bearer ${" + tokenVar + "}",
		}},
	}
	release := make(chan struct{})
	e.fake.Enqueue(fa.Reply(fa.Text("STREAMING-WITH-SECRETS"), fa.Text("finished")).WithHold(1, release))
	id := e.taskID("secrets")
	if _, err := e.tc.Start(e.ctx, id, params, task.Prompt{Text: "prompt with no secret in it"}, ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the turn to stream", func() bool {
		_, ok := streamed(e.events(id), 0, "STREAMING-WITH-SECRETS")
		return ok
	})

	// While the turn runs: no command line on the host shows a secret, and the CLI's MCP
	// configuration is a private file.
	tag := host + "/"
	procs := tagged(tag)
	var guard, cli []string
	for _, p := range procs {
		switch {
		case slices.Contains(p.args, "__guard"):
			guard = p.args
		case len(p.args) > 0 && p.args[0] == suite.claudeBin:
			cli = p.args
		}
	}
	if guard == nil || cli == nil {
		t.Fatalf("the guard (%v) or the CLI (%v) not found among the processes tagged %s: %v", guard, cli, tag, procs)
	}
	checkCommandLines(t, secrets)
	var mcpConfig string
	for _, a := range cli {
		if v, ok := strings.CutPrefix(a, "--mcp-config="); ok {
			mcpConfig = v
		}
	}
	if !filepath.IsAbs(mcpConfig) {
		t.Fatalf("the CLI's --mcp-config is %q, want the path of a file", mcpConfig)
	}
	checkPrivateFile(t, mcpConfig)
	if b, err := os.ReadFile(mcpConfig); err != nil || !strings.Contains(string(b), "${"+envVar+"}") {
		t.Errorf("the MCP configuration file (%v) does not name ${%s}:\n%s", err, envVar, b)
	}

	close(release)
	e.waitTurns(id, 1)
	w.stop() // stops the CLI, which removes its configuration, and flushes the spans
	if _, err := os.Stat(mcpConfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the MCP configuration file is still there after the CLI stopped (%v)", err)
	}
	if _, err := os.Stat(filepath.Dir(mcpConfig)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the MCP configuration folder is still there after the CLI stopped (%v)", err)
	}

	// The mechanism works: the credentials reached the API and both MCP servers.
	if api.matched.Load() == 0 || api.other.Load() != 0 {
		t.Errorf("API requests with the worker's key: %d, with another or none: %d", api.matched.Load(), api.other.Load())
	}
	var seen map[string]string
	if b, err := os.ReadFile(envRecord); err != nil {
		t.Errorf("the stdio MCP server did not record its environment: %v", err)
	} else if err := json.Unmarshal(b, &seen); err != nil {
		t.Errorf("the stdio MCP server's record: %v", err)
	}
	if seen["WITNESS_SECRET"] != secrets["MCP server env"] {
		t.Errorf("the stdio MCP server got WITNESS_SECRET=%q, want the worker's %s", seen["WITNESS_SECRET"], envVar)
	}
	if got := httpMCP.authorizations(); len(got) == 0 || !allEqual(got, "Bearer "+secrets["MCP server token"]) {
		t.Errorf("the HTTP MCP server got %d requests, authorizations %q", len(got), got)
	}

	// Nowhere else.
	sinks := map[string][]byte{"the worker's log": []byte(w.log.String())}
	if !strings.Contains(w.log.String(), `"level":"DEBUG"`) && !strings.Contains(w.log.String(), "level=DEBUG") {
		t.Errorf("the worker logged nothing at debug level:\n%s", w.log.String())
	}
	evs, err := store.ListEvents(e.ctx, e.db(), id, 0, 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events: %d, %v", len(evs), err)
	}
	for _, ev := range evs {
		sinks["event "+strconv.FormatInt(ev.Seq, 10)] = append([]byte(ev.Type+" "), ev.Payload...)
	}
	captures, _ := filepath.Glob(filepath.Join(captureDir, "*.jsonl"))
	if len(captures) < 2 {
		t.Errorf("debug capture files in the worker's folder: %v, want raw and normalized", captures)
	}
	for _, f := range captures {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			t.Errorf("debug capture %s: %d bytes, %v", f, len(b), err)
		}
		sinks["debug capture "+filepath.Base(f)] = b
	}
	history := workflowHistory(t, e, id)
	if !bytes.Contains(history, []byte("${"+envVar+"}")) || !bytes.Contains(history, []byte("prompt with no secret in it")) {
		t.Error("the workflow's history holds neither the task's MCP configuration nor its prompt: searched the wrong place")
	}
	sinks["the workflow's history"] = history
	exported := spans.dump(t)
	if !bytes.Contains(exported, []byte("drover.turn")) {
		t.Errorf("no drover.turn span reached the collector (%d bytes exported)", len(exported))
	}
	sinks["the exported spans"] = exported
	for where, b := range sinks {
		for what, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("the %s appears in %s", what, where)
			}
		}
	}
}

// withEnv returns env with each KEY=VALUE of set replacing or adding KEY.
func withEnv(env []string, set ...string) []string {
	out := make([]string, 0, len(env)+len(set))
	keys := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// buildTestProgram builds the main package at pkg (relative to this package) once per test.
func buildTestProgram(t *testing.T, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, b)
	}
	return out
}

// keyCheckingProxy forwards to the fake Messages API and counts the requests that carry the
// expected API key, and those that do not, without keeping any key.
type keyCheckingProxy struct {
	*httptest.Server
	matched, other atomic.Int64
}

func newKeyCheckingProxy(t *testing.T, target, key string) *keyCheckingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &keyCheckingProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == key {
			p.matched.Add(1)
		} else {
			p.other.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// recordingMCPServer is a remote (streamable HTTP) MCP server that answers initialize and
// tools/list, and records the Authorization header of every request.
type recordingMCPServer struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func newRecordingMCPServer(t *testing.T) *recordingMCPServer {
	t.Helper()
	s := &recordingMCPServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *recordingMCPServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed) // no server-to-client stream
		return
	}
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if b, err := io.ReadAll(r.Body); err != nil || json.Unmarshal(b, &req) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if len(req.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	var result any = map[string]any{}
	switch req.Method {
	case "initialize":
		result = map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]any{"name": "witness-http", "version": "1.0.0"}}
	case "tools/list":
		result = map[string]any{"tools": []any{}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
}

func (s *recordingMCPServer) authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

func allEqual(ss []string, want string) bool {
	for _, s := range ss {
		if s != want {
			return false
		}
	}
	return true
}

// otlpCollector is an OTLP/gRPC trace collector that keeps what it is sent.
type otlpCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	addr string
	mu   sync.Mutex
	reqs []*collectortrace.ExportTraceServiceRequest
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &otlpCollector{addr: ln.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, c)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return c
}

func (c *otlpCollector) Export(_ context.Context, r *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, proto.Clone(r).(*collectortrace.ExportTraceServiceRequest))
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// dump is everything exported, as protobuf and as JSON.
func (c *otlpCollector) dump(t *testing.T) []byte {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []byte
	for _, r := range c.reqs {
		for _, m := range []func(proto.Message) ([]byte, error){proto.Marshal, protojson.Marshal} {
			b, err := m(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(append(out, b...), '\n')
		}
	}
	return out
}

// workflowHistory is every event of the task's workflow history, as protobuf (payloads keep
// their JSON bytes as they are) and as JSON.
func workflowHistory(t *testing.T, e *env, id string) []byte {
	t.Helper()
	it := e.tc.Temporal.GetWorkflowHistory(e.ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []byte
	n := 0
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("reading the history of %s: %v", id, err)
		}
		n++
		for _, m := range []func(proto.Message) ([]byte, error){proto.Marshal, protojson.Marshal} {
			b, err := m(ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(append(out, b...), '\n')
		}
	}
	if n == 0 {
		t.Fatalf("the workflow %s has no history", id)
	}
	return out
}

// proc is a process seen in /proc.
type proc struct {
	pid  int
	args []string
}

// tagged lists the live processes whose claudecode.TagEnv value starts with prefix.
func tagged(prefix string) []proc {
	var out []proc
	for _, pid := range allPIDs() {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte(claudecode.TagEnv+"=")); ok && bytes.HasPrefix(v, []byte(prefix)) {
				out = append(out, proc{pid: pid, args: cmdline(pid)})
				break
			}
		}
	}
	return out
}

// checkCommandLines fails t if the command line of any process on the host holds a secret.
func checkCommandLines(t *testing.T, secrets map[string]string) {
	t.Helper()
	for _, pid := range allPIDs() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			continue
		}
		for what, s := range secrets {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("the command line of process %d shows the %s: %q", pid, what, cmdline(pid))
			}
		}
	}
}

func allPIDs() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, d := range entries {
		if pid, err := strconv.Atoi(d.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// checkPrivateFile fails t unless path is a regular file readable by its owner only, in a
// folder no one else may enter or list, both owned by this process's user.
func checkPrivateFile(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("the MCP configuration file: %v", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("the MCP configuration file %s has mode %v, want a regular file with -rw-------", path, fi.Mode())
	}
	di, err := os.Lstat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if !di.IsDir() || di.Mode().Perm()&0o077 != 0 {
		t.Errorf("the MCP configuration folder %s has mode %v, want no access for group or others", filepath.Dir(path), di.Mode())
	}
	for _, x := range []os.FileInfo{fi, di} {
		if uid := ownerOf(x); uid != os.Getuid() {
			t.Errorf("%s is owned by uid %d, not the worker's %d", x.Name(), uid, os.Getuid())
		}
	}
}

// ownerOf is the uid that owns the file fi describes.
func ownerOf(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
