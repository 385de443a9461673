// Package archive writes a task's rows to one compressed file and reads them back, and runs the
// job that archives and deletes finished tasks whose retention has passed.
//
// An archive is gzip-compressed JSON Lines, one record a line: first a header ({"kind":
// "archive", "version": 1, "task_id", "made_at"}), then the task's rows, each {"kind", "row"},
// in store.ExportTask's order (the tasks row with its recorded state and totals, the executor
// row, turns, attempt costs, decisions, the session mirror's manifests and its chunks' ids and
// digests, then every event in sequence order), and last a trailer ({"kind": "end", "rows":
// {kind: count}}) that says the file is whole. The rows are Postgres's own (to_jsonb of each),
// so the file reads without drover and imports back exactly.
package archive

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store"
)

// Version is the archive format's version, in its header.
const Version = 1

const (
	kindHeader = "archive"
	kindEnd    = "end"
)

// record is one line of an archive.
type record struct {
	Kind    string          `json:"kind"`
	Version int             `json:"version,omitempty"`
	TaskID  string          `json:"task_id,omitempty"`
	MadeAt  *time.Time      `json:"made_at,omitempty"`
	Row     json.RawMessage `json:"row,omitempty"`
	Rows    map[string]int  `json:"rows,omitempty"`
}

// Summary says what an archive holds: its task and how many rows of each kind.
type Summary struct {
	TaskID string         `json:"task_id"`
	Rows   map[string]int `json:"rows"`
}

// FileName is the name of a task's archive in an archive folder: the task id, escaped so that
// it is one file name, and ".jsonl.gz".
func FileName(taskID string) string { return url.PathEscape(taskID) + ".jsonl.gz" }

// Export writes the task's archive to w, from one snapshot of its rows. A task Postgres knows
// nothing of is store.ErrNotFound.
func Export(ctx context.Context, pool *pgxpool.Pool, taskID string, w io.Writer) (Summary, error) {
	zw := gzip.NewWriter(w)
	bw := bufio.NewWriterSize(zw, 64<<10)
	enc := json.NewEncoder(bw)
	now := time.Now().UTC()
	sum := Summary{TaskID: taskID, Rows: map[string]int{}}
	if err := enc.Encode(record{Kind: kindHeader, Version: Version, TaskID: taskID, MadeAt: &now}); err != nil {
		return sum, fmt.Errorf("archiving task %s: %w", taskID, err)
	}
	err := store.ExportTask(ctx, pool, taskID, func(kind string, row json.RawMessage) error {
		sum.Rows[kind]++
		return enc.Encode(record{Kind: kind, Row: row})
	})
	if err != nil {
		return sum, err
	}
	if err := enc.Encode(record{Kind: kindEnd, Rows: sum.Rows}); err != nil {
		return sum, fmt.Errorf("archiving task %s: %w", taskID, err)
	}
	if err := bw.Flush(); err != nil {
		return sum, fmt.Errorf("archiving task %s: %w", taskID, err)
	}
	if err := zw.Close(); err != nil {
		return sum, fmt.Errorf("archiving task %s: %w", taskID, err)
	}
	return sum, nil
}

// FormatError says that a file is not a whole drover archive.
type FormatError struct{ Reason string }

func (e *FormatError) Error() string { return "not a whole drover task archive: " + e.Reason }

// Import brings a task back from its archive (r): afterwards it is listed, shown and watched
// as before, marked imported, and never runs again. A task Postgres still knows is refused
// (store.ErrTaskExists); a file that is not a whole archive is a *FormatError, and nothing is
// written.
func Import(ctx context.Context, pool *pgxpool.Pool, r io.Reader) (Summary, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return Summary{}, &FormatError{Reason: err.Error()}
	}
	defer zr.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(zr, 64<<10))
	var head record
	if err := dec.Decode(&head); err != nil || head.Kind != kindHeader || head.TaskID == "" {
		return Summary{}, &FormatError{Reason: "no archive header"}
	}
	if head.Version != Version {
		return Summary{}, &FormatError{Reason: fmt.Sprintf("version %d; this drover reads version %d", head.Version, Version)}
	}
	sum := Summary{TaskID: head.TaskID, Rows: map[string]int{}}
	var ended bool
	next := func() (string, json.RawMessage, bool, error) {
		var rec record
		if err := dec.Decode(&rec); err != nil {
			if errors.Is(err, io.EOF) {
				return "", nil, false, &FormatError{Reason: "the file ends before its trailer: it was cut short"}
			}
			return "", nil, false, &FormatError{Reason: err.Error()}
		}
		if rec.Kind == kindEnd {
			ended = true
			return "", nil, false, checkCounts(rec.Rows, sum.Rows)
		}
		sum.Rows[rec.Kind]++
		return rec.Kind, rec.Row, true, nil
	}
	if err := store.ImportTask(ctx, pool, head.TaskID, next); err != nil {
		return sum, err
	}
	if !ended {
		return sum, &FormatError{Reason: "no trailer"}
	}
	return sum, nil
}

// checkCounts compares the trailer's counts with the rows read.
func checkCounts(want, got map[string]int) error {
	for k, n := range want {
		if got[k] != n {
			return &FormatError{Reason: fmt.Sprintf("the trailer counts %d %s rows, the file holds %d", n, k, got[k])}
		}
	}
	for k, n := range got {
		if want[k] != n {
			return &FormatError{Reason: fmt.Sprintf("the file holds %d %s rows the trailer does not count", n, k)}
		}
	}
	return nil
}
