// Package reference renders kmirror's configuration reference
// (docs/config.md) from core/config's declaration table, and embeds the
// commented sample configuration (docs/kmirror.sample.yaml). The command
// core/config/gen writes both files; `kmirror config reference` and
// `kmirror config sample` print them.
package reference

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kmirror/kmirror/core/config"
	"github.com/kmirror/kmirror/core/config/value"
)

// Sample is the commented sample configuration (docs/kmirror.sample.yaml),
// embedded so that `kmirror config sample` can print it.
//
//go:embed kmirror.sample.yaml
var Sample string

// Generate renders the configuration reference (docs/config.md) from the
// declaration table (config.Keys and config.Unsupported).
func Generate() []byte {
	var b strings.Builder
	b.WriteString(`# kmirror configuration reference

<!-- Generated from core/config/table.go by ` + "`go run ./core/config/gen`" + `. Do not edit by hand. -->

kmirror reads one YAML file (or TOML, when the file name ends in ` + "`.toml`" + `).
Daemon-wide keys sit at the top level; ` + "`destination`" + ` holds the destination
cluster's client keys, ` + "`state`" + ` the state store, ` + "`mirrors`" + ` a list of named
mirrors, each with its source cluster's client keys and its mirror keys, and
` + "`plugins`" + ` the plugins the daemon launches, keyed by name. Key
names and defaults are KIP-1279's wherever the KIP defines them. The design
decisions behind this shape are in [configuration.md](configuration.md); a
commented example is [kmirror.sample.yaml](kmirror.sample.yaml).

**Overrides.** Each layer overrides the one before: the file, then
environment variables, then ` + "`--set key=value`" + ` flags.

| Key | Environment variable | --set |
|---|---|---|
| daemon key ` + "`mirror.num.replica.fetchers`" + ` | ` + "`KMIRROR_MIRROR_NUM_REPLICA_FETCHERS`" + ` | ` + "`mirror.num.replica.fetchers=2`" + ` |
| destination key | ` + "`KMIRROR_DESTINATION__BOOTSTRAP_SERVERS`" + ` | ` + "`destination.bootstrap.servers=h:9092`" + ` |
| state key | ` + "`KMIRROR_STATE__DIR`" + ` | ` + "`state.dir=/var/lib/kmirror`" + ` |
| key of mirror ` + "`dc1-to-dc2`" + ` | ` + "`KMIRROR_MIRRORS__DC1_TO_DC2__SASL_PASSWORD`" + ` | ` + "`mirrors.dc1-to-dc2.sasl.password=…`" + ` |

Environment names are the key upper-cased with dots and dashes turned into
underscores; ` + "`__`" + ` separates the section, the mirror name and the key. An
unknown ` + "`KMIRROR_`" + ` variable is an error (a typo must not go unnoticed), except the
service-link variables Kubernetes sets in every pod for a Service named ` + "`kmirror`" + ` or
` + "`kmirror-<x>`" + ` (` + "`KMIRROR_SERVICE_HOST`" + `, ` + "`KMIRROR_PORT_9644_TCP`" + `, ...), which are
ignored. Overrides change keys of mirrors that the file declares; they do not add
mirrors.

**Values.** Durations are integers in milliseconds (keys ending in ` + "`.ms`" + `).
Lists (regex lists, ACL rules, server lists) are either a comma-separated
string or a YAML/TOML list; a list item is taken whole, so a regex in a list
may contain a comma. Regexes use Go's RE2 syntax and must match the whole
name. Values of keys marked *secret* never appear in errors, logs or dumps.

**Origin** says where a key comes from: *KIP-1279* (name and default from the
KIP), *Kafka* (name from the KIP or Kafka's client configuration, default from
Kafka because the KIP gives none), *kmirror* (kmirror's own key).
`)
	sections := []struct {
		title, intro string
		scope        config.Scope
		origins      []config.Origin
	}{
		{"Daemon keys: KIP-1279 broker configuration", "Top-level keys. KIP-1279 defines them as broker configuration of the destination cluster; kmirror applies them to the whole daemon.", config.ScopeDaemon, []config.Origin{config.OriginKIP, config.OriginKafka}},
		{"Daemon keys: kmirror's own", "Top-level keys that only kmirror has.", config.ScopeDaemon, []config.Origin{config.OriginKmirror}},
		{"Client keys (destination and every mirror)", "Valid under `destination` (the destination cluster) and in each `mirrors` entry (that mirror's source cluster). Only PEM key and trust material is supported.", config.ScopeCluster, nil},
		{"Mirror keys", "Valid in each `mirrors` entry, next to the client keys of its source cluster.", config.ScopeMirror, nil},
		{"State keys", "Under `state`.", config.ScopeState, nil},
		{"Plugin keys", "In each entry of `plugins`, a map keyed by the plugin's name (`[a-z0-9][a-z0-9_-]*`): `plugins: {sso: {kind: auth, path: kmirror-auth-vault, sha256: …, config: {…}}}`. Errors name `plugins.<name>.<key>`. See [plugins.md](plugins.md).", config.ScopePlugin, nil},
	}
	for _, s := range sections {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n", s.title, s.intro)
		for _, k := range config.Keys {
			if k.Scope != s.scope || (s.origins != nil && !hasOrigin(s.origins, k.Origin)) {
				continue
			}
			writeKey(&b, k)
		}
	}
	b.WriteString("\n## Limits\n\n")
	b.WriteString("A configuration beyond these limits is refused at once, before it is decoded, with a message naming the path and the limit. They are far above any real deployment; they keep a wrong or generated file from costing minutes or gigabytes.\n\n")
	b.WriteString("| What | Limit |\n|---|---|\n")
	fmt.Fprintf(&b, "| The configuration file (or standard input) | %s; it must be a regular file (not a directory, a named pipe or a device such as /dev/zero) |\n", value.FormatBytes(config.MaxFileBytes))
	fmt.Fprintf(&b, "| Entries of `mirrors` | %d |\n", config.MaxMirrors)
	fmt.Fprintf(&b, "| Entries of `plugins` | %d |\n", config.MaxPlugins)
	fmt.Fprintf(&b, "| Entries of one list key (regex lists, ACL rules, `bootstrap.servers`, ...) | %d |\n", config.MaxListEntries)
	fmt.Fprintf(&b, "| A password or token file (`sasl.password.file`, `admin.token.file`) | %s |\n", value.FormatBytes(value.MaxSecretFileBytes))
	fmt.Fprintf(&b, "| A PEM file (truststore, keystore, admin certificates) | %s |\n", value.FormatBytes(value.MaxPEMFileBytes))
	fmt.Fprintf(&b, "| Problems listed by one validation | %d (a last line counts the rest) |\n", config.MaxErrors)
	b.WriteString("\n## Keys kmirror recognises but does not support\n\n")
	b.WriteString("These keys appear in KIP-1279's tables or Kafka's client configuration. Setting one is an error that gives the reason below.\n\n")
	b.WriteString("| Key | Where | Reason |\n|---|---|---|\n")
	for _, u := range config.Unsupported {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", u.Name, u.Scope, u.Reason)
	}
	return []byte(b.String())
}

