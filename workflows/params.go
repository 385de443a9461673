package workflows

import (
	"errors"
	"fmt"
	"time"

	"github.com/drover-run/drover/task"
)

const (
	// defaultTurnTimeout is task.Params.TurnTimeout when it is zero.
	defaultTurnTimeout = time.Hour
	// defaultMaxAttempts is task.Params.MaxAttempts when it is zero.
	defaultMaxAttempts = 3
	// maxMaxAttempts bounds task.Params.MaxAttempts.
	maxMaxAttempts = 100
)

// withDefaults fills in the zero fields of p that have a default.
func withDefaults(p task.Params) task.Params {
	if p.TurnTimeout == 0 {
		p.TurnTimeout = defaultTurnTimeout
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = defaultMaxAttempts
	}
	if p.Profile.PermissionMode == "" {
		p.Profile.PermissionMode = task.Autonomous
	}
	return p
}

// validate checks p after withDefaults.
func validate(p task.Params) error {
	var errs []error
	if p.Workspace == "" {
		errs = append(errs, errors.New("workspace is required"))
	}
	if !p.Profile.PermissionMode.Valid() {
		errs = append(errs, fmt.Errorf("unknown permission mode %q", p.Profile.PermissionMode))
	}
	if p.Profile.MaxTurns < 0 {
		errs = append(errs, fmt.Errorf("max turns %d is negative", p.Profile.MaxTurns))
	}
	if p.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("idle timeout %s is negative", p.IdleTimeout))
	}
	if p.TurnTimeout < 0 {
		errs = append(errs, fmt.Errorf("turn timeout %s is negative", p.TurnTimeout))
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > maxMaxAttempts {
		errs = append(errs, fmt.Errorf("max attempts %d is outside 1..%d", p.MaxAttempts, maxMaxAttempts))
	}
	if p.Carry != nil {
		errs = append(errs, validateCarry(p.Carry))
	}
	return errors.Join(errs...)
}

// validateCarry checks the state handed over by continue-as-new.
func validateCarry(c *task.Carry) error {
	if c.Turn < 0 {
		return fmt.Errorf("carried turn %d is negative", c.Turn)
	}
	last := 0
	for _, q := range c.Pending {
		if q.Turn <= last || q.Turn > c.Turn {
			return fmt.Errorf("carried prompt has turn %d, want one in %d..%d", q.Turn, last+1, c.Turn)
		}
		last = q.Turn
	}
	return nil
}
