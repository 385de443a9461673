// Package clitest runs the real, pinned Claude Code CLI offline in tests: a Harness starts a fake
// Messages API (internal/offlinemodel), gives the CLI a fresh HOME, CLAUDE_CONFIG_DIR and work
// directory under the test's temporary directory, starts it through claudecode.Start, and records
// every line the CLI writes on stdout, verbatim, and every line we write to its stdin.
//
// What it promises:
//
//   - The CLI never inherits the test process's ANTHROPIC_* or CLAUDE_* variables; its credential is
//     a fake API key (or, with Options.OAuth, a fake claude.ai OAuth token), and a test fails if it
//     shows up in anything the CLI printed. Harness.Account names it in the fake API's account
//     limits and request log.
//   - When the test ends (or Close is called), every CLI process the harness started has exited and
//     neither its pid nor its process group is left.
//   - The stdin record is byte for byte what the client wrote, re-marshalled with the same claudecode
//     functions the client uses (claudecode.Process owns the stdin pipe, so it cannot be tapped).
//   - A test fails if the CLI sent the fake Messages API a request that the real API would refuse.
//   - A test is skipped, with a message saying to run scripts/tools.sh, only when the CLI binary is
//     absent.
//
// The harness is for tests only: it reports failures through testing.TB.
package clitest
