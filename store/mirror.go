package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MirrorChunk is a piece of one file of a session, as the mirror keeps it (see
// migrations/0004). Data is compressed; DataSize, DataSHA256 are of the uncompressed bytes;
// FileSize and FileSHA256 describe the whole file once the chunk is applied. A chunk at
// FileOffset 0 starts a new version of its file.
type MirrorChunk struct {
	Path       string
	Seq        int
	FileOffset int64
	Data       []byte
	DataSize   int
	DataSHA256 []byte
	FileSize   int64
	FileSHA256 []byte
}

// MirrorUpdate is what one commit adds to a session's mirror: the new chunks, and the manifest
// that names, for every file of the session, the sequence number of its last chunk.
type MirrorUpdate struct {
	Chunks   []MirrorChunk
	Manifest map[string]int
}

// MirroredFile is the latest state of one mirrored file: its last chunk's sequence number, the
// file's size and hash with it applied, and how many chunks its current version spans.
type MirroredFile struct {
	Path       string
	Seq        int
	FileSize   int64
	FileSHA256 []byte
	Chunks     int
}

// Mirror is what a restore reads of a session: the manifest of its last commit and, per file,
// the chunks of its current version in order.
type Mirror struct {
	Manifest map[string]int
	Files    map[string][]MirrorChunk
}

// MirrorState returns the latest state of each mirrored file of a session, by path.
func MirrorState(ctx context.Context, db DB, sessionID string) (map[string]MirroredFile, error) {
	rows, err := db.Query(ctx, `
		SELECT DISTINCT ON (path) path, seq, file_size, file_sha256,
			count(*) OVER (PARTITION BY path)::int
		FROM session_chunks WHERE session_id = $1 ORDER BY path, seq DESC`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("reading the mirror of session %s: %w", sessionID, err)
	}
	files, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MirroredFile, error) {
		var f MirroredFile
		err := row.Scan(&f.Path, &f.Seq, &f.FileSize, &f.FileSHA256, &f.Chunks)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the mirror of session %s: %w", sessionID, err)
	}
	out := make(map[string]MirroredFile, len(files))
	for _, f := range files {
		out[f.Path] = f
	}
	return out, nil
}

// ReadMirror returns a session's mirror as of one snapshot, or ErrNotFound when the session was
// never mirrored.
func ReadMirror(ctx context.Context, db TxDB, sessionID string) (Mirror, error) {
	var m Mirror
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		// One snapshot for the manifest and the chunks: a commit landing between would not match.
		if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT manifest FROM session_mirrors WHERE session_id = $1`, sessionID).Scan(&m.Manifest); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		rows, err := tx.Query(ctx, `
			SELECT c.path, c.seq, c.file_offset, c.data, c.data_size, c.data_sha256, c.file_size, c.file_sha256
			FROM session_chunks c
			WHERE c.session_id = $1 AND c.seq >= (
				SELECT max(b.seq) FROM session_chunks b
				WHERE b.session_id = c.session_id AND b.path = c.path AND b.file_offset = 0)
			ORDER BY c.path, c.seq`, sessionID)
		if err != nil {
			return err
		}
		chunks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (MirrorChunk, error) {
			var c MirrorChunk
			err := row.Scan(&c.Path, &c.Seq, &c.FileOffset, &c.Data, &c.DataSize, &c.DataSHA256, &c.FileSize, &c.FileSHA256)
			return c, err
		})
		if err != nil {
			return err
		}
		m.Files = map[string][]MirrorChunk{}
		for _, c := range chunks {
			m.Files[c.Path] = append(m.Files[c.Path], c)
		}
		return nil
	})
	if err != nil {
		return Mirror{}, fmt.Errorf("reading the mirror of session %s: %w", sessionID, err)
	}
	return m, nil
}

// MirrorSize sums what the mirror keeps of a session: chunks, stored (compressed) bytes and the
// uncompressed bytes they stand for.
func MirrorSize(ctx context.Context, db DB, sessionID string) (chunks int, stored, raw int64, err error) {
	err = db.QueryRow(ctx, `SELECT count(*), coalesce(sum(octet_length(data)), 0), coalesce(sum(data_size), 0)
		FROM session_chunks WHERE session_id = $1`, sessionID).Scan(&chunks, &stored, &raw)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sizing the mirror of session %s: %w", sessionID, err)
	}
	return chunks, stored, raw, nil
}

// insertMirror applies a commit's update to a session's mirror inside tx: the chunks are
// appended, the versions they replace deleted, and the manifest set. A chunk whose sequence
// number is taken already (a commit retried after it landed) is refused: the commit rolls back.
func insertMirror(ctx context.Context, tx pgx.Tx, taskID string, turn int, sessionID string, u *MirrorUpdate) error {
	if u == nil {
		return nil
	}
	if sessionID == "" {
		return errors.New("mirroring: a session id is required")
	}
	b := &pgx.Batch{}
	for _, c := range u.Chunks {
		if c.FileOffset == 0 {
			b.Queue(`DELETE FROM session_chunks WHERE session_id = $1 AND path = $2 AND seq < $3`, sessionID, c.Path, c.Seq)
		}
		b.Queue(`INSERT INTO session_chunks (session_id, path, seq, file_offset, data, data_size, data_sha256,
				file_size, file_sha256, task_id, turn)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			sessionID, c.Path, c.Seq, c.FileOffset, c.Data, c.DataSize, c.DataSHA256, c.FileSize, c.FileSHA256, taskID, turn)
	}
	b.Queue(`INSERT INTO session_mirrors (session_id, manifest, task_id, turn) VALUES ($1, $2, $3, $4)
		ON CONFLICT (session_id) DO UPDATE SET manifest = excluded.manifest, task_id = excluded.task_id,
			turn = excluded.turn, updated_at = now()`, sessionID, u.Manifest, taskID, turn)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("mirroring session %s: %w", sessionID, err)
	}
	return nil
}
