// Package pluginhost launches and supervises kmirror's plugins: every entry
// of the configuration's plugins map runs as a child process speaking the
// SDK's gRPC protocols through hashicorp/go-plugin (or, for a built-in with
// InProcess set, inside the daemon), and the rest of the daemon reaches it
// through a stable handle per kind (Host.StateStore, Host.Auth,
// Host.Filter) that outlives any one process.
//
// # Launching one plugin
//
//  1. Verify: the file's SHA-256 must equal the configured one (a mismatch
//     is an error naming the file and both sums; the process is not
//     started). go-plugin's SecureConfig checks it again as it launches.
//     A built-in is the kmirror binary itself, re-executed as
//     `kmirror plugin serve <kind> <name>`; its sum is taken at Start and
//     checked at every launch, so a binary replaced on disk under a running
//     daemon is not run as its plugin.
//  2. Start: go-plugin client with AutoMTLS, gRPC only, the magic cookie of
//     sdk/plugin.Handshake and the protocol versions of
//     sdk/plugin.ClientPlugins. A plugin whose major version the host does
//     not speak is refused with both versions named.
//  3. Configure: read the plugin's Schema, check the plugins.<name>.config
//     block against it (errors name plugins.<name>.config.<key>), then
//     Configure; the plugin may refuse a value the same way.
//  4. Dispense the kind and publish it to the handle.
//
// # Supervision
//
// One goroutine per out-of-process plugin watches its process. When it
// exits, the handle fails every call with an *UnavailableError (matching
// ErrUnavailable, and auth.ErrUnavailable or filter.ErrUnavailable for
// those kinds) that names plugin.<kind>.<name> and the exit status, and the
// supervisor launches it again — verify, start, configure, dispense — after
// a wait drawn from the restart policy (core/backoff: doubling, capped,
// jittered). The wait starts over once a process has stayed up longer than
// the policy's cap. Callers need no reconnection logic: the next call after
// a restart reaches the new process.
//
// # Probing
//
// Probe launches a plugin file once without configuring it — verified,
// handshake, the kind's service looked up through gRPC reflection, Schema,
// and the kind's Info where the plugin can answer before it is configured
// — and stops it. `kmirror plugins install` and `plugins list` use it to
// refuse a file that is no kmirror plugin of the kind, or speaks another
// protocol major version, and to show a plugin's version.
//
// # Logs
//
// A plugin logs hclog JSON to stderr. The host re-logs each line through a
// logger named plugin.<kind>.<name> (go-plugin's own messages about the
// process go there too), so one log.level and log.format govern them.
//
// # Invariants
//
//   - Every goroutine the Host starts is stopped and waited for by Close;
//     go-plugin's goroutines for a process end with its Kill.
//   - Close stops each process gracefully (go-plugin closes the connection
//     and waits two seconds) and then kills it; no process outlives Close.
//   - A plugin's config values are never logged or put into errors: only
//     key names are.
//   - The package never imports plugins/ (the built-ins are reached by
//     re-executing the binary, or through Options.Builtins in process).
package pluginhost
