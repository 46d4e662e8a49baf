package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/kmirror/kmirror/plugins/auth/oauth"
	"github.com/kmirror/kmirror/plugins/auth/static"
	"github.com/kmirror/kmirror/plugins/filters/groupage"
	"github.com/kmirror/kmirror/plugins/filters/regex"
	"github.com/kmirror/kmirror/plugins/statestore/etcd"
	"github.com/kmirror/kmirror/plugins/statestore/file"
	"github.com/kmirror/kmirror/sdk/plugin"
)

// builtin is a plugin that ships inside the kmirror binary. The host runs
// it out of process, through the same RPC path as any other plugin, by
// re-executing this binary as `kmirror plugin serve <kind> <name>`.
type builtin struct {
	kind  plugin.Kind
	name  string
	serve plugin.ServeConfig // a constructor and its Schema
}

// builtins returns every built-in plugin, by kind and name.
func builtins() []builtin {
	return []builtin{
		{plugin.KindStateStore, "file", plugin.ServeConfig{Schema: file.Schema, NewStateStore: file.NewFromConfig}},
		{plugin.KindStateStore, "etcd", plugin.ServeConfig{Schema: etcd.Schema, NewStateStore: etcd.NewFromConfig}},
		{plugin.KindAuth, "static", plugin.ServeConfig{Schema: static.Schema, NewAuth: static.NewFromConfig}},
		{plugin.KindAuth, "oauth", plugin.ServeConfig{Schema: oauth.Schema, NewAuth: oauth.NewFromConfig}},
		{plugin.KindFilter, "regex", plugin.ServeConfig{Schema: regex.Schema, NewFilter: regex.NewFromConfig}},
		{plugin.KindFilter, groupage.Name, plugin.ServeConfig{Schema: groupage.Schema, NewFilter: groupage.NewFromConfig}},
	}
}

// findBuiltin returns the built-in plugin of kind and name.
func findBuiltin(kind, name string) (builtin, bool) {
	i := slices.IndexFunc(builtins(), func(b builtin) bool { return string(b.kind) == kind && b.name == name })
	if i < 0 {
		return builtin{}, false
	}
	return builtins()[i], true
}

// builtinList names every built-in as "<kind> <name>", for messages.
func builtinList() string {
	var out []string
	for _, b := range builtins() {
		out = append(out, string(b.kind)+" "+b.name)
	}
	return strings.Join(out, ", ")
}

// hiddenCommands are commands that `kmirror help` does not list: what the
// daemon runs itself.
func hiddenCommands() []command {
	return []command{{"plugin", "serve a built-in plugin to a kmirror host (run by the host)", cmdPlugin}}
}

// cmdPlugin is `kmirror plugin serve <kind> <name>`: it serves one built-in
// plugin over go-plugin's gRPC transport to the kmirror host that started
// it. Run by hand, it says what it is and exits 1 (go-plugin's cookie
// check).
func cmdPlugin(args []string, _, stderr io.Writer) int {
	if len(args) != 3 || args[0] != "serve" {
		fmt.Fprintf(stderr, "usage: kmirror plugin serve <kind> <name>\nbuilt-in plugins: %s\n", builtinList())
		return exitUsage
	}
	b, ok := findBuiltin(args[1], args[2])
	if !ok {
		fmt.Fprintf(stderr, "kmirror plugin serve: no built-in %s plugin %q; built-in plugins: %s\n", args[1], args[2], builtinList())
		return exitUsage
	}
	if os.Getenv(plugin.MagicCookieKey) != plugin.MagicCookieValue {
		fmt.Fprintf(stderr, "kmirror plugin serve %s %s serves the built-in %s plugin %q to a kmirror daemon, which starts it; it is not meant to be run by hand.\n", b.kind, b.name, b.kind, b.name)
	}
	plugin.Serve(b.serve) // exits 1 without the host's cookie
	return exitOK
}
