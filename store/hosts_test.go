package store_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// host returns the hosts row of id, failing the test when there is none.
func host(t *testing.T, db store.DB, id string) store.Host {
	t.Helper()
	hosts, err := store.ListHosts(t.Context(), db)
	must(t, err)
	for _, h := range hosts {
		if h.HostID == id {
			return h
		}
	}
	t.Fatalf("no hosts row for %s in %+v", id, hosts)
	return store.Host{}
}

// dbNow is the database's clock, as a statement outside any transaction reads it.
func dbNow(t *testing.T, db store.DB) time.Time {
	t.Helper()
	var now time.Time
	must(t, db.QueryRow(t.Context(), `SELECT clock_timestamp()`).Scan(&now))
	return now
}

// beatAgo moves the host's last beat back by ago on the database's clock.
func beatAgo(t *testing.T, db store.DB, id string, ago time.Duration) {
	t.Helper()
	tag, err := db.Exec(t.Context(), `UPDATE hosts SET heartbeat_at = now() - make_interval(secs => $2) WHERE host_id = $1`,
		id, ago.Seconds())
	must(t, err)
	if tag.RowsAffected() != 1 {
		t.Fatalf("no hosts row for %s", id)
	}
}

// onHost begins an attempt of taskID on hostID, leaving the executor row starting.
func onHost(t *testing.T, db store.TxDB, taskID, attemptID, hostID string) {
	t.Helper()
	s := attempt(taskID, attemptID, 1)
	s.HostID, s.AttemptToken = hostID, []byte("token-"+attemptID)
	begin(t, db, s)
}

func taskIDs(xs []store.LostExecutor) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.TaskID)
	}
	return out
}

// A beat stamps the row with the database's clock, whatever the caller's; later beats move it
// and record whether the host drains; a restart clears draining.
func TestHostBeatsAreStampedByTheDatabase(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)

	before := dbNow(t, db)
	must(t, store.BeatHost(ctx, db, "h1", 11, false))
	after := dbNow(t, db)
	h := host(t, db, "h1")
	if h.PID != 11 || h.Draining || h.HeartbeatAt.Before(before) || h.HeartbeatAt.After(after) {
		t.Fatalf("first beat = %+v, want pid 11, not draining, beat within [%s, %s] by the database's clock", h, before, after)
	}

	beatAgo(t, db, "h1", time.Hour)
	before = dbNow(t, db)
	must(t, store.BeatHost(ctx, db, "h1", 12, true))
	h = host(t, db, "h1")
	if h.PID != 12 || !h.Draining || h.HeartbeatAt.Before(before) {
		t.Fatalf("second beat = %+v, want pid 12, draining, beat after %s", h, before)
	}
	started := h.StartedAt

	must(t, store.RestartHost(ctx, db, "h1", 13))
	h = host(t, db, "h1")
	if h.PID != 13 || h.Draining || !h.StartedAt.After(started) {
		t.Fatalf("after a restart = %+v, want pid 13, not draining, started after %s", h, started)
	}
}

