package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/activities"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/taskclient"
)

// accountRow is one account of drover account list|show --output json.
type accountRow struct {
	Account    string        `json:"account"`
	Limited    string        `json:"limited,omitempty"`
	LimitType  string        `json:"limit_type,omitempty"`
	ResetsAt   time.Time     `json:"resets_at,omitzero"`
	NextLook   time.Time     `json:"next_look_at,omitzero"`
	LimitedAt  time.Time     `json:"limited_at,omitzero"`
	ProbeTask  string        `json:"probe_task,omitempty"`
	Running    int           `json:"running"`
	Queued     int           `json:"queued"`
	Waiting    int           `json:"waiting"`
	WaitingFor []accountWait `json:"waiting_tasks,omitempty"`
}

// accountWait is one task waiting for its account.
type accountWait struct {
	TaskID   string    `json:"task_id"`
	Turn     int       `json:"turn"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	ResetsAt time.Time `json:"resets_at,omitzero"`
	RetryAt  time.Time `json:"retry_at,omitzero"`
}

func newAccountCommand(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "account",
		Short: "See the accounts the hosts use and lift what holds them",
		Long: `See the accounts the hosts use and lift what holds them. An account is named by a keyed
hash of the credential its hosts run the CLI with (acct-…); the credential is never stored.`,
	}
	c.AddCommand(newAccountListCommand(a), newAccountShowCommand(a), newAccountResumeCommand(a))
	return c
}

// withStore connects to Postgres for the duration of fn.
func (a *app) withStore(ctx context.Context, what string, fn func(store.TxDB) error) error {
	pool, err := store.Connect(ctx, a.env.databaseURL)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer pool.Close()
	return fn(pool)
}

func newAccountListCommand(a *app) *cobra.Command {
	c := &cobra.Command{Use: "list", Short: "List the accounts, what limits them and what runs and waits on each", Args: noArgs}
	out := addOutputFlags(c, false)
	c.RunE = func(c *cobra.Command, _ []string) error {
		return a.withStore(c.Context(), "account list", func(db store.TxDB) error {
			accts, err := store.ListAccounts(c.Context(), db)
			if err != nil {
				return err
			}
			rows := make([]accountRow, 0, len(accts))
			for _, ac := range accts {
				rows = append(rows, rowOf(ac))
			}
			if out.isJSON() {
				return writeJSON(a.stdout, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(a.stdout, "no account has run a turn yet")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ACCOUNT\tLIMITED\tRESETS AT\tRUNNING\tQUEUED\tWAITING")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\n", r.Account, dash(limitText(r)), timeOrDash(r.ResetsAt), r.Running, r.Queued, r.Waiting)
			}
			return tw.Flush()
		})
	}
	return c
}

func newAccountShowCommand(a *app) *cobra.Command {
	c := &cobra.Command{Use: "show ACCOUNT", Short: "Show an account and the tasks waiting for it", Args: argsBetween(1, 1, "one ACCOUNT")}
	out := addOutputFlags(c, false)
	c.RunE = func(c *cobra.Command, args []string) error {
		id := strings.TrimSpace(args[0])
		return a.withStore(c.Context(), "account show", func(db store.TxDB) error {
			ac, err := store.GetAccount(c.Context(), db, id)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("account show: no account %q; see drover account list", id)
			}
			if err != nil {
				return err
			}
			waits, err := store.AccountWaits(c.Context(), db, id)
			if err != nil {
				return err
			}
			r := rowOf(ac)
			for _, w := range waits {
				r.WaitingFor = append(r.WaitingFor, accountWait{TaskID: w.TaskID, Turn: w.Turn, Reason: string(w.Reason),
					Since: w.Since, ResetsAt: w.ResetsAt, RetryAt: w.RetryAt})
			}
			if out.isJSON() {
				return writeJSON(a.stdout, r)
			}
			fmt.Fprintf(a.stdout, "account:  %s\nlimited:  %s\n", r.Account, dash(limitText(r)))
			if !r.ResetsAt.IsZero() {
				fmt.Fprintf(a.stdout, "resets:   %s\n", timeOrDash(r.ResetsAt))
			}
			if !r.NextLook.IsZero() {
				fmt.Fprintf(a.stdout, "next look: %s (the limit outlasted its reset)\n", timeOrDash(r.NextLook))
			}
			if r.ProbeTask != "" {
				fmt.Fprintf(a.stdout, "first after the reset: %s\n", r.ProbeTask)
			}
			fmt.Fprintf(a.stdout, "turns:    %d running, %d queued\n", r.Running, r.Queued)
			if len(r.WaitingFor) == 0 {
				fmt.Fprintln(a.stdout, "no task waits for it")
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\nTASK\tTURN\tREASON\tSINCE\tTRIES AGAIN")
			for _, w := range r.WaitingFor {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", w.TaskID, w.Turn, w.Reason, timeOrDash(w.Since), timeOrDash(w.RetryAt))
			}
			return tw.Flush()
		})
	}
	return c
}

func newAccountResumeCommand(a *app) *cobra.Command {
	var spread time.Duration
	c := &cobra.Command{
		Use:   "resume ACCOUNT",
		Short: "Lift what holds an account (a raised spend cap, a limit known to be over) and wake its waiting tasks",
		Args:  argsBetween(1, 1, "one ACCOUNT"),
	}
	c.Flags().DurationVar(&spread, "spread", engine.DefaultLimitJitter, "time between two waiting tasks trying again")
	c.RunE = func(c *cobra.Command, args []string) error {
		id := strings.TrimSpace(args[0])
		if spread < 0 {
			return usageErrorf(c, "--spread: %s is negative", spread)
		}
		ctx := c.Context()
		return a.withStore(ctx, "account resume", func(db store.TxDB) error {
			return a.withClient(ctx, func(tc *taskclient.Client) error {
				n, err := engine.ResumeAccount(ctx, db, activities.Notifier{Temporal: tc.Temporal}, id, spread)
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("account resume: no account %q; see drover account list", id)
				}
				if err != nil {
					return fmt.Errorf("account resume: %w", err)
				}
				fmt.Fprintf(a.stdout, "account %s resumed; %d waiting task(s) told to try again\n", id, n)
				return nil
			})
		})
	}
	return c
}

func rowOf(ac store.Account) accountRow {
	return accountRow{Account: ac.AccountID, Limited: string(ac.Reason), LimitType: ac.LimitType, ResetsAt: ac.ResetsAt,
		NextLook:  nextLook(ac),
		LimitedAt: ac.LimitedAt, ProbeTask: ac.ProbeTask, Running: ac.Running, Queued: ac.Queued, Waiting: ac.Waiting}
}

// nextLook is when the account looks again at a limit that outlasted its announced reset; zero
// while the reset is ahead or nothing limits it.
func nextLook(ac store.Account) time.Time {
	if ac.BlockedUntil.After(ac.ResetsAt) {
		return ac.BlockedUntil
	}
	return time.Time{}
}

func limitText(r accountRow) string {
	if r.Limited == "" {
		return ""
	}
	if r.LimitType != "" {
		return r.Limited + " (" + r.LimitType + ")"
	}
	return r.Limited
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}
