package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/internal/testkit/temporaltest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// attemptThenListen runs the "leave" activity once and then waits for a host_lost signal, so
// that every signal sent to it is in its history; it fails with the activity's error.
func attemptThenListen(ctx workflow.Context, taskID string) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	err := workflow.ExecuteActivity(ctx, "leave", taskID).Get(ctx, nil)
	workflow.GetSignalChannel(ctx, task.SignalHostLost).Receive(ctx, nil)
	return err
}

// staleHost records hostID as a host whose last beat was an hour ago.
func staleHost(t *testing.T, db store.DB, hostID string) {
	t.Helper()
	if err := store.BeatHost(t.Context(), db, hostID, 1, false); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(t.Context(), `UPDATE hosts SET heartbeat_at = now() - interval '1 hour' WHERE host_id = $1`, hostID); err != nil {
		t.Fatal(err)
	}
}

// hostLostSignals returns the host_lost signals in the workflow's history.
func hostLostSignals(ctx context.Context, t *testing.T, c client.Client, id string) []task.HostLost {
	t.Helper()
	var out []task.HostLost
	iter := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == task.SignalHostLost {
			var h task.HostLost
			if err := converter.GetDefaultDataConverter().FromPayloads(a.GetInput(), &h); err != nil {
				t.Fatal(err)
			}
			out = append(out, h)
		}
	}
	return out
}

