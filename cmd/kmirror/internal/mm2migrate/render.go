package mm2migrate

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// render writes the result as YAML, with comments saying where each part
// comes from. yaml.v3 quotes each value as YAML needs.
func (t *translator) render(flows []flow, dest *mapping, mirrors []*mapping) []byte {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	from := t.opt.From
	if from == "" {
		from = "a MirrorMaker 2 properties file"
	}
	names := make([]string, len(flows))
	for i, f := range flows {
		names[i] = f.String()
	}
	head := fmt.Sprintf("kmirror configuration translated from %s by `kmirror config migrate` (flows %s).\n"+
		"Review it, do what the command listed under \"To do\", then run `kmirror config validate --config <this file>`.\n"+
		"The cut-over from MirrorMaker 2 is in docs/migrating-from-mirrormaker2.md.", from, strings.Join(names, ", "))
	first := true
	for _, d := range t.daemon {
		k := put(doc, d.key, d.value, d.comment)
		if first {
			k.HeadComment = head + "\n\nTuning translated from MirrorMaker 2."
			first = false
		}
	}
	state := &yaml.Node{Kind: yaml.MappingNode}
	put(state, "dir", t.opt.StateDir, "")
	k := section(doc, "state", state, "Where kmirror keeps each partition's state (a local directory; state.type plugin for others).")
	if first {
		k.HeadComment = head + "\n\n" + k.HeadComment
	}
	section(doc, "destination", toNode(dest), "The destination: "+dest.comment+".")
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, m := range mirrors {
		n := toNode(m)
		n.HeadComment = m.comment
		list.Content = append(list.Content, n)
	}
	section(doc, "mirrors", list, "One mirror per MirrorMaker 2 flow into the destination.")
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		panic("mm2migrate: encoding the configuration: " + err.Error()) // only strings and lists of them
	}
	return b.Bytes()
}

func toNode(m *mapping) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, e := range m.entries {
		put(n, e.key, e.value, e.comment)
	}
	return n
}

func section(doc *yaml.Node, key string, v *yaml.Node, comment string) *yaml.Node {
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key, HeadComment: comment}
	doc.Content = append(doc.Content, k, v)
	return k
}

// put adds key: value to a mapping node and returns the key's node.
func put(m *yaml.Node, key string, value any, comment string) *yaml.Node {
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	var v *yaml.Node
	switch x := value.(type) {
	case []string:
		v = &yaml.Node{Kind: yaml.SequenceNode}
		for _, s := range x {
			v.Content = append(v.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s})
		}
	case string:
		v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: x}
		if isInt(x) && isIntKey(key) {
			v.Tag = "!!int"
		}
	default:
		v = &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: fmt.Sprint(x)}
	}
	if comment != "" {
		v.LineComment = comment
		if v.Kind == yaml.SequenceNode {
			k.LineComment, v.LineComment = comment, ""
		}
	}
	m.Content = append(m.Content, k, v)
	return k
}

func isInt(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c < '0' || c > '9' {
			if !(i == 0 && c == '-' && len(s) > 1) {
				return false
			}
		}
	}
	return true
}

// isIntKey reports whether a key takes a number (daemon tuning keys); a
// string key such as client.id keeps a numeric value quoted.
func isIntKey(key string) bool {
	return strings.HasSuffix(key, ".ms") || strings.HasSuffix(key, ".bytes")
}
