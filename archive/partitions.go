package archive

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store"
)

// DefaultPartitionInterval is how often MakePartitions makes the coming weeks' partitions.
const DefaultPartitionInterval = time.Hour

// MakePartitions makes the partitions of task_events for this week and the next ones
// (store.EnsureEventPartitions) at once and then every interval (DefaultPartitionInterval if
// not above 0), until ctx ends; it returns ctx.Err(). A worker without the archive job runs it,
// so that appends land in their week's partition rather than the default one; the job's passes
// do the same.
func MakePartitions(ctx context.Context, pool *pgxpool.Pool, interval time.Duration, logger *slog.Logger) error {
	if interval <= 0 {
		interval = DefaultPartitionInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		made, err := store.EnsureEventPartitions(ctx, pool, time.Now(), store.EventPartitionsAhead)
		if err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "making the partitions of task_events failed; the next try is in an interval", "error", err)
		} else if len(made) > 0 {
			logger.InfoContext(ctx, "made partitions of task_events", "partitions", made)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
