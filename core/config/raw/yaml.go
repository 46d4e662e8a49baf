package raw

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// parseYAML parses a YAML document into maps, lists and scalars, as
// yaml.Unmarshal into a map[string]any would, in time linear in the size
// of the input. yaml.v3's own decoding checks a mapping for duplicate keys
// by comparing every pair of keys, which made a file with tens of
// thousands of keys take minutes; here the document is parsed into nodes
// (which is linear) and converted with a set of the keys seen.
//
// Anchors and aliases, and merge keys (<<: *base), mean what they mean
// to yaml.v3. An alias that contains itself is an error, and so is a
// document whose aliases expand to more values than the file has bytes
// (a "billion laughs" document); no real configuration comes close.
func parseYAML(data []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil
	}
	c := &yamlConv{budget: len(data) + 1024, active: map[*yaml.Node]bool{}}
	root := doc.Content[0]
	v, err := c.value(root)
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case map[string]any:
		return m, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("line %d: the top level must be a map of keys, not a %s", root.Line, kindName(root))
}

type yamlConv struct {
	budget int                 // values left before the document counts as an alias bomb
	active map[*yaml.Node]bool // aliases being expanded, to refuse a cycle
}

func (c *yamlConv) value(n *yaml.Node) (any, error) {
	if c.budget--; c.budget < 0 {
		return nil, fmt.Errorf("line %d: the document's aliases expand to more values than it has bytes; expand them by hand", n.Line)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0])
	case yaml.AliasNode:
		if c.active[n] {
			return nil, fmt.Errorf("line %d: alias *%s refers to itself", n.Line, n.Value)
		}
		c.active[n] = true
		defer delete(c.active, n)
		return c.value(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, it := range n.Content {
			v, err := c.value(it)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n)
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// mapping converts a mapping node. Keys written in the mapping win over
// keys merged in with <<, whatever their order, as in yaml.v3; a key
// written twice is an error naming both lines.
func (c *yamlConv) mapping(n *yaml.Node) (map[string]any, error) {
	out := make(map[string]any, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		key, err := c.key(k)
		if err != nil {
			return nil, err
		}
		if line, dup := lines[key]; dup {
			return nil, fmt.Errorf("line %d: mapping key %q already defined at line %d", k.Line, key, line)
		}
		lines[key] = k.Line
		val, err := c.value(v)
		if err != nil {
			return nil, err
		}
		out[key] = val
	}
	for _, m := range merges {
		if err := c.merge(out, lines, m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// merge adds the keys of a merged mapping (or of each of a list of them)
// that out does not have yet: the first merged mapping wins over later
// ones, as in YAML's merge key type.
func (c *yamlConv) merge(out map[string]any, lines map[string]int, m *yaml.Node) error {
	target := m
	if target.Kind == yaml.AliasNode {
		target = target.Alias
	}
	switch target.Kind {
	case yaml.MappingNode:
		v, err := c.value(m)
		if err != nil {
			return err
		}
		for k, x := range v.(map[string]any) {
			if _, ok := lines[k]; !ok {
				lines[k] = m.Line
				out[k] = x
			}
		}
		return nil
	case yaml.SequenceNode:
		if m.Kind == yaml.SequenceNode {
			for _, it := range m.Content {
				if err := c.merge(out, lines, it); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return fmt.Errorf("line %d: a merge key (<<) takes a map or a list of maps", m.Line)
}

func (c *yamlConv) key(k *yaml.Node) (string, error) {
	if k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: a key must be a name, not a %s", k.Line, kindName(k))
	}
	return k.Value, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "map"
	case yaml.AliasNode:
		return "alias"
	}
	return "value"
}
