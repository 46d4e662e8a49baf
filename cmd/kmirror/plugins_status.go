package main

import (
	"github.com/kmirror/kmirror/core/admin"
	"github.com/kmirror/kmirror/core/pluginhost"
	"github.com/kmirror/kmirror/sdk/plugin"
	"github.com/kmirror/kmirror/sdk/statestore"
)

// hostPlugins serves the admin API's GET /v1/plugins from the plugin
// host; a nil host (no plugins configured) has none.
type hostPlugins struct{ h *pluginhost.Host }

var _ admin.PluginSource = hostPlugins{}

// Plugins implements admin.PluginSource: each plugin's Host.Status, with
// the version and protocol of its Info (the last one seen while it is
// down).
func (p hostPlugins) Plugins() []admin.PluginStatus {
	if p.h == nil {
		return nil
	}
	var out []admin.PluginStatus
	for _, name := range p.h.Names() {
		st, ok := p.h.Status(name)
		if !ok {
			continue
		}
		ps := admin.PluginStatus{Name: st.Name, Kind: string(st.Kind), Builtin: st.Builtin, Running: st.Running,
			InProcess: st.InProcess, Pid: st.Pid, Restarts: st.Restarts, Reason: st.Reason}
		ps.Version, ps.ProtocolMajor, ps.ProtocolMinor = p.info(name, st.Kind)
		out = append(out, ps)
	}
	return out
}

// info reads the Info of the plugin's handle.
func (p hostPlugins) info(name string, kind plugin.Kind) (version string, major, minor int) {
	switch kind {
	case plugin.KindAuth:
		if a, err := p.h.Auth(name); err == nil {
			i := a.Info()
			return i.Version, i.ProtocolMajor, i.ProtocolMinor
		}
	case plugin.KindFilter:
		if f, err := p.h.Filter(name); err == nil {
			i := f.Info()
			return i.Version, i.ProtocolMajor, i.ProtocolMinor
		}
	case plugin.KindStateStore:
		if s, err := p.h.StateStore(name); err == nil {
			i := statestore.InfoOf(s)
			return i.Version, i.ProtocolMajor, i.ProtocolMinor
		}
	}
	return "", 0, 0
}
