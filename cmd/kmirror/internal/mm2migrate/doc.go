// Package mm2migrate is `kmirror config migrate`: it translates a
// MirrorMaker 2 configuration (connect-mirror-maker.properties, Java
// properties syntax) into a kmirror configuration.
//
// What it translates: the clusters and their bootstrap servers; the flows
// (SOURCE->TARGET.enabled) into one destination, one mirror each; the
// topics and groups filters (topics, topics.exclude and the legacy
// topics.blacklist, groups, groups.exclude, groups.blacklist), with the
// topics MirrorMaker 2 never mirrors added to the exclude list; the
// security settings (security.protocol, sasl.mechanism, sasl.jaas.config
// for PLAIN and SCRAM into sasl.username and a password file, OAUTHBEARER
// into its keys with the secret left to the environment, JKS and PKCS12
// stores into PEM paths with the commands to convert them); the sync
// switches (sync.topic.configs.enabled, sync.topic.acls.enabled,
// emit.checkpoints.enabled, sync.group.offsets.enabled); the intervals and
// the source's consumer fetch settings into kmirror's daemon keys.
//
// What has no equivalent is listed with the reason (replication policies:
// kmirror keeps topic names; offset syncs and checkpoints: offsets are
// preserved; heartbeats; tasks.max; the Connect worker's keys), and so is
// every key neither knows. A password is never written into the
// configuration or shown: it goes into a file of its own (0600) when the
// caller asks, else the report says which file to write. The result is
// checked with kmirror's own validation (config.Parse), with stand-ins for
// the files that do not exist yet.
//
// Run is the whole command; cmd/kmirror wires it under `config migrate`.
// docs/migrating-from-mirrormaker2.md walks through a cut-over.
package mm2migrate
