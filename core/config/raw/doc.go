// Package raw reads a configuration into untyped sections, before
// core/config decodes them: the YAML or TOML file (YAML with yaml.v3, TOML with koanf, and
// flattened, so that nested and dotted keys mean the same), then the
// KMIRROR_* environment variables and the --set flags layered over it, in
// that order. The result is a Document: the daemon keys, the destination,
// the state, each mirror and each plugins entry, every value with where it
// came from (the file, a variable or --set).
//
// The package knows the shape of the file (its sections) but not the keys:
// which names a variable may set comes from the index core/config builds
// from its declarations (EnvIndex), and deciding what a value means is
// core/config's job. Problems are reported through a Report function, one
// call per problem, naming the path or the variable at fault; no reason
// contains a value given for a key, since any value may be a secret.
package raw
