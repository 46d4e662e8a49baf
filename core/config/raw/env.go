package raw

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// EnvPrefix starts every environment variable ApplyEnv reads.
const EnvPrefix = "KMIRROR_"

// EnvIndex maps the normalised names of keys (EnvNorm) to their names, per
// kind of section: "daemon", "destination", "state", "mirror" and
// "plugin". A normalised name not in the index is an unknown variable.
type EnvIndex map[string]map[string]string

// EnvNorm normalises a key or a mirror or plugin name as the environment
// spells it: upper case, dots and dashes turned into underscores. The
// placeholder "<NAME>" of the documentation is kept as is.
func EnvNorm(s string) string {
	if s == "<NAME>" {
		return s
	}
	return strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(s))
}

// serviceLinkRE matches the variables Kubernetes puts into every pod of a
// namespace for each Service (enableServiceLinks, on by default): for a
// Service named kmirror or kmirror-<x>, KMIRROR[_<X>]_SERVICE_HOST,
// KMIRROR[_<X>]_SERVICE_PORT[_<PORT NAME>], KMIRROR[_<X>]_PORT and
// KMIRROR[_<X>]_PORT_<n>_<PROTOCOL>[_PROTO|_PORT|_ADDR].
var serviceLinkRE = regexp.MustCompile(`^KMIRROR(_[A-Z0-9_]+)?_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$`)

// ServiceLink reports whether name is a Kubernetes service-link variable
// (serviceLinkRE), which names no configuration key and is never one: no
// key's variable ends in _SERVICE_HOST, _SERVICE_PORT… or _PORT….
func ServiceLink(name string) bool { return serviceLinkRE.MatchString(name) }

// ApplyEnv sets the keys that KMIRROR_* variables of env name:
// KMIRROR_<KEY> a daemon key, KMIRROR_DESTINATION__<KEY>,
// KMIRROR_STATE__<KEY>, KMIRROR_MIRRORS__<NAME>__<KEY> and
// KMIRROR_PLUGINS__<NAME>__<KEY>. Variables named in skip, and Kubernetes'
// service-link variables (ServiceLink), are left alone.
// A variable that names no key of index, or no mirror or plugin of the
// document, is reported.
func ApplyEnv(d *Document, env, skip []string, index EnvIndex, report Report) {
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || slices.Contains(skip, name) || ServiceLink(name) {
			continue
		}
		rest := strings.TrimPrefix(name, EnvPrefix)
		var (
			kind, norm string
			sec        *Section
		)
		switch {
		case strings.HasPrefix(rest, "DESTINATION__"):
			kind, norm, sec = "destination", strings.TrimPrefix(rest, "DESTINATION__"), &d.Destination
		case strings.HasPrefix(rest, "STATE__"):
			kind, norm, sec = "state", strings.TrimPrefix(rest, "STATE__"), &d.State
		case strings.HasPrefix(rest, "PLUGINS__"):
			body := strings.TrimPrefix(rest, "PLUGINS__")
			i := strings.LastIndex(body, "__")
			if i <= 0 {
				report(name, "unknown environment variable: expected KMIRROR_PLUGINS__<NAME>__<KEY>")
				continue
			}
			kind, norm = "plugin", body[i+2:]
			found := d.findPlugin(body[:i], true)
			if len(found) != 1 {
				if len(found) == 0 {
					report(name, fmt.Sprintf("no plugin matches %s; the plugins are %s (upper-case the name and replace '-' with '_'; the environment can override plugins of the file, not add them)", body[:i], listOrNone(d.pluginNames())))
				} else {
					report(name, fmt.Sprintf("%s matches several plugins; rename one so that their upper-cased names differ", body[:i]))
				}
				continue
			}
			sec = found[0]
		case strings.HasPrefix(rest, "MIRRORS__"):
			// Key names never hold "__", so the key is after the last one;
			// everything before it is the (normalised) mirror name.
			body := strings.TrimPrefix(rest, "MIRRORS__")
			i := strings.LastIndex(body, "__")
			if i <= 0 {
				report(name, "unknown environment variable: expected KMIRROR_MIRRORS__<NAME>__<KEY>")
				continue
			}
			kind, norm = "mirror", body[i+2:]
			var ok bool
			if sec, ok = envMirror(d, name, body[:i], report); !ok {
				continue
			}
		default:
			kind, norm, sec = "daemon", rest, &d.Daemon
		}
		key, ok := index[kind][norm]
		if !ok {
			reason := "unknown environment variable: it names no configuration key (docs/config.md lists each key's variable)"
			if norm == "CONFIG" && kind == "plugin" {
				reason = "a plugin's config block cannot be overridden: only the plugin knows the types of its keys; change it in the file"
			} else if norm == "NAME" && kind == "mirror" {
				reason = "a mirror cannot be renamed through the environment; change name in the file"
			} else if s := Suggest(norm, slices.Sorted(maps.Keys(index[kind]))); s != "" {
				reason += "; did you mean " + strings.TrimSuffix(name, norm) + s + "?"
			}
			report(name, reason)
			continue
		}
		sec.Present = true
		sec.Vals[key] = Value{V: value, From: name}
	}
}

// envMirror finds the mirror whose normalised name is norm.
func envMirror(d *Document, variable, norm string, report Report) (*Section, bool) {
	var found []int
	var names []string
	for i, m := range d.Mirrors {
		name, ok := m.MirrorName()
		if !ok {
			continue
		}
		names = append(names, name)
		if EnvNorm(name) == norm {
			found = append(found, i)
		}
	}
	switch len(found) {
	case 1:
		return &d.Mirrors[found[0]], true
	case 0:
		if len(names) == 0 {
			report(variable, fmt.Sprintf("no mirror matches %s: the configuration has no mirrors (the environment can override mirrors of the file, not add them)", norm))
		} else {
			report(variable, fmt.Sprintf("no mirror matches %s; the mirrors are %s (upper-case the name and replace '-' with '_')", norm, strings.Join(names, ", ")))
		}
	default:
		var both []string
		for _, i := range found {
			n, _ := d.Mirrors[i].MirrorName()
			both = append(both, n)
		}
		report(variable, fmt.Sprintf("%s matches several mirrors (%s); rename one so that their upper-cased names differ", norm, strings.Join(both, ", ")))
	}
	return nil, false
}

func listOrNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
