// Package realcli holds end-to-end tests of package claudecode against the real, pinned Claude
// Code CLI, run offline against internal/offlinemodel through internal/testkit/clitest. Each test asserts
// what the CLI did (what reached the fake API, what landed on disk, which control requests came
// and in which order), not merely that it ran.
//
// With -update (go test ./claudecode/realcli -run . -update) the scenarios also rewrite the
// recorded transcripts in claudecode/testdata/transcripts: <scenario>.jsonl is the CLI's stdout,
// verbatim, and <scenario>.stdin.jsonl what we wrote to its stdin. TestTranscripts checks that
// every recorded transcript decodes and holds one result per prompt. The package has no non-test
// code.
package realcli