func hasOrigin(list []config.Origin, o config.Origin) bool {
	for _, x := range list {
		if x == o {
			return true
		}
	}
	return false
}

func writeKey(b *strings.Builder, k config.Key) {
	heading := k.Name
	switch k.Scope {
	case config.ScopeState:
		heading = "state." + k.Name
	case config.ScopePlugin:
		heading = "plugins.<name>." + k.Name
	}
	fmt.Fprintf(b, "\n### `%s`\n\n%s\n\n", heading, k.Doc)
	fmt.Fprintf(b, "- Type: %s\n", k.Type)
	switch {
	case k.Required:
		b.WriteString("- Default: none (required)\n")
	case !k.HasDefault || k.Default == "":
		b.WriteString("- Default: empty\n")
	case k.Default == strconv.FormatInt(math.MaxInt64, 10):
		fmt.Fprintf(b, "- Default: `%s` (Long.MAX_VALUE)\n", k.Default)
	default:
		fmt.Fprintf(b, "- Default: `%s`\n", k.Default)
	}
	if k.Constraint != "" {
		fmt.Fprintf(b, "- Valid values: %s\n", k.Constraint)
	}
	fmt.Fprintf(b, "- Origin: %s\n", k.Origin)
	switch k.Scope {
	case config.ScopeCluster:
		fmt.Fprintf(b, "- Environment: `%s`, `%s`\n", config.EnvName(config.ScopeCluster, k.Name, ""), config.EnvName(config.ScopeCluster, k.Name, "<NAME>"))
	case config.ScopeMirror:
		if k.Name == "name" {
			b.WriteString("- Environment: none (a mirror cannot be renamed by an override)\n")
		} else {
			fmt.Fprintf(b, "- Environment: `%s`\n", config.EnvName(config.ScopeMirror, k.Name, "<NAME>"))
		}
	case config.ScopePlugin:
		if k.Name == "config" {
			b.WriteString("- Environment: none (only the plugin knows the types of its keys)\n")
		} else {
			fmt.Fprintf(b, "- Environment: `%s`\n", config.EnvName(config.ScopePlugin, k.Name, "<NAME>"))
		}
	default:
		fmt.Fprintf(b, "- Environment: `%s`\n", config.EnvName(k.Scope, k.Name, ""))
	}
	if k.Secret {
		b.WriteString("- Secret: yes\n")
	}
}
