package config

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/kmirror/kmirror/core/config/raw"
	"github.com/kmirror/kmirror/core/config/security"
	"github.com/kmirror/kmirror/core/config/value"
)

// Checks that involve more than one key. Each runs only when the keys it
// reads decoded cleanly, so one mistake yields one message.

func validateDaemon(cfg *Config, failed map[string]bool, c *collector) {
	validateAdmin(cfg, failed, c)
	if !failed["replica.socket.timeout.ms"] && !failed["replica.fetch.wait.max.ms"] &&
		cfg.ReplicaSocketTimeout < cfg.ReplicaFetchWaitMax {
		c.add("replica.socket.timeout.ms", fmt.Sprintf("%d is less than replica.fetch.wait.max.ms (%d): a fetch that waits would time out; raise it or lower replica.fetch.wait.max.ms",
			cfg.ReplicaSocketTimeout.Milliseconds(), cfg.ReplicaFetchWaitMax.Milliseconds()))
	}
	if !failed["mirror.failed.retry.max.backoff.ms"] && !failed["mirror.failed.retry.initial.backoff.ms"] &&
		cfg.FailedRetryMaxBackoff < cfg.FailedRetryInitialBackoff {
		c.add("mirror.failed.retry.max.backoff.ms", fmt.Sprintf("%d is less than mirror.failed.retry.initial.backoff.ms (%d)",
			cfg.FailedRetryMaxBackoff.Milliseconds(), cfg.FailedRetryInitialBackoff.Milliseconds()))
	}
	if !failed["mirror.transaction.timeout.ms"] && cfg.TransactionTimeout.Milliseconds() > math.MaxInt32 {
		c.add("mirror.transaction.timeout.ms", fmt.Sprintf("%d is out of range: Kafka transaction timeouts are at most 2147483647 ms", cfg.TransactionTimeout.Milliseconds()))
	}
}

func validateState(s *State, failed map[string]bool, c *collector) {
	if failed["type"] || failed["dir"] || failed["plugin"] {
		return
	}
	switch {
	case s.Type == StateTypePlugin && s.Plugin == "":
		c.add("state.plugin", "required when state.type is plugin: the name of a statestore plugin in plugins")
		return
	case s.Type != StateTypePlugin && s.Plugin != "":
		c.add("state.plugin", fmt.Sprintf("set but state.type is %s; set state.type to plugin, or remove state.plugin", s.Type))
		return
	case s.Type != StateTypeFile:
		return
	}
	if strings.TrimSpace(s.Dir) == "" {
		c.add("state.dir", "required when state.type is file: the directory holding the state store")
		return
	}
	if fi, err := os.Stat(s.Dir); err == nil && !fi.IsDir() {
		c.add("state.dir", fmt.Sprintf("%s exists and is not a directory", s.Dir))
	}
}

// validateCluster checks the security keys of one cluster as a whole:
// sasl.* and ssl.* only with a protocol that uses them, complete SASL
// credentials, readable TLS files holding what they should.
func validateCluster(cl *Cluster, prefix string, sec raw.Section, failed map[string]bool, c *collector) {
	if failed["security.protocol"] {
		return
	}
	report := func(probs []security.Problem) {
		for _, p := range probs {
			if !failed[p.Key] {
				c.add(keyPath(prefix, p.Key), p.Reason)
			}
		}
	}
	if !cl.UsesSASL() {
		misplaced(sec, prefix, "sasl.", cl.SecurityProtocol, "SASL_PLAINTEXT or SASL_SSL", c)
	} else if !failed["sasl.mechanism"] {
		_, probs := cl.ResolveSASL()
		report(probs)
	}
	if !cl.UsesTLS() {
		misplaced(sec, prefix, "ssl.", cl.SecurityProtocol, "SSL or SASL_SSL", c)
	} else {
		_, probs := cl.ResolveTLS()
		report(probs)
	}
}

// misplaced reports keys with the given prefix that were set although the
// security protocol does not use them; Kafka would ignore them silently,
// which hides a wrong protocol.
func misplaced(sec raw.Section, prefix, keyPrefix, protocol, want string, c *collector) {
	var set []string
	for _, k := range sortedKeys(sec.Vals) {
		if strings.HasPrefix(k, keyPrefix) && isKnown(k) {
			set = append(set, k)
		}
	}
	if len(set) == 0 {
		return
	}
	c.add(keyPath(prefix, set[0]), fmt.Sprintf("%s* set but security.protocol is %s; set security.protocol to %s, or remove %s",
		keyPrefix, protocol, want, strings.Join(set, ", ")))
}

func isKnown(name string) bool {
	for _, k := range Keys {
		if k.Name == name {
			return true
		}
	}
	return false
}

// validatePluginRefs checks that every key naming a plugin names one of
// the plugins section, of the kind the key needs.
func validatePluginRefs(cfg *Config, c *collector) {
	kinds := map[string]string{}
	for _, p := range cfg.Plugins {
		kinds[p.Name] = p.Kind
	}
	check := func(key, name, kind string) {
		switch got, ok := kinds[name]; {
		case !ok:
			known := make([]string, 0, len(kinds))
			for n, k := range kinds {
				if k == kind {
					known = append(known, n)
				}
			}
			sort.Strings(known)
			c.add(key, fmt.Sprintf("no plugin named %s in plugins (%s plugins configured: %s)", value.Quote(name), kind, namesOrNone(known)))
		case got != kind:
			c.add(key, fmt.Sprintf("plugin %s is of kind %s; this key needs one of kind %s", value.Quote(name), got, kind))
		}
	}
	if cfg.State.Type == StateTypePlugin && cfg.State.Plugin != "" {
		check("state.plugin", cfg.State.Plugin, "statestore")
	}
	if p := cfg.Destination.SASLCredentialsPlugin; p != "" && cfg.Destination.UsesSASL() {
		check(keyPath(sectionDestination, "sasl.credentials.plugin"), p, "auth")
	}
	for _, m := range cfg.Mirrors {
		label := fmt.Sprintf("mirrors[%s]", m.Name)
		if p := m.Source.SASLCredentialsPlugin; p != "" && m.Source.UsesSASL() {
			check(keyPath(label, "sasl.credentials.plugin"), p, "auth")
		}
		for i, p := range m.FilterPlugins {
			check(fmt.Sprintf("%s.mirror.filter.plugins[%d]", label, i), p, "filter")
		}
	}
}

func namesOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
