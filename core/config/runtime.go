package config

import (
	"fmt"
	"strings"
)

// ParseMirror parses the settings of one mirror created at run time (the
// admin API's create): YAML holding the keys of one entry of `mirrors:` —
// the source cluster's client keys and the mirror.* keys — with or without
// its name (when given it must be name). Errors name the key as
// "mirrors[<name>].<key>", like the configuration file's.
//
// A run-time mirror's settings are kept in the state store, which never
// holds a secret: a secret written inline (sasl.password, sasl.jaas.config,
// ssl.keystore.key, ssl.key.password, sasl.oauthbearer.client.secret) is
// refused; point to files instead (sasl.password.file, ssl.keystore.location).
func ParseMirror(data []byte, name string) (Mirror, error) {
	if err := CheckMirrorName(name); err != nil {
		return Mirror{}, err
	}
	var b strings.Builder
	// The daemon keys are placeholders: only the mirror entry is kept.
	b.WriteString("destination:\n  bootstrap.servers: placeholder.invalid:9092\nstate:\n  dir: placeholder-state-dir\nmirrors:\n  - name: " + name + "\n")
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.HasPrefix(line, "\t") {
			return Mirror{}, fmt.Errorf("mirror %s: indent the mirror's settings with spaces, not tabs (YAML)", name)
		}
		if v, ok := strings.CutPrefix(line, "name:"); ok {
			if got := strings.Trim(strings.TrimSpace(v), `"'`); got != name {
				return Mirror{}, fmt.Errorf("mirrors[%s].name: the settings name mirror %q; leave the name out or make it %q", name, got, name)
			}
			continue
		}
		b.WriteString("    " + line + "\n")
	}
	cfg, err := Parse([]byte(b.String()), "yaml", nil, nil)
	if err != nil {
		return Mirror{}, err
	}
	if len(cfg.Mirrors) != 1 {
		return Mirror{}, fmt.Errorf("mirror %s: the settings must describe exactly one mirror", name)
	}
	for _, s := range cfg.Effective() {
		if strings.HasPrefix(s.Path, "mirrors[") && s.Value == Redacted {
			return Mirror{}, fmt.Errorf("%s: a run-time mirror's settings are kept in the state store, which never holds a secret; "+
				"put the secret in a file and point to it (sasl.password.file for passwords, ssl.keystore.location for keys), or declare the mirror in the configuration file", s.Path)
		}
	}
	return cfg.Mirrors[0], nil
}
