package archive

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/task"
)

// jobLockKey is the pg_try_advisory_lock key that lets one archive job run a pass at a time,
// whichever host runs it. Fixed forever.
const jobLockKey int64 = 0x6472_6f76_6572_6131 // "drovera1"

// Defaults of JobConfig.
const (
	DefaultInterval    = time.Minute
	DefaultDeleteAfter = time.Minute
	DefaultBatch       = 20
	DefaultDeleteBatch = 1000
	DefaultRest        = 10
)

// JobConfig configures the archive job.
type JobConfig struct {
	// Dir is the folder archives are written to, one file per task (FileName). Required.
	Dir string
	// Retention is how long a finished task keeps its rows after its last activity, unless its
	// own (task.Params.Retention) says otherwise. Defaults to task.DefaultRetention.
	Retention time.Duration
	// Interval is the time between passes. Defaults to DefaultInterval.
	Interval time.Duration
	// DeleteAfter is how long an archived task's rows stay after its archive is durable and its
	// watchers were told, so that a watch reads what is left before they go. Defaults to
	// DefaultDeleteAfter; negative means at once.
	DeleteAfter time.Duration
	// Batch is how many tasks a pass archives, and how many it deletes. Defaults to DefaultBatch.
	Batch int
	// DeleteBatch is how many rows one delete statement removes (its own short transaction).
	// Defaults to DefaultDeleteBatch.
	DeleteBatch int
	// PartitionGrace is how long after its week ends a partition of task_events waits for the
	// last of its tasks to be archived, keeping the events of its archived tasks for its drop;
	// past it, those events are deleted by row. Defaults to Retention and a week (the week of a
	// task that finished up to a week after the partition's own).
	PartitionGrace time.Duration
	// Rest is how long the job rests after each task it archived or deleted, as a share of the
	// time that task took: DefaultRest works about a tenth of the time, so that the appends of
	// running tasks keep the disk and the processors (most events leave with their week's
	// partition, so what is left to delete one by one is little); negative means no rest.
	Rest   float64
	Logger *slog.Logger
}

