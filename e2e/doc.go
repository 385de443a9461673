// Package e2e holds drover's end-to-end tests: real Temporal dev server, real
// Postgres, the real Claude Code CLI talking to the fake Messages API on
// loopback, and drover workers running as separate processes so that they can
// be killed outright. It has no code of its own.
package e2e
