// Package claudecode drives the Claude Code CLI (`claude -p` speaking stream-json over stdio) as a Go
// value: wire types for every line the CLI writes and every line we write, an NDJSON codec without a
// line-length limit, a client that matches control requests to their responses and answers the CLI's
// own requests, a command builder, and a process lifecycle that never leaves a child behind.
//
// What it promises:
//
//   - Decode never panics and never fails on a well-formed JSON object, whatever its type or subtype:
//     unknown kinds come back as *Unknown with their bytes kept. Every decoded Message keeps the exact
//     line it came from (Raw).
//   - Answers to the CLI's control requests are written in the envelope the real CLI accepts:
//     {"type":"control_response","response":{"subtype":"success","request_id":…,"response":{…}}}.
//   - Secrets (the API key) never appear in arguments, log values or errors produced here.
//   - Stop and a cancelled context end the whole process group of the CLI, grandchildren included.
//
// The package knows nothing of Temporal, Postgres or drover's events; the streamjson package turns its
// messages into events.
package claudecode
