package taskclient

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-run/drover/task"
)

// unreachableClient is a real Temporal client for an address where nothing
// listens: it connects on first use, so a call that reaches it fails with a
// connection error instead of a validation error.
func unreachableClient(t *testing.T) *Client {
	t.Helper()
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &Client{Temporal: c}
}

func TestStartChecksItsInputBeforeTemporal(t *testing.T) {
	t.Parallel()
	c := unreachableClient(t)
	good := task.Params{Workspace: "/w"}
	prompt := task.Prompt{Text: "hello"}
	for name, tc := range map[string]struct {
		id     string
		p      task.Params
		prompt task.Prompt
		field  string
	}{
		"empty id":           {"", good, prompt, "id"},
		"id with a space":    {"my task", good, prompt, "id"},
		"negative max turns": {"t1", task.Params{Workspace: "/w", Profile: task.Profile{MaxTurns: -3}}, prompt, "profile.max_turns"},
		"unknown mode":       {"t1", task.Params{Workspace: "/w", Profile: task.Profile{PermissionMode: "yolo"}}, prompt, "profile.permission_mode"},
		"after plan":         {"t1", task.Params{Workspace: "/w", Profile: task.Profile{PermissionMode: task.Plan, AfterPlan: "yolo"}}, prompt, "profile.after_plan"},
		"negative idle":      {"t1", task.Params{Workspace: "/w", IdleTimeout: -time.Minute}, prompt, "idle_timeout"},
		"no workspace":       {"t1", task.Params{}, prompt, "workspace"},
		"empty prompt":       {"t1", good, task.Prompt{Text: "  "}, "prompt"},
		"oversized prompt":   {"t1", good, task.Prompt{Text: strings.Repeat("x", task.MaxPromptBytes)}, "prompt"},
		"absolute attach":    {"t1", good, task.Prompt{Text: "x", Attachments: []string{"/etc/passwd"}}, "attachments[0]"},
		"escaping attach":    {"t1", good, task.Prompt{Text: "x", Attachments: []string{"../x.png"}}, "attachments[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.Start(ctx, tc.id, tc.p, tc.prompt, "")
			var ie *task.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("err = %v, want a *task.InvalidError before any call to Temporal", err)
			}
			if ie.Field != tc.field {
				t.Errorf("field = %s, want %s (%v)", ie.Field, tc.field, err)
			}
		})
	}
	t.Run("prompt", func(t *testing.T) {
		t.Parallel()
		_, err := c.Prompt(context.Background(), "t1", task.Prompt{Text: "x", Attachments: []string{"/abs.png"}}, "")
		var ie *task.InvalidError
		if !errors.As(err, &ie) || ie.Field != "attachments[0]" {
			t.Fatalf("err = %v, want an attachment error before any call to Temporal", err)
		}
	})
	// The witness: valid input does go to Temporal, and fails there.
	t.Run("valid input reaches temporal", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := c.Start(ctx, "t1", good, prompt, "")
		var ie *task.InvalidError
		if err == nil || errors.As(err, &ie) {
			t.Fatalf("err = %v, want a connection failure", err)
		}
	})
}
