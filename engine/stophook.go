package engine

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/drover-run/drover/claudecode"
)

// stopHookTimeout bounds drover's Stop hook: the CLI then goes on without its answer.
const stopHookTimeout = 60 * time.Second

// stopCheck answers the Stop hook: an agent about to end its turn with uncommitted changes in a
// git work tree is asked, once per turn, to commit them or say why they stay uncommitted; it then
// stops either way (a second Stop hook in the turn, stop_hook_active, is approved: the agent
// never loops). Outside a git work tree, or with nothing to commit, it stops.
func (t *turnApprovals) stopCheck(ctx context.Context, in claudecode.HookInput) claudecode.HookOutput {
	if in.StopHookActive {
		return claudecode.StopApprove("")
	}
	dir := in.CWD
	if dir == "" {
		dir = t.req.Workspace
	}
	changes, err := uncommitted(ctx, dir)
	if err != nil || len(changes) == 0 {
		return claudecode.StopApprove("")
	}
	shown := changes
	if len(shown) > 10 {
		shown = append(shown[:10:10], fmt.Sprintf("… and %d more", len(changes)-10))
	}
	return claudecode.StopBlock("The workspace has uncommitted changes:\n" + strings.Join(shown, "\n") +
		"\nCommit them with a message that says what you did, or, if they should stay uncommitted, say why in your answer. Then stop.")
}

// uncommitted lists the changes git sees in dir's work tree (git status --porcelain), or nil
// when dir is not in a git work tree.
func uncommitted(ctx context.Context, dir string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=normal")
	out, err := cmd.Output()
	if err != nil {
		return nil, nil // not a git work tree, or no git: nothing to say
	}
	var changes []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			changes = append(changes, strings.TrimSpace(l))
		}
	}
	return changes, nil
}
