package claudecode

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const testSecret = "sk-ant-test-0123456789abcdef"

func fullCommand() Command {
	return Command{
		Path:                      "/opt/claude",
		Dir:                       "/work",
		Model:                     "claude-opus-4-1",
		PermissionMode:            PermissionAcceptEdits,
		PermissionPromptToolStdio: true,
		IncludePartialMessages:    true,
		ReplayUserMessages:        true,
		ForwardSubagentText:       true,
		Resume:                    "11111111-2222-4333-8444-555555555555",
		ResumeSessionAt:           "22222222-2222-4333-8444-555555555555",
		MaxTurns:                  7,
		MCPServers: map[string]MCPServer{
			"gh": {Type: "http", URL: "https://mcp.example/gh", Headers: map[string]string{"Authorization": "Bearer " + testSecret}},
			"fs": {Command: "mcp-fs", Args: []string{"--root", "/work"}, Env: map[string]string{"FS_TOKEN": testSecret}},
		},
		StrictMCPConfig:    true,
		AllowedTools:       []string{"Read", "Bash(git log:*)"},
		DisallowedTools:    []string{"WebFetch"},
		AppendSystemPrompt: "it's \"quoted\" $HOME; rm -rf /",
		ExtraArgs:          []string{"--settings", "{}"},
		Env:                []string{"PATH=/bin", "ANTHROPIC_API_KEY=from-parent", "KEEP=1"},
		APIKey:             testSecret,
		BaseURL:            "http://127.0.0.1:9",
		ConfigDir:          "/cfg",
	}
}

func TestCommandArgs(t *testing.T) {
	t.Parallel()
	c := fullCommand()
	want := []string{
		"-p", "--output-format=stream-json", "--input-format=stream-json", "--verbose",
		"--model=claude-opus-4-1", "--permission-mode=acceptEdits", "--permission-prompt-tool=stdio",
		"--include-partial-messages", "--replay-user-messages", "--forward-subagent-text",
		"--resume=11111111-2222-4333-8444-555555555555", "--resume-session-at=22222222-2222-4333-8444-555555555555",
		"--max-turns=7",
		`--mcp-config={"mcpServers":{"fs":{"command":"mcp-fs","args":["--root","/work"],"env":{"FS_TOKEN":"` + testSecret + `"}},"gh":{"type":"http","url":"https://mcp.example/gh","headers":{"Authorization":"Bearer ` + testSecret + `"}}}}`,
		"--strict-mcp-config", "--allowedTools=Read", "--allowedTools=Bash(git log:*)", "--disallowedTools=WebFetch",
		`--append-system-prompt=it's "quoted" $HOME; rm -rf /`, "--settings", "{}",
	}
	if got := c.Args(); !reflect.DeepEqual(got, want) {
		t.Errorf("Args() =\n%q\nwant\n%q", got, want)
	}
	if got := (&Command{Path: "x"}).Args(); !reflect.DeepEqual(got, []string{"-p", "--output-format=stream-json", "--input-format=stream-json", "--verbose"}) {
		t.Errorf("minimal Args() = %q", got)
	}
	minimal := Command{Path: "x", SessionID: "33333333-2222-4333-8444-555555555555", DangerouslySkipPermissions: true,
		PermissionMode: PermissionBypass, SystemPrompt: "s"}
	got := minimal.Args()
	for _, a := range []string{"--session-id=33333333-2222-4333-8444-555555555555", "--dangerously-skip-permissions",
		"--permission-mode=bypassPermissions", "--system-prompt=s"} {
		if !slices.Contains(got, a) {
			t.Errorf("Args() = %q lacks %s", got, a)
		}
	}
	for _, a := range c.Args() {
		if strings.Contains(a, "from-parent") {
			t.Error("an environment value leaked into the arguments")
		}
	}
	if strings.Contains(strings.Join(c.Args(), " "), "ANTHROPIC_API_KEY") {
		t.Error("the API key variable appears in the arguments")
	}
}

