package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCLI plays the CLI's side of a Client over two pipes.
type fakeCLI struct {
	t      *testing.T
	client *Client
	stdin  *Reader        // what the client writes
	stdout *io.PipeWriter // what the "CLI" writes
	inR    *io.PipeReader
}

func newFakeCLI(t *testing.T, cfg ClientConfig) *fakeCLI {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	f := &fakeCLI{t: t, stdin: NewReader(inR), stdout: outW, inR: inR}
	f.client = NewClient(outR, inW, cfg)
	t.Cleanup(func() {
		_ = f.client.Close()
		_ = outW.Close()
		_ = inR.Close()
	})
	return f
}

// say writes lines to the client as the CLI.
func (f *fakeCLI) say(lines ...string) {
	f.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(f.stdout, l+"\n"); err != nil {
			f.t.Fatalf("writing to client: %v", err)
		}
	}
}

// heard returns the next line the client wrote.
func (f *fakeCLI) heard() string {
	f.t.Helper()
	l, err := f.stdin.ReadLine()
	if err != nil {
		f.t.Fatalf("reading client output: %v", err)
	}
	return string(l)
}

// heardRequest returns the next control request the client wrote.
func (f *fakeCLI) heardRequest() (id, subtype string, body map[string]any) {
	f.t.Helper()
	l := f.heard()
	var w struct {
		Type      string         `json:"type"`
		RequestID string         `json:"request_id"`
		Request   map[string]any `json:"request"`
	}
	if err := json.Unmarshal([]byte(l), &w); err != nil || w.Type != TypeControlRequest {
		f.t.Fatalf("expected a control_request, got %s (%v)", l, err)
	}
	st, _ := w.Request["subtype"].(string)
	return w.RequestID, st, w.Request
}

func recv(t *testing.T, c interface {
	Recv(context.Context) (Message, error)
}) Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := c.Recv(ctx)
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return m
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestClientRequestsMatchedByID(t *testing.T) {
	t.Parallel()
	f := newFakeCLI(t, ClientConfig{})
	ctx := context.Background()

	type res struct {
		payload string
		err     error
	}
	usage, interrupt := make(chan res, 1), make(chan res, 1)
	go func() {
		u, err := f.client.GetContextUsage(ctx)
		usage <- res{string(u.Raw), err}
	}()
	id1, st1, _ := f.heardRequest()
	go func() {
		err := f.client.Interrupt(ctx)
		interrupt <- res{"", err}
	}()
	id2, st2, _ := f.heardRequest()
	if id1 == id2 || id1 == "" {
		t.Fatalf("request ids %q and %q are not unique", id1, id2)
	}
	if st1 != RequestGetContextUsage || st2 != RequestInterrupt {
		t.Fatalf("subtypes %q, %q", st1, st2)
	}

	// An answer for an id we never issued (the CLI echoing our own answers) changes nothing; then the
	// answers come in the opposite order.
	f.say(
		`{"type":"control_response","response":{"subtype":"success","request_id":"cli-echo","response":{"behavior":"allow"}}}`,
		`{"type":"control_response","response":{"subtype":"success","request_id":"`+id2+`","response":{"still_queued":[]}}}`,
		`{"response":{"response":{"totalTokens":13439,"maxTokens":1000000,"percentage":1.3,"model":"m","categories":[{"name":"System prompt","tokens":3000}]},"request_id":"`+id1+`","subtype":"success"},"type":"control_response"}`,
		lineResult,
	)
	if r := <-interrupt; r.err != nil {
		t.Errorf("Interrupt: %v", r.err)
	}
	r := <-usage
	if r.err != nil || !strings.Contains(r.payload, `"totalTokens":13439`) {
		t.Errorf("GetContextUsage = %s, %v", r.payload, r.err)
	}
	// control_response lines never reach the consumer: the first message is the result.
	if m := recv(t, f.client); m.Type() != TypeResult {
		t.Errorf("first message is %T, want the result", m)
	}
}

