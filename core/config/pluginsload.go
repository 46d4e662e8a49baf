package config

import "github.com/kmirror/kmirror/core/config/raw"

// LoadForPlugins is Load for the commands that manage plugin files
// (`kmirror plugins install|list|verify|remove`): it reads, overrides and
// checks the daemon keys (plugin.dir, admin.*), the state section and the
// plugins map, and leaves out the destination and the mirrors — whose
// files (password files, keystores) the operator running the command may
// not be able to read, and which it does not need. Nor does it check each
// plugin file against its sha256: reporting that is the commands' job
// (FileSHA256). Every other problem in the keys it reads is an error, as
// for Load. The Config returned has no Destination and no Mirrors.
func LoadForPlugins(src Source) (*Config, error) {
	data, format, err := src.read()
	if err != nil {
		return nil, err
	}
	return loadWith(decodeForPlugins, data, format, src.Path, src.Env, src.Sets, src.Reserved)
}

// decodeForPlugins is decode for LoadForPlugins: the daemon keys, state
// and plugins.
func decodeForPlugins(d *raw.Document, c *collector) *Config {
	cfg := &Config{}
	failed := decodeSection(d.Daemon, "", []Scope{ScopeDaemon}, func(Scope) any { return cfg }, c)
	validateDaemon(cfg, failed, c)
	failed = decodeSection(d.State, sectionState, []Scope{ScopeState}, func(Scope) any { return &cfg.State }, c)
	validateState(&cfg.State, failed, c)
	decodePluginEntries(d, cfg, c, false)
	return cfg
}
