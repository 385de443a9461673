package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults and limits of a task's input. The workflow enforces the same ones:
// they are defined here once, for every caller to check before it sends.
const (
	// DefaultTurnTimeout is Params.TurnTimeout when it is zero.
	DefaultTurnTimeout = time.Hour
	// DefaultMaxAttempts is Params.MaxAttempts when it is zero.
	DefaultMaxAttempts = 3
	// MaxMaxAttempts bounds Params.MaxAttempts.
	MaxMaxAttempts = 100
	// MaxPromptBytes bounds one prompt, measured by PromptSize: as it travels
	// in a Temporal payload.
	MaxPromptBytes = 1 << 20
	// MaxIDBytes bounds a task id.
	MaxIDBytes = 255
)

// InvalidError says which part of a task's input is wrong, what is wrong with
// it and what is allowed instead.
type InvalidError struct {
	// Field names the part by its JSON name: "profile.max_turns",
	// "attachments[1]", "id", "prompt".
	Field string
	// Reason is what is wrong and what is allowed, for a person to read.
	Reason string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// PermissionModes are the known modes, in the order help texts list them.
func PermissionModes() []PermissionMode { return []PermissionMode{Autonomous, Supervised, Plan} }

// Available reports whether tasks can run in mode m. The empty mode means
// Autonomous. Every known mode is available; the notion stays so that a mode
// can be added before the machinery it needs.
func (m PermissionMode) Available() bool {
	return m == "" || m.Valid()
}

// AvailableModes are the modes a task can run in today.
func AvailableModes() []PermissionMode {
	var out []PermissionMode
	for _, m := range PermissionModes() {
		if m.Available() {
			out = append(out, m)
		}
	}
	return out
}

// WithDefaults fills in the zero fields of p that have a default.
func (p Params) WithDefaults() Params {
	if p.TurnTimeout == 0 {
		p.TurnTimeout = DefaultTurnTimeout
	}
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.Profile.PermissionMode == "" {
		p.Profile.PermissionMode = Autonomous
	}
	if p.ApprovalTimeout == 0 {
		p.ApprovalTimeout = DefaultApprovalTimeout
	}
	return p
}

// Validate reports every field of p that a task cannot run with, each as an
// *InvalidError, joined. Zero values are valid: they mean the defaults.
func (p Params) Validate() error {
	var errs []error
	if err := validateTitle(p.Title); err != nil {
		errs = append(errs, err)
	}
	switch {
	case p.Workspace == "" && p.Repo == "":
		errs = append(errs, invalid("workspace", "is required: the folder the agent works in (or give repo, a repository the task works on in a worktree of its own)"))
	case p.Workspace != "" && p.Repo != "":
		errs = append(errs, invalid("repo", "is given with workspace; give one: repo for a managed worktree of the repository, workspace for a folder of your own"))
	}
	if p.Base != "" && p.Repo == "" {
		errs = append(errs, invalid("base", "is given without repo; a base is the branch, tag or commit of the task's repository"))
	}
	if strings.HasPrefix(p.Base, "-") || strings.ContainsAny(p.Base, " \x00") {
		errs = append(errs, invalid("base", "%q is not a branch, tag or commit name", p.Base))
	}
	if p.Fork != nil && (p.Repo == "" || ValidateID(p.Fork.Task) != nil || p.Fork.Turn < 0) {
		errs = append(errs, invalid("fork", "names no turn of a managed task: a fork needs the task's repository, its id and a turn of 0 or more"))
	}
	if strings.HasPrefix(p.Repo, "-") || strings.ContainsRune(p.Repo, 0) {
		errs = append(errs, invalid("repo", "%q is not a repository URL or path", p.Repo))
	}
	if err := validateMode(p.Profile.PermissionMode); err != nil {
		errs = append(errs, err)
	}
	switch p.Profile.AfterPlan {
	case "", Autonomous, Supervised:
	default:
		errs = append(errs, invalid("profile.after_plan", "%q is not a mode a task can continue in after its plan; use autonomous or supervised", p.Profile.AfterPlan))
	}
	if p.ApprovalTimeout < 0 {
		errs = append(errs, invalid("approval_timeout", "%s is negative; use 0 (the default, %s) or a positive duration", p.ApprovalTimeout, DefaultApprovalTimeout))
	}
	if p.Profile.MaxTurns < 0 {
		errs = append(errs, invalid("profile.max_turns", "%d is negative; use 0 (no bound) or more", p.Profile.MaxTurns))
	}
	if p.IdleTimeout < 0 {
		errs = append(errs, invalid("idle_timeout", "%s is negative; use 0 (never) or a positive duration", p.IdleTimeout))
	}
	if p.TurnTimeout < 0 {
		errs = append(errs, invalid("turn_timeout", "%s is negative; use 0 (the default, %s) or a positive duration", p.TurnTimeout, DefaultTurnTimeout))
	}
	if p.MaxAttempts < 0 || p.MaxAttempts > MaxMaxAttempts {
		errs = append(errs, invalid("max_attempts", "%d is outside 1..%d (0 means %d)", p.MaxAttempts, MaxMaxAttempts, DefaultMaxAttempts))
	}
	errs = append(errs, p.Budget.validate("budget.")...)
	if p.Carry != nil {
		if err := p.Carry.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validate reports the bounds of b that are negative; prefix names b's place in its input.
func (b Budget) validate(prefix string) []error {
	var errs []error
	if b.MaxCostUSD < 0 || math.IsNaN(b.MaxCostUSD) || math.IsInf(b.MaxCostUSD, 0) {
		errs = append(errs, invalid(prefix+string(BoundCost), "%v is not a cost; use 0 (no bound) or a positive number of US dollars", b.MaxCostUSD))
	}
	if b.MaxTurns < 0 {
		errs = append(errs, invalid(prefix+string(BoundTurns), "%d is negative; use 0 (no bound) or more", b.MaxTurns))
	}
	if b.MaxDuration < 0 {
		errs = append(errs, invalid(prefix+string(BoundDuration), "%s is negative; use 0 (no bound) or a positive duration", b.MaxDuration))
	}
	return errs
}

// Validate reports every bound c would set that a budget cannot have, joined.
func (c BudgetChange) Validate() error {
	var b Budget
	if c.MaxCostUSD != nil {
		b.MaxCostUSD = *c.MaxCostUSD
	}
	if c.MaxTurns != nil {
		b.MaxTurns = *c.MaxTurns
	}
	if c.MaxDuration != nil {
		b.MaxDuration = *c.MaxDuration
	}
	errs := b.validate("")
	if c.MaxCostUSD == nil && c.MaxTurns == nil && c.MaxDuration == nil {
		errs = append(errs, invalid("budget", "changes nothing; set max_cost_usd, max_turns or max_duration"))
	}
	return errors.Join(errs...)
}

// Apply returns b with the bounds c sets replaced.
func (c BudgetChange) Apply(b Budget) Budget {
	if c.MaxCostUSD != nil {
		b.MaxCostUSD = *c.MaxCostUSD
	}
	if c.MaxTurns != nil {
		b.MaxTurns = *c.MaxTurns
	}
	if c.MaxDuration != nil {
		b.MaxDuration = *c.MaxDuration
	}
	return b
}

func validateMode(m PermissionMode) error {
	if !m.Valid() {
		return invalid("profile.permission_mode", "%q is unknown; use %s", m, joinModes(PermissionModes()))
	}
	if !m.Available() {
		return invalid("profile.permission_mode", "%q is not available yet; use %s", m, joinModes(AvailableModes()))
	}
	return nil
}

func joinModes(ms []PermissionMode) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = string(m)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// validate checks the state handed over by continue-as-new.
func (c *Carry) validate() error {
	if c.Turn < 0 {
		return invalid("carry.turn", "%d is negative", c.Turn)
	}
	last := 0
	for _, q := range c.Pending {
		if q.Turn <= last || q.Turn > c.Turn {
			return invalid("carry.pending", "a prompt has turn %d, want one in %d..%d", q.Turn, last+1, c.Turn)
		}
		last = q.Turn
	}
	return nil
}

// PromptSize is the size of p as it travels in a Temporal payload: the default
// data converter encodes it with encoding/json, escapes included.
func PromptSize(p Prompt) int {
	// encoding/json is deterministic for a struct of strings; workflowcheck
	// flags it only for the caches and map encoding it may use.
	//workflowcheck:ignore
	b, err := json.Marshal(p)
	if err != nil {
		// A Prompt holds only strings; json.Marshal cannot fail on it.
		return len(p.Text)
	}
	return len(b)
}

// ValidatePrompt reports what is wrong with p whatever task it goes to: an
// empty text, an attachment that is not a relative path inside the workspace,
// or a size over MaxPromptBytes. Each problem is an *InvalidError; the first
// one found is returned.
func ValidatePrompt(p Prompt) error {
	if strings.TrimSpace(p.Text) == "" {
		return invalid("prompt", "the text is empty; give the text to send")
	}
	for i, a := range p.Attachments {
		if !filepath.IsLocal(a) || strings.ContainsRune(a, 0) {
			return invalid(fmt.Sprintf("attachments[%d]", i),
				"%q is not a relative path inside the workspace; give a path such as img/screen.png, without .. or a leading /", a)
		}
	}
	if size := PromptSize(p); size > MaxPromptBytes {
		return invalid("prompt", "%d bytes as JSON, more than the %d allowed", size, MaxPromptBytes)
	}
	if p.Mode != "" {
		if err := validateMode(p.Mode); err != nil {
			return &InvalidError{Field: "mode", Reason: err.(*InvalidError).Reason}
		}
	}
	return nil
}

// managedID is what a managed task's id may be: it names the task's folder and branch.
var managedID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// ValidateStart reports what is wrong with starting task id with params p: the id
// (ValidateID), the params (Params.Validate), and, for a managed task (p.Repo set), an id that
// cannot name its worktree's folder and branch.
func ValidateStart(id string, p Params) error {
	errs := []error{ValidateID(id), p.Validate()}
	if p.Repo != "" && id != "" && !managedID.MatchString(id) {
		errs = append(errs, invalid("id", "%q cannot name a managed task's folder and branch; use 1 to 128 letters, digits, _ and -, starting with a letter or digit", id))
	}
	return errors.Join(errs...)
}

// ValidateID reports whether id can name a new task: 1 to MaxIDBytes bytes of
// UTF-8, printable, without spaces, not starting with '-'.
func ValidateID(id string) error {
	const allowed = "use 1 to %d bytes of printable characters, without spaces, not starting with '-'"
	switch {
	case id == "":
		return invalid("id", "is empty; "+allowed, MaxIDBytes)
	case len(id) > MaxIDBytes:
		return invalid("id", "is %d bytes long; "+allowed, len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		return invalid("id", "%q is not valid UTF-8; "+allowed, id, MaxIDBytes)
	case strings.HasPrefix(id, "-"):
		return invalid("id", "%q starts with '-'; "+allowed, id, MaxIDBytes)
	}
	for _, r := range id {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return invalid("id", "%q holds a space or a control character; "+allowed, id, MaxIDBytes)
		}
	}
	return nil
}
