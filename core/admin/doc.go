// Package admin owns kmirror's admin API: an HTTP+JSON server on its own
// listener (admin.address) through which operators, and the `kmirror mirrors`
// and `kmirror failover` commands, inspect mirrors and act on them (pause,
// resume, stop, start, failover).
//
// Every request is authenticated before it is routed: by a bearer token
// (admin.token.file, or <state.dir>/admin.token created at the first start),
// compared in constant time, and/or by a client certificate verified by the
// TLS stack against admin.tls.client.ca.file. When both are configured both
// are required. A request that fails authentication gets 401 with a JSON
// reason and reaches no handler. Every request is logged once with its caller
// ("token", or "cn=<subject CN>" for a client certificate), remote address,
// method, path and outcome; the token itself is never logged, returned or
// kept in memory (only its SHA-256 is).
//
// After authentication, a request is validated before any Controller call:
// the path must be canonical, every path parameter passes its check in
// pathParams (a mirror name, after unescaping: %2F is no way into another
// mirror's state), and bodies are decoded strictly (unknown fields, invalid
// mirror names or regexes refused). A refused request gets 4xx and changes
// nothing.
//
// The server acts on the engine only through Controller, which
// *mirror.Engine implements. Controller's types (Status, OpResult, the
// failover and failback orders and results, the errors callers branch on)
// live here, so that the admin API never imports the engine. Routes and JSON shapes are documented in
// docs/operations.md and docs/cli.md; field names are stable.
//
// Every answer that is not 2xx is an ErrorResponse: what failed, a stable
// code (one per kind of failure, each with its HTTP status: classify maps
// the Controller's errors) and a hint saying what to do. Stop, failover,
// failback and delete take dry_run, answered by Controller.Plan with what
// they would do per topic and partition; GET /v1/mirrors/{mirror}/lag
// reads the lag per topic from Status, for clients following a planned
// failover's catch-up.
package admin
