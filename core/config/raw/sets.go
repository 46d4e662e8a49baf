package raw

import (
	"fmt"
	"strings"

	"github.com/kmirror/kmirror/core/config/value"
)

// ApplySets sets the keys of --set flags, "key=value" each: a daemon key,
// destination.<key>, state.<key>, mirrors.<name>.<key> or
// plugins.<name>.<key>. A flag can override a mirror or plugin of the
// document, not add one, rename a mirror or set a plugin's config block;
// each such flag is reported, by its position, never by its text.
func ApplySets(d *Document, sets []string, report Report) {
	for i, s := range sets {
		key, val, ok := strings.Cut(s, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			// The text may be a secret typed without its key: do not echo it.
			report("--set", fmt.Sprintf("flag %d: expected key=value", i+1))
			continue
		}
		rv := Value{V: val, From: "--set"}
		switch {
		case strings.HasPrefix(key, Destination+"."):
			d.Destination.Present = true
			d.Destination.Vals[strings.TrimPrefix(key, Destination+".")] = rv
		case strings.HasPrefix(key, State+"."):
			d.State.Present = true
			d.State.Vals[strings.TrimPrefix(key, State+".")] = rv
		case strings.HasPrefix(key, Plugins+"."):
			name, k, ok := strings.Cut(strings.TrimPrefix(key, Plugins+"."), ".")
			if !ok || name == "" || k == "" {
				report("--set", fmt.Sprintf("flag %d: %s: expected plugins.<name>.<key>=value", i+1, value.Quote(key)))
				continue
			}
			if k == "config" || strings.HasPrefix(k, "config.") {
				report("--set", fmt.Sprintf("flag %d: %s: a plugin's config block cannot be overridden (only the plugin knows the types of its keys); change it in the file", i+1, value.Quote(key)))
				continue
			}
			found := d.findPlugin(name, false)
			if len(found) == 0 {
				report("--set", fmt.Sprintf("flag %d: %s: no plugin named %s in the configuration (--set can override plugins, not add them)", i+1, value.Quote(key), value.Quote(name)))
				continue
			}
			found[0].Vals[k] = rv
		case strings.HasPrefix(key, Mirrors+"."):
			name, k, ok := strings.Cut(strings.TrimPrefix(key, Mirrors+"."), ".")
			if !ok || name == "" || k == "" {
				report("--set", fmt.Sprintf("flag %d: %s: expected mirrors.<name>.<key>=value", i+1, value.Quote(key)))
				continue
			}
			if k == "name" {
				report("--set", fmt.Sprintf("flag %d: %s: a mirror cannot be renamed with --set; change name in the file", i+1, value.Quote(key)))
				continue
			}
			sec := setMirror(d, name)
			if sec == nil {
				report("--set", fmt.Sprintf("flag %d: %s: no mirror named %s in the configuration (--set can override mirrors, not add them)", i+1, value.Quote(key), value.Quote(name)))
				continue
			}
			sec.Vals[k] = rv
		default:
			d.Daemon.Vals[key] = rv
		}
	}
}

func setMirror(d *Document, name string) *Section {
	for i := range d.Mirrors {
		if n, ok := d.Mirrors[i].MirrorName(); ok && n == name {
			return &d.Mirrors[i]
		}
	}
	return nil
}
