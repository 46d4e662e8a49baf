package raw

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// parseYAML must read what yaml.Unmarshal reads: the sample configuration
// and a document with every kind of scalar, anchors and merge keys.
func TestParseYAMLMatchesYAMLUnmarshal(t *testing.T) {
	t.Parallel()
	sample, err := os.ReadFile("../../../docs/kmirror.sample.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{
		"sample": string(sample),
		"scalars": `
s: text
q: "0123"
i: 0123
h: 0x1f
f: 1.5
b: true
n: ~
big: 18446744073709551615
list: [a, 1, false, {k: v}]
nested: {a: {b: c}}
`,
		"anchors": `
base: &base {bootstrap.servers: "a:1", client.id: x}
mirrors:
  - <<: *base
    name: m1
    client.id: y
  - <<: [*base, {extra: z}]
    name: m2
list: &l [1, 2]
again: *l
`,
	}
	for name, doc := range docs {
		var want map[string]any
		if err := yaml.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("%s: yaml.Unmarshal: %v", name, err)
		}
		got, err := parseYAML([]byte(doc))
		if err != nil {
			t.Fatalf("%s: parseYAML: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parseYAML =\n%#v\nyaml.Unmarshal =\n%#v", name, got, want)
		}
	}
}

func TestParseYAMLRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ doc, want string }{
		{"a: 1\nb: 2\na: 3\n", `line 3: mapping key "a" already defined at line 1`},
		{"- a\n- b\n", "the top level must be a map of keys, not a list"},
		{"? [a]\n: 1\n", "a key must be a name, not a list"},
		{"a: &x [*x]\n", "refers to itself"},
		{"a: {<<: 5}\n", "a merge key (<<) takes a map or a list of maps"},
		{billionLaughs, "aliases expand to more values than it has bytes"},
	} {
		_, err := parseYAML([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseYAML(%q) = %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// billionLaughs expands to 10^9 values from a few hundred bytes.
const billionLaughs = `
a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]
`
