// Command memstore-plugin is a state-store plugin serving an in-memory
// store: the few lines a plugin's main needs, built and launched by
// sdk/plugin's tests to prove Serve end to end.
package main

import (
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore/memstore"
)

func main() {
	plugin.Serve(plugin.ServeConfig{StateStore: memstore.New()})
}
