// Package api is drover's HTTP API: JSON under /api/v1 to create, prompt, interrupt, close and
// cancel tasks, list and show them, list and decide their permission requests, and stream a
// task's events as Server-Sent Events, plus the OpenAPI document that describes it all
// (/api/v1/openapi.json) and a console mounted at "/".
//
// Tasks are read through the shared read side (taskview), commands sent through taskclient, and
// what either answers named by taskerr. It promises: every error is JSON with a stable code
// ({"error":{"code","message"}}); input that
// cannot be taken (malformed or oversize JSON, unknown fields, a bad id, an unknown task) is a
// 4xx and nothing is sent; a creation sent again with the same Idempotency-Key and body creates
// nothing more; an event stream resumed with Last-Event-ID delivers exactly the events missed,
// in order, from the task's event log in Postgres. When tokens are configured every API request
// must carry one as "Authorization: Bearer <token>", compared in constant time; a server on an
// address other than loopback refuses to start without tokens (CheckExposure).
package api
