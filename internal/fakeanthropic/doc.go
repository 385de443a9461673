// Package fakeanthropic is a fake Anthropic Messages API that the real
// claude CLI accepts, so Claude Code runs offline in tests and demos.
//
// Start a Server on a loopback address, point the CLI at it with
// ANTHROPIC_BASE_URL=srv.URL(), and script what the "model" says:
//
//	srv, err := fakeanthropic.Start(fakeanthropic.Config{})
//	...
//	defer srv.Close()
//	srv.Enqueue(fakeanthropic.Reply(fakeanthropic.UseBash("echo hi")))
//	srv.Enqueue(fakeanthropic.Reply(fakeanthropic.Text("done")))
//
// The server promises:
//
//   - POST /v1/messages answers with the real event sequence of the streaming
//     API (message_start, content_block_start/delta/stop per block, ping,
//     message_delta, message_stop) when the request asks for "stream":true,
//     and with one JSON message otherwise. POST /v1/messages/count_tokens
//     answers a rough estimate. Any other path is a 404 in Anthropic's error
//     shape, except the CLI's HEAD/GET /api/hello connectivity probe.
//   - Every request is classified (see Class) and recorded, parsed, with
//     secret-bearing headers removed. Scripted replies are consumed only by
//     the requests they are meant for: the main conversation takes from the
//     Enqueue queue, subagents from the EnqueueSubagent queue; compaction and
//     auxiliary side queries get automatic answers and never consume a queue.
//   - A main request that finds nothing scripted gets a short default reply
//     and is counted by Unscripted, so a test can assert that the script
//     covered the whole conversation.
//   - Failures can be injected per Response: an HTTP error with retry-after,
//     an SSE error event after some blocks, a delay before every event, or a
//     stream held open until released, until the client goes away, or until
//     Close.
//   - All methods are safe for concurrent use. Close shuts down gracefully and
//     unblocks held streams. The server never logs or records an API key.
package fakeanthropic