func TestCommandValidate(t *testing.T) {
	t.Parallel()
	ok := Command{Path: "claude"}
	const u = "11111111-2222-4333-8444-555555555555"
	bad := map[string]Command{
		"no path":                   {},
		"unknown mode":              {Path: "c", PermissionMode: "yolo"},
		"resume-at without resume":  {Path: "c", ResumeSessionAt: u},
		"fork without resume":       {Path: "c", ForkSession: true},
		"session id with resume":    {Path: "c", Resume: u, SessionID: u},
		"resume not a uuid":         {Path: "c", Resume: "abc"},
		"resume-at not a uuid":      {Path: "c", Resume: u, ResumeSessionAt: "msg_1"},
		"session id not a uuid":     {Path: "c", SessionID: "--evil"},
		"negative turns":            {Path: "c", MaxTurns: -1},
		"stdio mcp without command": {Path: "c", MCPServers: map[string]MCPServer{"x": {}}},
		"http mcp without url":      {Path: "c", MCPServers: map[string]MCPServer{"x": {Type: "http"}}},
		"unknown mcp type":          {Path: "c", MCPServers: map[string]MCPServer{"x": {Type: "ws", URL: "u"}}},
		"NUL in an argument":        {Path: "c", AppendSystemPrompt: "a\x00b"},
		"NUL in the API key":        {Path: "c", APIKey: "k\x00"},
		"NUL in the environment":    {Path: "c", Env: []string{"A=\x00"}},
	}
	ctx := context.Background()
	if _, err := ok.Build(ctx); err != nil {
		t.Errorf("valid command: %v", err)
	}
	forked := Command{Path: "c", Resume: u, SessionID: u, ForkSession: true, ResumeSessionAt: u}
	if _, err := forked.Build(ctx); err != nil {
		t.Errorf("fork with a new session id: %v", err)
	}
	for name, c := range bad {
		if _, err := c.Build(ctx); err == nil {
			t.Errorf("%s: Build accepted it", name)
		}
	}
}

func TestCommandEnvAndBuild(t *testing.T) {
	t.Parallel()
	c := fullCommand()
	cmd, err := c.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != "/opt/claude" || !reflect.DeepEqual(cmd.Args[1:], c.Args()) || cmd.Dir != "/work" {
		t.Errorf("cmd = %v %q in %s", cmd.Path, cmd.Args, cmd.Dir)
	}
	if cmd.SysProcAttr == nil || !cmd.SysProcAttr.Setpgid || cmd.Cancel == nil || cmd.WaitDelay != 5*time.Second {
		t.Errorf("process group / cancel / wait delay not set: %+v %v %v", cmd.SysProcAttr, cmd.Cancel != nil, cmd.WaitDelay)
	}
	want := []string{"PATH=/bin", "KEEP=1", "ANTHROPIC_API_KEY=" + testSecret, "ANTHROPIC_BASE_URL=http://127.0.0.1:9", "CLAUDE_CONFIG_DIR=/cfg"}
	if n := len(cmd.Env); n == 0 || !reflect.DeepEqual(cmd.Env[:n-1], want) || !strings.HasPrefix(cmd.Env[n-1], TagEnv+"=claude/") {
		t.Errorf("Env = %q, want %q and a tag", cmd.Env, want)
	}
	if cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Errorf("the CLI does not die with its host: Pdeathsig %v", cmd.SysProcAttr.Pdeathsig)
	}
	again, err := c.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if again.Env[len(again.Env)-1] == cmd.Env[len(cmd.Env)-1] {
		t.Error("two processes got the same tag")
	}

	bypass := Command{Path: "c", PermissionMode: PermissionBypass, Env: []string{}}
	skip := Command{Path: "c", DangerouslySkipPermissions: true, Env: []string{}}
	plain := Command{Path: "c", Env: []string{}}
	root := os.Geteuid() == 0
	for _, tc := range []struct {
		c    Command
		want bool
	}{{bypass, root}, {skip, root}, {plain, false}} {
		if got := slices.Contains(tc.c.Environ(), "IS_SANDBOX=1"); got != tc.want {
			t.Errorf("IS_SANDBOX in %+v: %v, want %v (root %v)", tc.c, got, tc.want, root)
		}
	}
	// Nothing of this process's environment is inherited unless given in Env.
	for _, kv := range (&Command{Path: "c"}).Environ() {
		if k, _, _ := strings.Cut(kv, "="); os.Getenv(k) != "" && k != "IS_SANDBOX" {
			t.Errorf("nil Env inherited %s from this process", k)
		}
	}
}

func TestCommandRedaction(t *testing.T) {
	t.Parallel()
	c := fullCommand()
	s := c.String()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "cmd", &c)
	for name, out := range map[string]string{"String": s, "LogValue": buf.String()} {
		if strings.Contains(out, testSecret) || strings.Contains(out, "from-parent") {
			t.Errorf("%s leaks a secret: %s", name, out)
		}
		if !strings.Contains(out, Redacted) || !strings.Contains(out, "--max-turns=7") {
			t.Errorf("%s lost the command line: %s", name, out)
		}
	}
	if !strings.Contains(buf.String(), `"env_names":["PATH","KEEP","ANTHROPIC_API_KEY"`) {
		t.Errorf("LogValue should list variable names: %s", buf.String())
	}
	// Redacting did not touch the command itself.
	if !strings.Contains(strings.Join(c.Args(), " "), testSecret) {
		t.Error("redaction modified the real MCP configuration")
	}
}
