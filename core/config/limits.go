package config

import (
	"fmt"

	"github.com/kmirror/kmirror/core/config/raw"
	"github.com/kmirror/kmirror/core/config/value"
)

// Limits of a configuration. Each is far above what a real deployment
// needs and keeps a wrong or generated file from costing minutes or
// gigabytes before it is refused; docs/config.md lists them.
const (
	// MaxFileBytes caps the configuration file (and data given to Parse).
	MaxFileBytes = raw.MaxFileBytes
	// MaxMirrors caps the mirrors entries of one daemon.
	MaxMirrors = 1000
	// MaxPlugins caps the plugins entries.
	MaxPlugins = 100
	// MaxListEntries caps the entries of one list key (a regex list, ACL
	// rules, bootstrap servers).
	MaxListEntries = value.MaxListEntries
)

// checkCounts refuses a document with more mirrors or plugins than the
// limits, before any of them is decoded.
func checkCounts(d *raw.Document, c *collector) bool {
	ok := true
	if n := len(d.Mirrors); n > MaxMirrors {
		c.add(sectionMirrors, fmt.Sprintf("%d mirrors, more than the limit of %d per daemon; run several daemons, each with a part of the mirrors", n, MaxMirrors))
		ok = false
	}
	if n := len(d.Plugins); n > MaxPlugins {
		c.add(sectionPlugins, fmt.Sprintf("%d plugins, more than the limit of %d", n, MaxPlugins))
		ok = false
	}
	return ok
}