// A live host hands on the tasks of a lost host: the attempts that may be open in Temporal
// (running, or committed lately) fail as HostLost through their task tokens, carrying their
// attempt; every task of the lost host is told so by the host_lost signal; a running attempt's
// end is recorded on its row. Tasks of live hosts are left alone.
func TestHandOnReportsALostHostsTasks(t *testing.T) {
	t.Parallel()
	srv := temporaltest.Start(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Dial(ctx, srv.Address(), srv.Namespace(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	db := pgtest.NewPool(t)
	id := uuid.NewString()[:8]
	self, lost, live := "self-"+id, "lost-"+id, "live-"+id
	staleHost(t, db, lost)
	if err := store.BeatHost(ctx, db, live, 1, false); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		openAttempt
		// wantStatus is the row's status after handOn.
		wantStatus          store.ExecutorStatus
		reported, signalled bool
	}{
		"running":            {openAttempt{host: lost, record: recordRunning, recorded: store.ExecutorRunning}, store.ExecutorFailed, true, true},
		"starting":           {openAttempt{host: lost, recorded: store.ExecutorStarting}, store.ExecutorFailed, true, true},
		"committed":          {openAttempt{host: lost, record: recordCommitted, recorded: store.ExecutorIdle}, store.ExecutorIdle, true, true},
		"committed long ago": {openAttempt{host: lost, record: recordCommitted, recorded: store.ExecutorIdle, longAgo: true}, store.ExecutorIdle, false, true},
		"failed":             {openAttempt{host: lost, record: recordFailed, recorded: store.ExecutorFailed}, store.ExecutorFailed, false, true},
		"live host":          {openAttempt{host: live, recorded: store.ExecutorStarting}, store.ExecutorStarting, false, false},
	}
	attempts := map[string]openAttempt{}
	for name, tc := range cases {
		attempts[name] = tc.openAttempt
	}
	queue := "hosts-" + id
	runs := leaveAttempts(ctx, t, c, db, queue, attemptThenListen, attempts)
	// A task of the lost host whose workflow is gone: there is nothing to tell, and its
	// attempt's end is recorded all the same.
	gone := queue + "/gone"
	if _, err := store.BeginAttempt(ctx, db, store.AttemptStart{TaskID: gone, AttemptID: "run/1/2", HostID: lost,
		Turn: 1, Prompt: "p", PromptUUID: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}

	h := &hostLoop{db: db, temporal: c, hostID: self, interval: time.Second, stale: time.Minute,
		draining: func() bool { return false }, log: slog.New(slog.DiscardHandler)}
	h.handOn(ctx)

	for name, tc := range cases {
		wid := queue + "/" + name
		x, err := store.GetExecutor(ctx, db, wid)
		if err != nil {
			t.Fatal(err)
		}
		if x.Status != tc.wantStatus {
			t.Errorf("%s: executor row %s after handOn, want %s", name, x.Status, tc.wantStatus)
		}
		if tc.host == live && x.HostID != live {
			t.Errorf("%s: a live host's row was taken: %+v", name, x)
		}
		if tc.host == lost && x.HostID != "" {
			t.Errorf("%s: the lost host's row still names it: %+v", name, x)
		}
		if x.Status == store.ExecutorFailed && tc.recorded.Live() && x.Error != task.ErrTypeHostLost+": "+hostLostMsg {
			t.Errorf("%s: the row's error is %q, want HostLost", name, x.Error)
		}
		want := []task.HostLost(nil)
		if tc.signalled {
			want = []task.HostLost{{HostQueue: task.HostQueue(lost), Attempt: 1, Turn: 1}}
		}
		// A signal that arrives while a workflow task runs enters the history when that task
		// ends, so the history is read until it holds as many as expected.
		if got := awaitHostLostSignals(ctx, t, c, wid, len(want)); !equalNotices(got, want) {
			t.Errorf("%s: host_lost signals %+v, want %+v", name, got, want)
		}
		if !tc.reported {
			desc, err := c.DescribeWorkflow(ctx, wid, "")
			if err != nil {
				t.Fatal(err)
			}
			pending := desc.RawResponse.GetPendingActivities()
			if len(pending) != 1 || pending[0].GetState() != enumspb.PENDING_ACTIVITY_STATE_STARTED {
				t.Errorf("%s: the attempt was reported (pending activities %v)", name, pending)
			}
			if err := c.TerminateWorkflow(ctx, wid, "", "test over"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		gctx, gcancel := context.WithTimeout(ctx, 20*time.Second)
		err = runs[name].Get(gctx, nil)
		gcancel()
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != task.ErrTypeHostLost || !appErr.NonRetryable() {
			t.Errorf("%s: the workflow ended with %v, want the attempt failed as %s, not retried", name, err, task.ErrTypeHostLost)
			continue
		}
		var d task.ReassignDetails
		if err := appErr.Details(&d); err != nil || d.Attempt != 1 {
			t.Errorf("%s: the error's details = %+v, %v; want attempt 1", name, d, err)
		}
	}
	if x, err := store.GetExecutor(ctx, db, gone); err != nil || x.Status != store.ExecutorFailed || x.HostID != "" {
		t.Errorf("the row of a task whose workflow is gone = %+v, %v; want its attempt ended and the row handled", x, err)
	}
	// Handled rows are not handled again.
	if again, err := store.ClaimLostExecutors(ctx, db, self, time.Minute, 100); err != nil || len(again) != 0 {
		t.Errorf("after handOn, a look still finds %d rows (%v)", len(again), err)
	}
}

// awaitHostLostSignals reads the workflow's host_lost signals until there are n of them, or
// for a few seconds.
func awaitHostLostSignals(ctx context.Context, t *testing.T, c client.Client, id string, n int) []task.HostLost {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := hostLostSignals(ctx, t, c, id)
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func equalNotices(a, b []task.HostLost) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// refusingSignals is a Temporal client that cannot reach the server for signals.
type refusingSignals struct{ client.Client }

func (refusingSignals) SignalWorkflow(context.Context, string, string, string, any) error {
	return serviceerror.NewUnavailable("the server is unavailable")
}

// A task handOn cannot tell goes back to its lost host, its attempt's end not recorded, so
// that the next look handles it again.
func TestHandOnGivesBackWhatItCannotTell(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	lost := "lost-" + uuid.NewString()[:8]
	staleHost(t, db, lost)
	if _, err := store.BeginAttempt(ctx, db, store.AttemptStart{TaskID: "t1", AttemptID: "run/1/1", HostID: lost,
		Turn: 1, Prompt: "p", PromptUUID: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	h := &hostLoop{db: db, temporal: refusingSignals{}, hostID: "self", interval: time.Second, stale: time.Minute,
		draining: func() bool { return false }, log: slog.New(slog.DiscardHandler)}
	h.handOn(ctx)
	x, err := store.GetExecutor(ctx, db, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if x.HostID != lost || x.Status != store.ExecutorStarting {
		t.Fatalf("row after a failed hand-on = %+v, want it back on %s, its attempt open", x, lost)
	}
}

// The loop beats for its host, saying whether it drains; a draining host hands nothing on.
func TestHostLoopBeatsAndADrainingHostHandsNothingOn(t *testing.T) {
	t.Parallel()
	db := pgtest.NewPool(t)
	lost := "lost-" + uuid.NewString()[:8]
	staleHost(t, db, lost)
	if _, err := store.BeginAttempt(t.Context(), db, store.AttemptStart{TaskID: "t1", AttemptID: "run/1/1", HostID: lost,
		Turn: 1, Prompt: "p", PromptUUID: uuid.NewString()}); err != nil {
		t.Fatal(err)
	}
	// No Temporal client: a draining host must not need one.
	h := &hostLoop{db: db, hostID: "self", interval: 10 * time.Millisecond, stale: time.Minute,
		draining: func() bool { return true }, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	h.run(ctx)

	hosts, err := store.ListHosts(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	var me *store.Host
	for i := range hosts {
		if hosts[i].HostID == "self" {
			me = &hosts[i]
		}
	}
	if me == nil || !me.Draining || time.Since(me.HeartbeatAt) > time.Minute {
		t.Fatalf("this host's row = %+v, want a fresh beat saying it drains", me)
	}
	if x, err := store.GetExecutor(t.Context(), db, "t1"); err != nil || x.HostID != lost {
		t.Fatalf("a draining host took a lost host's row: %+v, %v", x, err)
	}
}
