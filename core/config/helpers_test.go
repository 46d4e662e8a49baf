package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/internal/testpki"
)

// writeFile writes content to dir/name (mode 0600) and returns the path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	return testpki.WriteFile(t, dir, name, content)
}

// minimal is the smallest valid configuration.
const minimal = `
destination:
  bootstrap.servers: dst:9092
state:
  dir: /tmp/kmirror-state-test
`

func mustParse(t *testing.T, yaml string, env, sets []string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(yaml), "yaml", env, sets)
	if err != nil {
		t.Fatalf("Parse failed:\n%v\n--- input ---\n%s", err, yaml)
	}
	return cfg
}

// parseErrs parses and returns the *Errors, failing the test if there is none.
func parseErrs(t *testing.T, yaml string, env, sets []string) *Errors {
	t.Helper()
	_, err := Parse([]byte(yaml), "yaml", env, sets)
	if err == nil {
		t.Fatalf("Parse succeeded, want errors; input:\n%s", yaml)
	}
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T is not *Errors: %v", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) is false")
	}
	return errs
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