func (c JobConfig) withDefaults() JobConfig {
	if c.Retention == 0 {
		c.Retention = task.DefaultRetention
	}
	if c.PartitionGrace <= 0 {
		c.PartitionGrace = c.Retention + store.EventPartitionWidth
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.DeleteAfter == 0 {
		c.DeleteAfter = DefaultDeleteAfter
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.DeleteBatch <= 0 {
		c.DeleteBatch = DefaultDeleteBatch
	}
	if c.Rest == 0 {
		c.Rest = DefaultRest
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Job archives and deletes the finished tasks whose retention has passed. It runs in a worker;
// several hosts may run it, one pass at a time runs (an advisory lock).
type Job struct {
	pool *pgxpool.Pool
	cfg  JobConfig
}

// NewJob returns the job on pool; the archive folder must exist or be creatable.
func NewJob(pool *pgxpool.Pool, cfg JobConfig) (*Job, error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return nil, errors.New("archive job: no archive folder")
	}
	if cfg.Retention < 0 {
		return nil, fmt.Errorf("archive job: retention %s is negative", cfg.Retention)
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("archive job: %w", err)
	}
	return &Job{pool: pool, cfg: cfg}, nil
}

// Run runs a pass every Interval until ctx ends, and the next pass at once after one that found
// a full batch of work (a backlog drains in small passes, back to back); a failed pass is logged
// and the next one tries again. It returns ctx.Err().
func (j *Job) Run(ctx context.Context) error {
	t := time.NewTicker(j.cfg.Interval)
	defer t.Stop()
	for {
		res, err := j.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			j.cfg.Logger.WarnContext(ctx, "archive pass failed; the next one tries again", "error", err)
		} else if len(res.Archived)+len(res.Deleted) > 0 {
			j.cfg.Logger.InfoContext(ctx, "archive pass", "archived", len(res.Archived), "deleted", len(res.Deleted), "rows_deleted", res.RowsDeleted)
		}
		if err == nil && (len(res.Archived) == j.cfg.Batch || len(res.Deleted) == j.cfg.Batch) && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// PassResult says what one pass did.
type PassResult struct {
	Archived    []string // tasks whose archive it wrote (or, imported, marked)
	Deleted     []string // tasks whose rows it deleted
	RowsDeleted int64
	// Partitions lists the week partitions of task_events it made, Dropped those it dropped.
	Partitions, Dropped []string
	Skipped             bool // another host's pass held the lock
}

// Pass makes the partitions of task_events for this week and the next ones
// (store.EnsureEventPartitions), drops each past week's partition whose tasks are all archived
// at least DeleteAfter ago or deleted, deletes the rows of the tasks archived at least
// DeleteAfter ago, then archives the tasks whose retention has passed (at most Batch of each).
// A deleted task's events in a past week, within PartitionGrace, are left for their
// partition's drop; the rest are deleted by row. Archiving a task writes its file
// (to a temporary name, synced, then renamed), then marks it archived by compare-and-set on
// its last activity, which tells its watchers; the rows go in a later pass.
func (j *Job) Pass(ctx context.Context) (PassResult, error) {
	var res PassResult
	conn, err := j.pool.Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("archive pass: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", jobLockKey).Scan(&locked); err != nil {
		return res, fmt.Errorf("archive pass: %w", err)
	}
	if !locked {
		res.Skipped = true
		return res, nil
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", jobLockKey) }()
	now := time.Now()
	made, err := store.EnsureEventPartitions(ctx, j.pool, now, store.EventPartitionsAhead)
	res.Partitions = made
	if errors.Is(err, store.ErrPartitionBusy) {
		j.cfg.Logger.WarnContext(ctx, "a partition of task_events could not be made now; the next pass tries again", "error", err)
	} else if err != nil {
		return res, err
	}
	if err := j.dropPartitions(ctx, conn, now, &res); err != nil {
		return res, err
	}
	if err := j.deleteArchived(ctx, conn, now, &res); err != nil {
		return res, err
	}
	return res, j.archiveExpired(ctx, &res)
}

// deleteBefore is when a task must have been archived for its rows to go.
func (j *Job) deleteBefore(now time.Time) time.Time {
	if j.cfg.DeleteAfter < 0 {
		return now.Add(time.Hour)
	}
	return now.Add(-j.cfg.DeleteAfter)
}

// dropPartitions drops the past weeks' partitions of task_events whose tasks are all archived
// or deleted. Of one kept past its grace by a task that is not, it deletes the events of up to
// Batch archived or deleted tasks by row.
func (j *Job) dropPartitions(ctx context.Context, conn *pgxpool.Conn, now time.Time, res *PassResult) error {
	parts, err := store.EventPartitions(ctx, j.pool)
	if err != nil {
		return err
	}
	before, week := j.deleteBefore(now), store.EventWeek(now)
	for _, p := range parts {
		if p.To.After(week) {
			break // this week's, and the next ones: appends go there
		}
		start := time.Now()
		dropped, err := store.DropEventPartition(ctx, j.pool, p, before)
		if err != nil {
			return err
		}
		if dropped {
			res.Dropped = append(res.Dropped, p.Name)
			j.cfg.Logger.InfoContext(ctx, "dropped a week of events: its tasks are archived", "partition", p.Name)
			j.rest(ctx, start)
			continue
		}
		if !p.To.Before(now.Add(-j.cfg.PartitionGrace)) {
			continue
		}
		ids, err := store.GoneInPartition(ctx, j.pool, p, before, j.cfg.Batch)
		if err != nil {
			return err
		}
		for _, id := range ids {
			start := time.Now()
			n, err := store.DeleteEventsIn(ctx, conn, p, id, j.cfg.DeleteBatch)
			res.RowsDeleted += n
			if err != nil {
				return err
			}
			j.rest(ctx, start)
		}
	}
	return nil
}

func (j *Job) deleteArchived(ctx context.Context, conn *pgxpool.Conn, now time.Time, res *PassResult) error {
	ids, err := store.ArchivedTasks(ctx, j.pool, j.deleteBefore(now), j.cfg.Batch)
	if err != nil {
		return err
	}
	// A past week's events within the grace stay for the drop of their partition.
	week := store.EventWeek(now)
	keep := store.KeptEvents{From: week.Add(-j.cfg.PartitionGrace), To: week}
	for _, id := range ids {
		start := time.Now()
		n, err := store.DeleteArchivedTask(ctx, conn, id, j.cfg.DeleteBatch, keep)
		res.RowsDeleted += n
		if err != nil {
			return err
		}
		res.Deleted = append(res.Deleted, id)
		j.rest(ctx, start)
	}
	return nil
}

func (j *Job) archiveExpired(ctx context.Context, res *PassResult) error {
	exp, err := store.ExpiredTasks(ctx, j.pool, j.cfg.Retention, j.cfg.Batch)
	if err != nil {
		return err
	}
	for _, e := range exp {
		start := time.Now()
		path := ""
		if !e.Imported {
			if path, err = j.write(ctx, e.TaskID); err != nil {
				return err
			}
		}
		ok, err := store.MarkArchived(ctx, j.pool, e.TaskID, e.UpdatedAt, path)
		if err != nil {
			return err
		}
		if ok {
			res.Archived = append(res.Archived, e.TaskID)
		}
		j.rest(ctx, start)
	}
	return nil
}

// rest waits Rest times as long as the work begun at start took, or until ctx ends.
func (j *Job) rest(ctx context.Context, start time.Time) {
	if j.cfg.Rest <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(float64(time.Since(start)) * j.cfg.Rest))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// write writes the task's archive into the folder, durably, and returns its path.
func (j *Job) write(ctx context.Context, taskID string) (string, error) {
	path := filepath.Join(j.cfg.Dir, FileName(taskID))
	if err := WriteFile(ctx, j.pool, taskID, path); err != nil {
		return "", err
	}
	return path, nil
}

// WriteFile writes the task's archive to path: to a temporary file beside it, synced, then
// renamed, so that path holds a whole archive or none.
func WriteFile(ctx context.Context, pool *pgxpool.Pool, taskID, path string) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".archive-*")
	if err != nil {
		return fmt.Errorf("archiving task %s: %w", taskID, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = Export(ctx, pool, taskID, f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("archiving task %s: %w", taskID, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("archiving task %s: %w", taskID, err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("archiving task %s: %w", taskID, err)
	}
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
