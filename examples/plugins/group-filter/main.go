// Command kmirror-group-filter is a kmirror filter plugin that decides
// which consumer groups (and topics) a mirror syncs, by prefix. kmirror
// starts it; run by hand, it says so and exits.
package main

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/kmirror/kmirror/sdk/plugin"

	"example.com/group-filter/groupfilter"
)

func main() {
	log := hclog.New(&hclog.LoggerOptions{Output: os.Stderr, JSONFormat: true, Level: hclog.Debug})
	plugin.Serve(groupfilter.ServeConfig(log))
}
