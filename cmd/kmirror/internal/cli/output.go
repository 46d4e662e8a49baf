package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Output formats of -o.
const (
	FormatText = "text"
	FormatJSON = "json"
	FormatYAML = "yaml"
)

// format is the value of -o: one of the formats, anything else refused
// with the list.
type format string

func (f *format) String() string { return string(*f) }
func (f *format) Type() string   { return "text|json|yaml" }
func (f *format) Set(v string) error {
	switch v {
	case FormatText, FormatJSON, FormatYAML:
		*f = format(v)
		return nil
	}
	return fmt.Errorf("want text, json or yaml")
}

// Output is -o text|json|yaml, with --json kept as an alias of -o json (the
// flag of earlier versions, hidden from help).
type Output struct {
	f    format
	json bool
}

// Register adds -o/--output and the hidden --json to fs.
func (o *Output) Register(fs *pflag.FlagSet) {
	o.f = FormatText
	fs.VarP(&o.f, "output", "o", "output format: text, json or yaml (stable field names, see docs/cli.md); errors come in the same format")
	fs.BoolVar(&o.json, "json", false, "same as -o json")
	_ = fs.MarkHidden("json")
}

// Format is the chosen format.
func (o *Output) Format() string {
	if o.json && o.f == FormatText {
		return FormatJSON
	}
	return string(o.f)
}

// Structured reports whether the format is json or yaml.
func (o *Output) Structured() bool { return o.Format() != FormatText }

// Print writes v in the chosen format; text, called for the text format,
// writes the human form.
func (o *Output) Print(w io.Writer, v any, text func(io.Writer)) {
	switch o.Format() {
	case FormatJSON:
		PrintJSON(w, v)
	case FormatYAML:
		PrintYAML(w, v)
	default:
		text(w)
	}
}

// PrintJSON writes v as indented JSON, the form of every -o json output.
func PrintJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// PrintYAML writes v as YAML with the field names and the order of its
// JSON form, so that -o yaml and -o json say the same.
func PrintYAML(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(w, "error: %q\n", err.Error())
		return
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil { // JSON is YAML; the node keeps the key order
		fmt.Fprintf(w, "error: %q\n", err.Error())
		return
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	_ = enc.Encode(&n)
	_ = enc.Close()
	_, _ = w.Write(buf.Bytes())
}

// blockStyle turns the flow style the JSON input had into block style.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle
	if n.Kind == yaml.ScalarNode && n.Style&yaml.DoubleQuotedStyle != 0 && n.Tag == "!!str" {
		n.Style &^= yaml.DoubleQuotedStyle // quoted only where YAML needs it
		if strings.Contains(n.Value, "\n") {
			n.Style |= yaml.LiteralStyle
		}
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// errorDoc is an error in the structured formats:
// {"error": "...", "exit_code": N}.
type errorDoc struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
	// Code and Hint: an error of the admin API, its code and what to do.
	Code string `json:"code,omitempty"`
	Hint string `json:"hint,omitempty"`
}

// printError writes msg (and the admin API's code and hint, when there
// are) in format to w.
func printError(w io.Writer, formatName, command, msg string, code int, apiCode, hint string) {
	doc := errorDoc{Error: msg, ExitCode: code, Code: apiCode, Hint: hint}
	switch formatName {
	case FormatJSON:
		PrintJSON(w, doc)
	case FormatYAML:
		PrintYAML(w, doc)
	default:
		fmt.Fprintf(w, "%s: %s\n", command, msg)
		if hint != "" {
			fmt.Fprintf(w, "Hint: %s\n", hint)
		}
	}
}

// formatOfArgs finds -o/--output/--json in a command line, for errors
// raised before (or while) the flags are parsed.
func formatOfArgs(args []string) string {
	f := FormatText
	for i, a := range args {
		if a == "--" {
			break
		}
		switch {
		case a == "--json" || a == "--json=true":
			f = FormatJSON
		case (a == "-o" || a == "--output") && i+1 < len(args):
			f = args[i+1]
		case strings.HasPrefix(a, "--output="):
			f = strings.TrimPrefix(a, "--output=")
		case strings.HasPrefix(a, "-o="):
			f = strings.TrimPrefix(a, "-o=")
		case strings.HasPrefix(a, "-o") && len(a) > 2 && a[2] != '-':
			f = a[2:]
		}
	}
	switch f {
	case FormatJSON, FormatYAML:
		return f
	}
	return FormatText
}
