// Package builtins is the registry of the plugins that ship inside the
// kmirror binary. The host runs a built-in out of process, through the same
// RPC path as any other plugin, by re-executing the binary as `kmirror
// plugin serve <kind> <name>`, or in process (plugin.builtin.in.process);
// either way it serves what this registry holds. cmd may import plugins/,
// core may not.
package builtins

import (
	"slices"
	"strings"

	"github.com/kmirror/kmirror/plugins/auth/oauth"
	"github.com/kmirror/kmirror/plugins/auth/static"
	"github.com/kmirror/kmirror/plugins/filters/groupage"
	"github.com/kmirror/kmirror/plugins/filters/regex"
	"github.com/kmirror/kmirror/plugins/statestore/etcd"
	"github.com/kmirror/kmirror/plugins/statestore/file"
	"github.com/kmirror/kmirror/plugins/statestore/kafka"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// Plugin is one plugin that ships inside the kmirror binary.
type Plugin struct {
	Kind  plugin.Kind
	Name  string
	Serve plugin.ServeConfig // a constructor and its Schema
}

// All returns every built-in plugin, by kind and name.
func All() []Plugin {
	return []Plugin{
		{plugin.KindStateStore, "file", plugin.ServeConfig{Schema: file.Schema, NewStateStore: file.NewFromConfig}},
		{plugin.KindStateStore, "etcd", plugin.ServeConfig{Schema: etcd.Schema, NewStateStore: etcd.NewFromConfig}},
		{plugin.KindStateStore, "kafka", plugin.ServeConfig{Schema: kafka.Schema, NewStateStore: kafka.NewFromConfig}},
		{plugin.KindAuth, "static", plugin.ServeConfig{Schema: static.Schema, NewAuth: static.NewFromConfig}},
		{plugin.KindAuth, "oauth", plugin.ServeConfig{Schema: oauth.Schema, NewAuth: oauth.NewFromConfig}},
		{plugin.KindFilter, "regex", plugin.ServeConfig{Schema: regex.Schema, NewFilter: regex.NewFromConfig}},
		{plugin.KindFilter, groupage.Name, plugin.ServeConfig{Schema: groupage.Schema, NewFilter: groupage.NewFromConfig}},
	}
}

// Find returns the built-in plugin of kind and name.
func Find(kind, name string) (Plugin, bool) {
	all := All()
	i := slices.IndexFunc(all, func(b Plugin) bool { return string(b.Kind) == kind && b.Name == name })
	if i < 0 {
		return Plugin{}, false
	}
	return all[i], true
}

// List names every built-in as "<kind> <name>", for messages.
func List() string {
	var out []string
	for _, b := range All() {
		out = append(out, string(b.Kind)+" "+b.Name)
	}
	return strings.Join(out, ", ")
}
