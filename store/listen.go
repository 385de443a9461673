package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen calls fn with the payload of every notification on channel until ctx is done, then
// returns ctx's error. It holds one connection of pool. After it starts listening, and again
// after every reconnect (the connection was lost; it retries every reconnectDelay), it calls
// fn("") so that callers look again for what they wait for: notifications sent while it was not
// listening are lost. logger (nil: silent) hears about lost connections.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, reconnectDelay time.Duration, logger *slog.Logger, fn func(payload string)) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if reconnectDelay <= 0 {
		reconnectDelay = 500 * time.Millisecond
	}
	for {
		err := listenOnce(ctx, pool, channel, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logger.WarnContext(ctx, "listener lost its connection; reconnecting", "channel", channel, "error", err, "delay", reconnectDelay)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(reconnectDelay):
		}
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, fn func(string)) error {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquiring connection: %w", err)
	}
	conn := pc.Conn()
	defer func() {
		if !conn.IsClosed() {
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, err := conn.Exec(uctx, "UNLISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
				_ = conn.Close(uctx)
			}
			cancel()
		}
		pc.Release()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listening on %s: %w", channel, err)
	}
	fn("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("waiting for notifications on %s: %w", channel, err)
		}
		fn(n.Payload)
	}
}
