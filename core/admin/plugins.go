package admin

import "net/http"

// RoutePlugins lists the daemon's plugins.
const RoutePlugins = "GET /v1/plugins"

// PluginSource is what GET /v1/plugins reads: the daemon's plugin host.
// cmd adapts *pluginhost.Host to it; the admin API never imports the host.
type PluginSource interface {
	// Plugins reports every configured plugin, sorted by name.
	Plugins() []PluginStatus
}

// PluginStatus is one plugin as the running daemon sees it: an entry of
// the answer of GET /v1/plugins.
type PluginStatus struct {
	Name string `json:"name"`
	// Kind is auth, statestore or filter.
	Kind string `json:"kind"`
	// Builtin names the built-in served, "" for a plugin given by path.
	Builtin string `json:"builtin,omitempty"`
	// Running: a process is up and configured (or, in process, the
	// plugin was built).
	Running bool `json:"running"`
	// InProcess: a built-in running inside the daemon
	// (plugin.builtin.in.process).
	InProcess bool `json:"in_process"`
	// Pid is the plugin's process, 0 when not running or in process.
	Pid int `json:"pid"`
	// Restarts counts launches after the first.
	Restarts int `json:"restarts"`
	// Reason says why the plugin is not running ("" when it is).
	Reason string `json:"reason,omitempty"`
	// Version is the plugin's own version from its Info ("" when it
	// announces none, or before it first ran).
	Version string `json:"version,omitempty"`
	// ProtocolMajor and ProtocolMinor are the protocol version of the
	// plugin's kind it speaks, from its Info (0.0 before it first ran).
	ProtocolMajor int `json:"protocol_major"`
	ProtocolMinor int `json:"protocol_minor"`
}

// PluginList is the answer of GET /v1/plugins.
type PluginList struct {
	Plugins []PluginStatus `json:"plugins"`
}

func (s *Server) handlePlugins(w http.ResponseWriter, _ *http.Request) {
	out := PluginList{Plugins: []PluginStatus{}}
	if s.plugins != nil {
		out.Plugins = append(out.Plugins, s.plugins.Plugins()...)
	}
	writeJSON(w, http.StatusOK, out)
}
