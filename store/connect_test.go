package store_test

import (
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/testkit/pgtest"
	"github.com/drover-run/drover/store"
)

// The pool's size is a setting of the database URL, which every command that connects accepts.
func TestPoolSettingsInTheURL(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	switch {
	case !strings.Contains(url, "://"):
		url += " pool_max_conns=7"
	case strings.Contains(url, "?"):
		url += "&pool_max_conns=7"
	default:
		url += "?pool_max_conns=7"
	}
	if err := store.EnsureDatabase(t.Context(), url); err != nil {
		t.Fatalf("EnsureDatabase: %v", err)
	}
	pool, err := store.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer pool.Close()
	if got := pool.Config().MaxConns; got != 7 {
		t.Fatalf("pool of %d connections, want 7", got)
	}
}
