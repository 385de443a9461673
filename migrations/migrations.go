// Package migrations holds drover's Postgres schema as embedded SQL files and nothing else.
//
// Each file is named <version>_<name>.sql, versions counting up from 1 without gaps
// (0001_initial.sql, 0002_…). A file is applied once, in its own transaction, by
// store.Migrate; an applied file is never edited, a change is a new file.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
