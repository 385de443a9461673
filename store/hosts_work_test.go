package store_test

import (
	"testing"
	"time"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// A host takes work while its beat is fresh and it does not drain; an unknown host does not.
func TestHostTakesWork(t *testing.T) {
	t.Parallel()
	ctx, db := t.Context(), pgtest.NewPool(t)
	takes := func(host string, stale time.Duration) bool {
		t.Helper()
		ok, err := store.HostTakesWork(ctx, db, host, stale)
		must(t, err)
		return ok
	}
	must(t, store.BeatHost(ctx, db, "a", 1, false))
	must(t, store.BeatHost(ctx, db, "b", 2, true))
	if !takes("a", time.Minute) {
		t.Error("a beating host does not take work")
	}
	if takes("b", time.Minute) {
		t.Error("a draining host takes work")
	}
	if takes("nobody", time.Minute) {
		t.Error("an unknown host takes work")
	}
	_, err := db.Exec(ctx, `UPDATE hosts SET heartbeat_at = now() - interval '1 minute' WHERE host_id = 'a'`)
	must(t, err)
	if takes("a", 10*time.Second) {
		t.Error("a host whose beat is stale takes work")
	}
}
