package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestReadingCommandsInEveryFormat: the reading commands that need no
// running daemon print the same document as text, JSON and YAML (golden
// files), and JSON and YAML decode to the same fields: config validate of
// a valid and of an invalid configuration, config sample --minimal's
// validation, and version (its fields only: the commit changes).
func TestReadingCommandsInEveryFormat(t *testing.T) {
	t.Parallel()
	_, minimal, _ := kmirror(t, nil, "config", "sample", "--minimal")
	for _, c := range []struct {
		name, config string
		code         int
	}{
		{"config-validate-valid", minimal, exitOK},
		{"config-validate-invalid", minimal + "mirror.metadata.refresh.interval.ms: soon\n", exitFailure},
	} {
		docs := map[string]map[string]any{}
		for _, format := range []string{"text", "json", "yaml"} {
			cmd := exec.Command(binary, "config", "validate", "--config", "-", "-o", format)
			cmd.Stdin = strings.NewReader(c.config)
			var out, errOut strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != c.code {
				t.Fatalf("%s -o %s: exit %d, want %d\n%s%s", c.name, format, code, c.code, out.String(), errOut.String())
			}
			golden(t, "formats/"+c.name+"."+format, out.String()+errOut.String())
			text := out.String()
			if c.code != exitOK {
				text = errOut.String() // errors come in the format asked for, on stderr
			}
			var doc map[string]any
			switch format {
			case "json":
				if err := json.Unmarshal([]byte(text), &doc); err != nil {
					t.Fatalf("%s -o json: %v\n%s", c.name, err, text)
				}
			case "yaml":
				if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
					t.Fatalf("%s -o yaml: %v\n%s", c.name, err, text)
				}
			}
			if doc != nil {
				docs[format] = doc
			}
		}
		j, y := docs["json"], docs["yaml"]
		if len(j) == 0 || len(j) != len(y) {
			t.Errorf("%s: JSON has %d fields, YAML %d", c.name, len(j), len(y))
		}
		for k := range j {
			if _, ok := y[k]; !ok {
				t.Errorf("%s: field %q in JSON, not in YAML", c.name, k)
			}
		}
	}
	for _, format := range []string{"json", "yaml"} {
		code, out, errOut := kmirror(t, nil, "version", "-o", format)
		var doc map[string]any
		var err error
		if format == "json" {
			err = json.Unmarshal([]byte(out), &doc)
		} else {
			err = yaml.Unmarshal([]byte(out), &doc)
		}
		if code != exitOK || err != nil || len(doc) < 3 {
			t.Errorf("version -o %s: exit %d, %v, %v\n%s", format, code, err, doc, errOut)
		}
	}
}