func TestClientTypedRequests(t *testing.T) {
	t.Parallel()
	f := newFakeCLI(t, ClientConfig{})
	ctx := context.Background()

	answer := func(id, payload string) {
		f.say(`{"type":"control_response","response":{"subtype":"success","request_id":"` + id + `","response":` + payload + `}}`)
	}

	done := make(chan error, 1)
	var initResp InitializeResponse
	go func() {
		var err error
		initResp, err = f.client.Initialize(ctx, InitializeRequest{Hooks: map[string][]HookMatcher{"Stop": {{HookCallbackIDs: []string{"s"}}}}})
		done <- err
	}()
	l := f.heard()
	if !strings.Contains(l, `"request":{"subtype":"initialize","hooks":{"Stop":[{"hookCallbackIds":["s"]}]}}`) {
		t.Errorf("initialize line = %s", l)
	}
	var w struct {
		RequestID string `json:"request_id"`
	}
	_ = json.Unmarshal([]byte(l), &w)
	f.say(`{"type":"control_response","response":{"subtype":"success","request_id":"` + w.RequestID +
		`","response":{"commands":[{"name":"review","description":"Review a PR","argumentHint":"<pr>"}],"models":[{"value":"opus","displayName":"Opus"}],"output_style":"default","account":{"email":"x"}}}}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(initResp.Commands) != 1 || initResp.Commands[0] != (SlashCommand{Name: "review", Description: "Review a PR", ArgumentHint: "<pr>"}) ||
		len(initResp.Models) != 1 || initResp.Models[0].Value != "opus" || string(initResp.Account) != `{"email":"x"}` ||
		!strings.HasPrefix(string(initResp.Raw), `{"commands"`) {
		t.Errorf("initialize response = %+v", initResp)
	}

	go func() { done <- f.client.SetPermissionMode(ctx, PermissionPlan) }()
	id, st, body := f.heardRequest()
	if st != RequestSetPermission || body["mode"] != "plan" {
		t.Errorf("set_permission_mode body = %v", body)
	}
	f.say(`{"type":"control_response","response":{"subtype":"error","request_id":"` + id + `","error":"bad mode"}}`)
	var re *RequestError
	if err := <-done; !errors.As(err, &re) || re.Message != "bad mode" || re.Subtype != RequestSetPermission {
		t.Errorf("SetPermissionMode error = %v, want RequestError(bad mode)", err)
	}

	go func() { done <- f.client.SetModel(ctx, "claude-opus-4-1") }()
	id, _, body = f.heardRequest()
	if body["model"] != "claude-opus-4-1" {
		t.Errorf("set_model body = %v", body)
	}
	answer(id, `{}`)
	if err := <-done; err != nil {
		t.Error(err)
	}
	go func() { done <- f.client.SetModel(ctx, "") }()
	id, _, body = f.heardRequest()
	if v, ok := body["model"]; !ok || v != nil {
		t.Errorf("set_model default body = %v, want model:null", body)
	}
	answer(id, `{}`)
	if err := <-done; err != nil {
		t.Error(err)
	}
}

func TestClientRequestTimeoutAndContext(t *testing.T) {
	t.Parallel()
	f := newFakeCLI(t, ClientConfig{RequestTimeout: 20 * time.Millisecond})
	go func() {
		for {
			if _, err := f.stdin.ReadLine(); err != nil {
				return
			}
		}
	}()
	_, err := f.client.Request(context.Background(), "get_context_usage", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unanswered request: %v, want DeadlineExceeded", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("caller gave up")
	cancel(cause)
	if _, err := f.client.Request(ctx, "interrupt", nil); !errors.Is(err, cause) {
		t.Errorf("cancelled request: %v, want the cancel cause", err)
	}
	f.client.mu.Lock()
	n := len(f.client.pending)
	f.client.mu.Unlock()
	if n != 0 {
		t.Errorf("%d requests still pending after giving up", n)
	}
}

func TestClientStreamEnd(t *testing.T) {
	t.Parallel()
	f := newFakeCLI(t, ClientConfig{})
	errc := make(chan error, 1)
	go func() {
		_, err := f.client.Request(context.Background(), "interrupt", nil)
		errc <- err
	}()
	f.heardRequest()
	f.say(lineAssistText, "{oops", lineResult)
	_ = f.stdout.Close()

	if err := <-errc; !errors.Is(err, ErrStreamEnded) {
		t.Errorf("pending request: %v, want ErrStreamEnded", err)
	}
	if m := recv(t, f.client); m.Type() != TypeAssistant {
		t.Errorf("first = %T", m)
	}
	mf, ok := recv(t, f.client).(*Malformed)
	if !ok || mf.Line != 2 || string(mf.Raw()) != "{oops" {
		t.Errorf("second = %+v, want the malformed line 2", mf)
	}
	if m := recv(t, f.client); m.Type() != TypeResult {
		t.Errorf("third = %T", m)
	}
	for range 2 { // the end is sticky
		if _, err := f.client.Recv(context.Background()); !errors.Is(err, io.EOF) {
			t.Errorf("after the end: %v, want io.EOF", err)
		}
	}
	<-f.client.Done()
	if !errors.Is(f.client.Err(), io.EOF) {
		t.Errorf("Err() = %v", f.client.Err())
	}
	if _, err := f.client.Request(context.Background(), "interrupt", nil); !errors.Is(err, ErrStreamEnded) {
		t.Errorf("request after the end: %v", err)
	}
}

func TestClientHandlerAnswers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	f := newFakeCLI(t, ClientConfig{Handler: HandlerFunc(func(ctx context.Context, r *ControlRequest) (any, error) {
		mu.Lock()
		seen = append(seen, r.RequestID)
		mu.Unlock()
		switch {
		case r.CanUseTool != nil && r.CanUseTool.ToolName == "Bash":
			return AllowTool(r.CanUseTool.Input, r.CanUseTool.ToolUseID), nil
		case r.CanUseTool != nil:
			return nil, errors.New("no edits today")
		case r.HookCallback != nil:
			return PreToolUseDecision(DecisionDeny, "too risky"), nil
		}
		panic("unexpected request")
	})})

	f.say(lineCanUseTool)
	if got, want := f.heard(), `{"type":"control_response","response":{"subtype":"success","request_id":"95c6","response":{"behavior":"allow","updatedInput":{"command":"touch made.txt"},"toolUseID":"toolu_1"}}}`; got != want {
		t.Errorf("allow answer:\n got %s\nwant %s", got, want)
	}
	f.say(`{"type":"control_request","request_id":"r-edit","request":{"subtype":"can_use_tool","tool_name":"Edit","input":{},"tool_use_id":"toolu_2"}}`)
	if got, want := f.heard(), `{"type":"control_response","response":{"subtype":"error","request_id":"r-edit","error":"no edits today"}}`; got != want {
		t.Errorf("error answer:\n got %s\nwant %s", got, want)
	}
	f.say(lineHookCB)
	if got, want := f.heard(), `{"type":"control_response","response":{"subtype":"success","request_id":"r-hook","response":{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"too risky"}}}}`; got != want {
		t.Errorf("hook answer:\n got %s\nwant %s", got, want)
	}
	f.say(lineCtlOther) // the handler panics on it
	if got := f.heard(); !strings.HasPrefix(got, `{"type":"control_response","response":{"subtype":"error","request_id":"r-x","error":`) {
		t.Errorf("panic answer = %s", got)
	}
	// The consumer saw every request too.
	for _, id := range []string{"95c6", "r-edit", "r-hook", "r-x"} {
		m, ok := recv(t, f.client).(*ControlRequest)
		if !ok || m.RequestID != id {
			t.Errorf("consumer got %+v, want request %s", m, id)
		}
	}
}

func TestClientDefaultAnswers(t *testing.T) {
	t.Parallel()
	f := newFakeCLI(t, ClientConfig{})
	f.say(lineCanUseTool)
	if got, want := f.heard(), `{"type":"control_response","response":{"subtype":"success","request_id":"95c6","response":{"behavior":"deny","message":"`+NoHandlerMessage+`"}}}`; got != want {
		t.Errorf("no-handler can_use_tool:\n got %s\nwant %s", got, want)
	}
	f.say(lineHookCB)
	if got, want := f.heard(), `{"type":"control_response","response":{"subtype":"success","request_id":"r-hook","response":{}}}`; got != want {
		t.Errorf("no-handler hook:\n got %s\nwant %s", got, want)
	}
	f.say(lineCtlOther)
	if got, want := f.heard(), `{"type":"control_response","response":{"subtype":"error","request_id":"r-x","error":"unsupported control request \"mcp_message\""}}`; got != want {
		t.Errorf("no-handler other:\n got %s\nwant %s", got, want)
	}
}

func TestClientCancelRequest(t *testing.T) {
	t.Parallel()
	causes := make(chan error, 1)
	release := make(chan struct{})
	f := newFakeCLI(t, ClientConfig{Handler: HandlerFunc(func(ctx context.Context, r *ControlRequest) (any, error) {
		if r.RequestID == "95c6" {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return AllowTool(nil, ""), nil // must not be written: the request was withdrawn
		}
		<-release
		return HookOutput{}, nil
	})})

	f.say(lineCanUseTool)
	if m, ok := recv(t, f.client).(*ControlRequest); !ok || m.RequestID != "95c6" {
		t.Fatalf("consumer got %+v", m)
	}
	// While that handler waits, the reader keeps going: a second request and more messages arrive.
	f.say(lineHookCB, lineAssistText)
	if m, ok := recv(t, f.client).(*ControlRequest); !ok || m.RequestID != "r-hook" {
		t.Fatalf("consumer got %+v", m)
	}
	if m := recv(t, f.client); m.Type() != TypeAssistant {
		t.Fatalf("consumer got %T while handlers were busy", m)
	}

	f.say(lineCtlCancel)
	if err := <-causes; !errors.Is(err, ErrRequestCancelled) {
		t.Errorf("handler context cause = %v, want ErrRequestCancelled", err)
	}
	if m, ok := recv(t, f.client).(*ControlCancelRequest); !ok || m.RequestID != "95c6" {
		t.Errorf("consumer got %+v, want the cancel", m)
	}
	close(release)
	// The next (and only) answer on stdin is the hook's: the withdrawn request got none.
	if got := f.heard(); !strings.Contains(got, `"request_id":"r-hook"`) {
		t.Errorf("next answer = %s, want the hook's", got)
	}
}

func TestClientTapAndPrompt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var tapped, input []string
	f := newFakeCLI(t, ClientConfig{Tap: func(l []byte) {
		mu.Lock()
		tapped = append(tapped, string(l))
		mu.Unlock()
	}, InputTap: func(l []byte) {
		mu.Lock()
		input = append(input, string(l))
		mu.Unlock()
	}})
	ctx := context.Background()
	go func() {
		_ = f.client.SendUser(ctx, Prompt{Text: "hello", UUID: "11111111-2222-4333-8444-555555555555"})
	}()
	if got, want := f.heard(), `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hello"}]},"parent_tool_use_id":null,"uuid":"11111111-2222-4333-8444-555555555555"}`; got != want {
		t.Errorf("prompt:\n got %s\nwant %s", got, want)
	}
	f.say(lineCtlResp, "", "garbage", lineResult)
	recv(t, f.client)
	recv(t, f.client)
	mu.Lock()
	got := strings.Join(tapped, "|")
	mu.Unlock()
	if want := lineCtlResp + "|garbage|" + lineResult; got != want {
		t.Errorf("tap saw %q, want %q", got, want)
	}
	// The input tap saw the prompt, then the answer to a control request, byte for byte.
	f.say(lineHookCB)
	answer := f.heard()
	var gotIn []string
	eventually(t, "input tap call", func() bool { // the tap runs just after the pipe write returns
		mu.Lock()
		defer mu.Unlock()
		gotIn = append([]string(nil), input...)
		return len(gotIn) >= 2
	})
	if len(gotIn) != 2 || !strings.HasPrefix(gotIn[0], `{"type":"user"`) || gotIn[1] != answer {
		t.Errorf("input tap saw %q, want the prompt and %q", gotIn, answer)
	}

	if err := f.client.CloseInput(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.stdin.ReadLine(); !errors.Is(err, io.EOF) {
		t.Errorf("CLI stdin after CloseInput: %v, want EOF", err)
	}
	if err := f.client.SendUser(ctx, Prompt{Text: "more"}); !errors.Is(err, ErrInputClosed) {
		t.Errorf("SendUser after CloseInput: %v", err)
	}
	if _, err := f.client.Request(ctx, "interrupt", nil); !errors.Is(err, ErrInputClosed) {
		t.Errorf("Request after CloseInput: %v", err)
	}
}

func TestClientClose(t *testing.T) {
	t.Parallel()
	handlerDone := make(chan error, 1)
	f := newFakeCLI(t, ClientConfig{Handler: HandlerFunc(func(ctx context.Context, r *ControlRequest) (any, error) {
		<-ctx.Done()
		handlerDone <- context.Cause(ctx)
		return nil, ctx.Err()
	})})
	f.say(lineCanUseTool, lineAssistText)
	errc := make(chan error, 1)
	go func() {
		_, err := f.client.Request(context.Background(), "interrupt", nil)
		errc <- err
	}()
	f.heardRequest()
	// Close returns with a reader blocked on an idle pipe, a handler waiting and a request pending.
	if err := f.client.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-handlerDone; !errors.Is(err, ErrClosed) {
		t.Errorf("handler cause = %v, want ErrClosed", err)
	}
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Errorf("pending request: %v, want ErrClosed", err)
	}
	// Messages read before Close are still delivered, then ErrClosed.
	if m := recv(t, f.client); m.Type() != TypeControlRequest {
		t.Errorf("first = %T", m)
	}
	if m := recv(t, f.client); m.Type() != TypeAssistant {
		t.Errorf("second = %T", m)
	}
	if _, err := f.client.Recv(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv after Close: %v", err)
	}
	if err := f.client.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := f.client.SendUser(context.Background(), Prompt{Text: "x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("SendUser after Close: %v", err)
	}
}

func TestClientRecvContext(t *testing.T) {
	t.Parallel()
	f := newFakeCLI(t, ClientConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.client.Recv(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Recv with a cancelled context: %v", err)
	}
}

// TestClientAnswer: Answer writes the answer to a request whose Handler is still waiting, which
// then sees ErrAnsweredElsewhere and writes nothing; an answer to a request no Handler works on
// (withdrawn, say) is written as asked.
func TestClientAnswer(t *testing.T) {
	t.Parallel()
	causes := make(chan error, 1)
	f := newFakeCLI(t, ClientConfig{Handler: HandlerFunc(func(ctx context.Context, r *ControlRequest) (any, error) {
		if r.CanUseTool != nil {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return DenyTool("the handler's own answer, never written", false), nil
		}
		return HookOutput{}, nil
	})})
	f.say(lineCanUseTool)
	recv(t, f.client)
	answer := func(id string, payload any) <-chan error { // the pipe blocks the write until heard
		errc := make(chan error, 1)
		go func() { errc <- f.client.Answer(id, payload) }()
		return errc
	}
	errc := answer("95c6", AllowTool(nil, "toolu_1"))
	if got, want := f.heard(), `{"type":"control_response","response":{"subtype":"success","request_id":"95c6","response":{"behavior":"allow","toolUseID":"toolu_1"}}}`; got != want {
		t.Errorf("answer:\n got %s\nwant %s", got, want)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Answer: %v", err)
	}
	if err := <-causes; !errors.Is(err, ErrAnsweredElsewhere) {
		t.Errorf("handler context cause %v", err)
	}
	f.say(lineHookCB)
	recv(t, f.client)
	if got := f.heard(); !strings.Contains(got, `"request_id":"r-hook"`) {
		t.Errorf("next line %s, want the hook's answer (the handler's own answer must not be written)", got)
	}
	errc = answer("gone", nil)
	if got := f.heard(); got != `{"type":"control_response","response":{"subtype":"success","request_id":"gone","response":{}}}` {
		t.Errorf("answer to an unknown request: %s", got)
	}
	if err := <-errc; err != nil {
		t.Errorf("Answer to a request nobody handles: %v", err)
	}
	if err := f.client.Answer("x", []int{1}); err == nil {
		t.Errorf("a non-object payload was accepted")
	}
}
