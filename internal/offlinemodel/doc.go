// Package offlinemodel is the offline model: a stand-in for the Anthropic
// Messages API that the real claude CLI accepts, so Claude Code runs offline
// in `drover dev`, `drover demo` and the tests, and a witness of what the CLI
// sent and was billed that a test can hold drover's own records against.
//
// Start a Server on a loopback address, point the CLI at it with
// ANTHROPIC_BASE_URL=srv.URL(), and script what the "model" says:
//
//	srv, err := offlinemodel.Start(offlinemodel.Config{})
//	...
//	defer srv.Close()
//	srv.Enqueue(offlinemodel.Reply(offlinemodel.UseBash("echo hi")))
//	srv.Enqueue(offlinemodel.Reply(offlinemodel.Text("done")))
//	...
//	if err := srv.CheckValid(); err != nil { t.Error(err) }
//
// The server promises:
//
//   - POST /v1/messages answers with the real event sequence of the streaming
//     API (message_start, content_block_start/delta/stop per block, ping,
//     message_delta, message_stop) when the request asks for "stream":true,
//     and with one JSON message otherwise. POST /v1/messages/count_tokens
//     answers a rough estimate. Any other path is a 404 in Anthropic's error
//     shape, except the CLI's HEAD/GET /api/hello connectivity probe.
//   - Every Messages and count_tokens request is validated as the real API
//     validates it (below). An invalid one is answered with the API's error
//     (400 invalid_request_error, or 404 not_found_error for an unknown
//     model), consumes nothing scripted, bills nothing, and is recorded with
//     its reason: Invalid lists them, CheckValid turns them into one error.
//     The test harnesses built on this package fail a test that has any.
//   - Every request is classified (see Class) and recorded, parsed, with
//     secret-bearing headers removed. Scripted replies are consumed only by
//     the requests they are meant for: the main conversation takes from the
//     Enqueue queue, subagents from the EnqueueSubagent queue; compaction and
//     auxiliary side queries get automatic answers and never consume a queue.
//   - A main request that finds nothing scripted gets a short default reply
//     and is counted by Unscripted, so a test can assert that the script
//     covered the whole conversation.
//   - Every answer that carries a message is written in a ledger (Ledger,
//     LedgerSince with Mark, LedgerTotals, SumLedger): class, model, the
//     usage it reported, whether it completed, and its cost by the price
//     table below. Unless a reply sets its usage (WithUsage), the usage is
//     estimated from the request's size and shared between plain input,
//     cache reads and cache writes (Config.CacheSplit; by default every
//     answer reports cache tokens of both kinds).
//   - anthropic-ratelimit-* headers go with every answer (Config.RateLimit)
//     or with one reply (WithRateLimit); WithHeader adds any other header.
//   - Failures can be injected per Response: an HTTP error with retry-after;
//     an SSE error event between blocks (WithStreamError) or inside a block,
//     after some of its deltas and before its content_block_stop
//     (WithStreamErrorMidBlock); a dropped connection at the same places
//     (WithDisconnect, WithDisconnectMidBlock); a delay before every event;
//     or a stream held open until released, until the client goes away, or
//     until Close.
//   - Every request names its account (Account), told apart by its
//     credential: an API key (x-api-key) or a claude.ai OAuth token
//     (Authorization: Bearer), labelled by the credential's kind and the
//     first 12 hex digits of its SHA-256 (APIKeyAccount, OAuthAccount).
//     Requests, ledger entries and the request log carry the label.
//   - An account can be limited (SetLimit, LiftLimit, Limit): a usage limit
//     (UsageLimit) that lifts by itself at its reset or, HeldPastReset, only
//     when the test lifts it; a spend cap (SpendCapLimit) until lifted; an
//     overload (OverloadLimit). Every Messages request of a limited account
//     (main, subagent, compaction, auxiliary; not count_tokens) gets the
//     API's refusal for the account's kind (see Accounts and limits),
//     consumes nothing scripted and bills nothing.
//   - An OAuth account's answers can report its subscription usage in
//     anthropic-ratelimit-unified-* headers (SetQuota, WarningQuota).
//   - The request log (Calls) times every request by Config.Clock: account,
//     class, arrival, end of the answer, status, and the limit that refused
//     it with the reset it announced. Calls filters it (Of, Class, Limited,
//     Answered, Started, Active) and measures it (MaxInFlight, MaxPerReset),
//     so that a test can hold drover to "no request between T1 and T2", "one
//     request per announced reset" or "at most N main requests at once".
//   - All methods are safe for concurrent use. Close shuts down gracefully and
//     unblocks held streams. The server never logs or records a credential.
//
// # Validation
//
// A request is refused, with a message worded like the real API's, when:
//
//   - model is missing, or not a known model: the built-in ones
//     (BuiltinModels: every id the pinned CLI accepts and the dated ids of
//     the same models) and Config.Models. An unknown model gets what the real
//     API answers, 404 not_found_error "model: NAME";
//   - max_tokens is missing, not an integer, below 1, or above the model's
//     output limit (not checked for count_tokens);
//   - messages is missing or empty, or the first message's role is not
//     "user", or a role is not "user", "assistant" or "system";
//   - two "user" or two "assistant" messages follow each other, messages
//     with role "system" (which the pinned CLI sends: see Class) standing
//     outside the alternation;
//   - a message other than a final assistant message has no content;
//   - a text block (of a message, of the system prompt, or inside a
//     tool_result) is empty or only whitespace;
//   - a tool_use of an assistant message is not answered by a tool_result
//     with its id in the very next message, which must be a user message; a
//     tool_result does not answer a tool_use of the message just before it;
//     tool_use ids repeat; a tool_use sits in a user message or a
//     tool_result in an assistant one.
//
// The real API accepts two consecutive messages of one role and merges
// them. The fake refuses them, because the pinned CLI never sends them on
// its own: every request of every scenario of this package's CLI tests, of
// claudecode/realcli (the recorded transcripts), of the streamjson live
// tests and of the e2e suite alternates user and assistant, with "system"
// messages only right after a user message (a subagent's request ends with
// one) and never between a tool_use and its tool_result. The CLI merges
// consecutive user turns itself (an interrupt note and the next prompt, or a
// prompt written twice into a session transcript, become one user message
// with several text blocks), and drops empty text blocks and tool_results
// without a tool_use from the prompts it is given. It sends two assistant
// messages in a row when a resumed session transcript lost a tool's result:
// it drops the unanswered call and keeps the assistant messages around it.
// That is the malformed resume the validation is there to catch; the CLI
// then reports "API Error: 400 messages.N: roles must alternate …" (after
// trying the same request several times) and exits 1.
//
// # Ledger and prices
//
// An answer is billed as completed when all of it was sent: message_stop
// for a stream, the whole body for JSON. A stream cut by an injected error
// event, a dropped connection, the client going away or Close has an entry
// too, with Completed false, Cut saying why, Blocks the number of blocks it
// sent whole, and the usage it reported before the cut (message_start's:
// output_tokens 1); LedgerTotals keeps such entries apart
// (Incomplete…). HTTP errors and refused requests have no entry.
//
// The pinned CLI counts a turn's cost and tokens (result
// model_usage_since_last_result and the running total_cost_usd) exactly as
// the ledger does for answers that completed, main, subagent, auxiliary and
// compaction alike. Of a cut stream it counts what it reported when the CLI continues
// from it (an error event after at least one complete block), and nothing
// when it gives the stream up and asks again without streaming (an error
// event inside or before the first block). After a dropped connection what
// it counts depends on timing: nothing, the cut stream's usage, or that
// usage with more output tokens.
//
// Price.Cost reproduces the CLI's arithmetic. The rates, in dollars per
// million tokens (input / output / cache write / cache read), were read off
// the CLI: recorded transcripts (claudecode/testdata/transcripts,
// streamjson/testdata/recorded: claude-opus-5-5 only) and runs of the pinned
// CLI with --model set and one kind of token at a time:
//
//	claude-opus-5-5                                 4     / 20   / 5     / 0.2
//	claude-opus-5, -4-8, -4-7, -4-6, -4-5           5     / 25   / 6.25  / 0.5
//	claude-opus-4-1, -4-0 (list prices; the CLI sends claude-opus-5-5 instead)
//	                                                15    / 75   / 18.75 / 1.5
//	claude-sonnet-5-5                               2     / 10   / 2.5   / 0.1
//	claude-sonnet-5                                 2     / 10   / 2.5   / 0.2
//	claude-sonnet-4-6, -4-5, -4-0, 3-7, 3-5         3     / 15   / 3.75  / 0.3
//	claude-fable-5, claude-mythos-5                 10    / 50   / 12.5  / 1
//	claude-fable-5-1, claude-mythos-5-1             10    / 50   / 12.5  / 0.25
//	claude-fable-5-2, claude-mythos-5-2             8     / 40   / 10    / 0.2
//	claude-haiku-5-5                                0.1   / 0.5  / 0.125 / 0.01
//	  prompts over 100,000 tokens (input + cache)   0.5   / 2.5  / 0.625 / 0.05
//	claude-haiku-4-5                                1     / 5    / 1.25  / 0.1
//	claude-3-5-haiku                                0.8   / 4    / 1     / 0.08
//
// Cache writes are priced at the five-minute rate: the fake never reports
// one-hour cache writes nor an inference region, which the CLI would price
// otherwise. The CLI prices a model it does not know like claude-opus-5-5.
//
// # Rate-limit headers
//
// With an API key the pinned CLI shows nothing of the anthropic-ratelimit-*
// headers, even when every window is used up and with the unified-* headers
// of claude.ai subscriptions: no rate_limit_event (it sends those only for
// claude.ai accounts), no api_retry, no other frame, the same result. A 429
// carrying them is an ordinary API error, retried after retry-after.
//
// With CLAUDE_CODE_OAUTH_TOKEN instead of ANTHROPIC_API_KEY the pinned CLI
// sends the token as "Authorization: Bearer" (an API key goes as x-api-key)
// and, with the offline environment of the package's tests, still calls
// nothing but /v1/messages on ANTHROPIC_BASE_URL (plus the /api/hello probe
// when non-essential traffic is allowed): no profile or role endpoints, so
// the server needs none. Its default model is then claude-sonnet-5-5, and it
// reads the anthropic-ratelimit-unified-* headers: a rate_limit_event each
// time the state they describe changes, not on every answer.
//
// # Accounts and limits
//
// What each limit answers, and what the pinned CLI makes of it
// (claudecode/realcli limits_test.go pins each):
//
//   - Usage limit, OAuth account: 429 rate_limit_error with unified status
//     "rejected", reset (Unix seconds), representative claim (the window)
//     and the window's utilization 1 and reset. The CLI does not retry it
//     (whatever CLAUDE_CODE_MAX_RETRIES), prints a rate_limit_event with
//     status rejected, rateLimitType and resetsAt, and ends the turn:
//     api_error_status 429, api_error "usage_limit_reached", and the same
//     rate_limit_info in the synthetic message's api_error_params.
//   - Usage limit, API-key account: 429 rate_limit_error with retry-after
//     (the seconds to the reset, rounded up; 1 once past a held reset) and
//     anthropic-ratelimit-* headers with nothing remaining. The CLI waits
//     retry-after plus up to 25% and asks again (system/api_retry), up to
//     CLAUDE_CODE_MAX_RETRIES times; a retry-after above 60 s ends the turn
//     at once, unless CLAUDE_CODE_RETRY_WATCHDOG is set: then every 429 is
//     announced and waited out.
//   - Spend cap, API-key account (SpendCap): the tier's monthly cap, 429 with
//     error.details.error_code enforced_spend_limit_reached and no
//     retry-after, retried like any 429 and then reported as the result's
//     api_error_code; a Console spend limit, 400 invalid_request_error "You
//     have reached your specified API usage limits…", resent by the CLI in
//     other shapes (six requests a turn) and reported as a plain 400; an
//     empty credit balance, 400 "Your credit balance is too low…", reported
//     at once (synthetic error billing_error).
//   - Spend cap, OAuth account: 429 with unified status "rejected", claim
//     "overage", overage-status "rejected", overage-disabled-reason
//     (org_spend_cap_reached unless WithOverage says otherwise) and
//     overage-reset. The CLI treats it as a usage limit (rateLimitType
//     overage; it reports org_spend_cap_reached as org_level_disabled_until).
//   - Overload: 529 overloaded_error, with retry-after if set. The CLI
//     retries it, then ends the turn with api_error_status 529.
//
// The CLI reads unified status "allowed_warning" as "allowed": it reports
// allowed_warning for a window whose <window>-surpassed-threshold header is
// set, or whose utilization is high for the time left (five hours: 0.9 with
// at most 72% of the window gone; seven days: 0.75 at 60%, 0.5 at 35%, 0.25
// at 15%), and keeps the last reading of a window an answer leaves out.
//
// # Injected stream failures
//
// The pinned CLI never keeps a block that was cut. After an error event
// that follows at least one complete block (between blocks or inside a
// later one) it keeps the complete blocks and asks for a continuation
// (streaming, with a user note that the answer was cut off); after four cut
// answers in a row the turn ends with "API Error: Server error
// mid-response…" and no api_error_status. After an error event before or
// inside the first block, or any dropped connection, it asks again without
// streaming (max_tokens the smaller of 64000 and the model's limit); when
// that fails too, the turn ends with that API error ("API Error: 529
// Overloaded…", or "API Error: Connection dropped (ECONNRESET)…").
package offlinemodel
