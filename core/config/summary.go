package config

import (
	"fmt"
	"math"
	"strings"
)

// Summary describes the configuration in a few lines for a start-up log or
// `config validate`. It names clusters, users and patterns, never secrets.
func (c *Config) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "destination: %s\n", clusterSummary(&c.Destination))
	fmt.Fprintf(&b, "state: %s store in %s\n", c.State.Type, c.State.Dir)
	fmt.Fprintf(&b, "mirrors: %d\n", len(c.Mirrors))
	if len(c.Plugins) > 0 {
		fmt.Fprintf(&b, "plugins: %d in %s", len(c.Plugins), c.PluginDirectory())
		if c.PluginBuiltinInProcess {
			b.WriteString(" (built-ins in process)")
		}
		b.WriteString("\n")
		for i := range c.Plugins {
			p := &c.Plugins[i]
			from := "file " + p.File(c.PluginDirectory())
			if p.Builtin != "" {
				from = "built-in " + p.Builtin
			}
			fmt.Fprintf(&b, "  %s: %s plugin, %s\n", p.Name, p.Kind, from)
		}
	}
	for i := range c.Mirrors {
		m := &c.Mirrors[i]
		fmt.Fprintf(&b, "  %s: source %s; topics %s minus %s; groups %s minus %s; acls %s\n",
			m.Name, clusterSummary(&m.Source), listOrNone(m.TopicsInclude.String()), listOrNone(m.TopicsExclude.String()),
			listOrNone(m.GroupsInclude.String()), listOrNone(m.GroupsExclude.String()), listOrNone(m.ACLInclude.String()))
	}
	throttle := "unlimited"
	if c.ReplicationThrottledRate != math.MaxInt64 {
		throttle = fmt.Sprintf("%d bytes/s", c.ReplicationThrottledRate)
	}
	httpAddr := c.HTTPAddress
	if httpAddr == "" {
		httpAddr = "off"
	}
	fmt.Fprintf(&b, "daemon: %d fetcher(s) per source broker, metadata refresh every %s, throttle %s, http %s, admin %s, log %s/%s",
		c.NumReplicaFetchers, c.MetadataRefreshInterval, throttle, httpAddr, c.adminSummary(), c.LogLevel, c.LogFormat)
	return b.String()
}

func listOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func clusterSummary(cl *Cluster) string {
	return fmt.Sprintf("%s (%s)", strings.Join(cl.BootstrapServers, ","), strings.Join(cl.Describe(), ", "))
}

// Setting is one key's effective value.
type Setting struct {
	Path  string // as in error messages: "mirrors[dc1].mirror.topics.include"
	Value string // in file syntax; Redacted for a set secret
}

// Effective lists every key's effective value (defaults included), in
// declaration order: daemon keys, destination, state, then each mirror.
// Secrets show as Redacted. It serves a "show the effective configuration"
// command and comparisons.
func (c *Config) Effective() []Setting {
	var out []Setting
	emit := func(prefix string, scope Scope, target any) {
		for _, k := range Keys {
			if k.Scope == scope {
				out = append(out, Setting{Path: keyPath(prefix, k.Name), Value: k.encode(target)})
			}
		}
	}
	emit("", ScopeDaemon, c)
	emit(sectionDestination, ScopeCluster, &c.Destination)
	emit(sectionState, ScopeState, &c.State)
	for i := range c.Mirrors {
		m := &c.Mirrors[i]
		prefix := fmt.Sprintf("mirrors[%s]", m.Name)
		emit(prefix, ScopeMirror, m)
		emit(prefix, ScopeCluster, &m.Source)
	}
	for i := range c.Plugins {
		emit(sectionPlugins+"."+c.Plugins[i].Name, ScopePlugin, &c.Plugins[i])
	}
	return out
}

// adminSummary says where the admin API listens and how callers
// authenticate; it names the token file, never the token.
func (c *Config) adminSummary() string {
	if c.AdminAddress == "" {
		return "off"
	}
	var auth []string
	if c.AdminUsesToken() {
		auth = append(auth, "token "+c.AdminTokenPath())
	}
	if c.AdminUsesClientCerts() {
		auth = append(auth, "client certificates")
	}
	scheme := "http"
	if c.AdminUsesTLS() {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s (%s)", scheme, c.AdminAddress, strings.Join(auth, " + "))
}