// Only the rows of hosts whose beat is older than stale on the database's clock are claimed:
// not the claimer's own, not a live host's (draining or not), not those of a host that never
// beat; a host that stopped (its last beat said draining) is lost like any other once its beat
// is stale. A claimed row loses its host, so a second claimer gets nothing.
func TestClaimLostExecutorsTakesOnlyStaleHosts(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	const stale = time.Minute

	for _, h := range []struct {
		id       string
		draining bool
		ago      time.Duration
	}{
		{"self", false, time.Minute}, // stale, but the claimer itself
		{"live", false, 0},
		{"live-draining", true, 0},
		{"nearly-stale", false, stale / 2},
		{"lost", false, 2 * stale},
		{"stopped", true, time.Hour},
	} {
		must(t, store.BeatHost(ctx, db, h.id, 1, h.draining))
		beatAgo(t, db, h.id, h.ago)
	}
	for _, x := range []struct{ task, host string }{
		{"t-self", "self"}, {"t-live", "live"}, {"t-live-draining", "live-draining"},
		{"t-nearly-stale", "nearly-stale"}, {"t-lost-1", "lost"}, {"t-lost-2", "lost"},
		{"t-stopped", "stopped"}, {"t-unknown", "never-beat"},
	} {
		onHost(t, db, x.task, "a-"+x.task, x.host)
	}
	lost1Before := getExecutor(t, db, "t-lost-1")

	got, err := store.ClaimLostExecutors(ctx, db, "self", stale, 100)
	must(t, err)
	if ids := taskIDs(got); !slices.Equal(ids, []string{"t-lost-1", "t-lost-2", "t-stopped"}) {
		t.Fatalf("claimed %v, want the rows of the lost and the stopped host", ids)
	}
	// The rows come back as they were, their host included; in the table their host is cleared.
	if got[0].HostID != "lost" || got[2].HostID != "stopped" || got[0].AttemptID != "a-t-lost-1" ||
		string(got[0].AttemptToken) != "token-a-t-lost-1" || got[0].Status != store.ExecutorStarting || got[0].Turn != 1 ||
		!got[0].UpdatedAt.Equal(lost1Before.UpdatedAt) {
		t.Fatalf("claimed rows = %+v", got)
	}
	for _, id := range []string{"t-lost-1", "t-lost-2", "t-stopped"} {
		if x := getExecutor(t, db, id); x.HostID != "" || x.AttemptID != "a-"+id || x.Status != store.ExecutorStarting {
			t.Fatalf("row %s after the claim = %+v, want its host cleared and nothing else changed", id, x)
		}
	}
	for id, h := range map[string]string{"t-self": "self", "t-live": "live", "t-live-draining": "live-draining",
		"t-nearly-stale": "nearly-stale", "t-unknown": "never-beat"} {
		if x := getExecutor(t, db, id); x.HostID != h {
			t.Fatalf("row %s of a host that is not lost was touched: %+v", id, x)
		}
	}

	again, err := store.ClaimLostExecutors(ctx, db, "live", stale, 100)
	must(t, err)
	if len(again) != 1 || again[0].TaskID != "t-self" {
		// "self" is stale too: another host sees it lost. Nothing claimed before comes again.
		t.Fatalf("second claimer got %v, want only the first claimer's own row", taskIDs(again))
	}

	// A tighter bound takes the host whose beat is 30 s old: staleness is the caller's bound
	// against the database's clock.
	near, err := store.ClaimLostExecutors(ctx, db, "self", 10*time.Second, 100)
	must(t, err)
	if ids := taskIDs(near); !slices.Equal(ids, []string{"t-nearly-stale"}) {
		t.Fatalf("with a 10 s bound claimed %v, want t-nearly-stale", ids)
	}
}

// Claimers racing for the same rows share them out: each row goes to exactly one, and limit
// bounds each claim.
func TestClaimLostExecutorsHandsEachRowToOneClaimer(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	must(t, store.BeatHost(ctx, db, "lost", 1, false))
	beatAgo(t, db, "lost", time.Minute)
	var want []string
	for i := range 20 {
		id := "t-" + string(rune('a'+i))
		onHost(t, db, id, "a-"+id, "lost")
		want = append(want, id)
	}

	first, err := store.ClaimLostExecutors(ctx, db, "c0", time.Second, 3)
	must(t, err)
	if ids := taskIDs(first); !slices.Equal(ids, want[:3]) {
		t.Fatalf("a claim of at most 3 took %v, want %v", ids, want[:3])
	}
	var (
		mu      sync.Mutex
		claimed = taskIDs(first)
		wg      sync.WaitGroup
	)
	for c := range 4 {
		wg.Go(func() {
			for {
				got, err := store.ClaimLostExecutors(ctx, db, "c"+string(rune('1'+c)), time.Second, 2)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				claimed = append(claimed, taskIDs(got)...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(claimed)
	if !slices.Equal(claimed, want) {
		t.Fatalf("claimed %v, want each of %v once", claimed, want)
	}
}

// A row given back is the lost host's again, and the next look claims it again; a row an
// attempt took since the claim is not given back.
func TestReturnExecutorGivesTheRowBack(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	must(t, store.BeatHost(ctx, db, "lost", 1, false))
	beatAgo(t, db, "lost", time.Minute)
	onHost(t, db, "t1", "a1", "lost")
	onHost(t, db, "t2", "a2", "lost")

	got, err := store.ClaimLostExecutors(ctx, db, "self", time.Second, 100)
	must(t, err)
	if len(got) != 2 {
		t.Fatalf("claimed %v", taskIDs(got))
	}
	// t2's turn moved on: a new attempt on a live host owns its row.
	must(t, store.EndAttempt(ctx, db, store.AttemptEnd{TaskID: "t2", AttemptID: "a2", Status: store.ExecutorFailed, Error: "HostLost"}))
	onHost(t, db, "t2", "a3", "live")

	for _, x := range got {
		must(t, store.ReturnExecutor(ctx, db, x))
	}
	if x := getExecutor(t, db, "t1"); x.HostID != "lost" || x.AttemptID != "a1" {
		t.Fatalf("t1 after its return = %+v, want host lost again", x)
	}
	if x := getExecutor(t, db, "t2"); x.HostID != "live" || x.AttemptID != "a3" {
		t.Fatalf("t2 after a stale return = %+v, want the new attempt's row untouched", x)
	}

	again, err := store.ClaimLostExecutors(ctx, db, "self", time.Second, 100)
	must(t, err)
	if ids := taskIDs(again); !slices.Equal(ids, []string{"t1"}) || again[0].HostID != "lost" {
		t.Fatalf("the next look claimed %+v, want t1 of host lost", again)
	}
}
