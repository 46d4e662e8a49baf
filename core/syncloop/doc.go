// Package syncloop holds the two pieces every mirror's metadata sync is made
// of: Loop, the template of a sync loop (an idempotent round at once, on
// every interval and on trigger, errors reported and never fatal), and
// Lease, the metadata-sync lease in the state store that lets one daemon at
// a time run a mirror's loops. core/mirror builds one Lease and its loops
// (topics, topic configs, groups, ACLs, read-only ACLs) per mirror.
package syncloop
