package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/kmirror/kmirror/core/internal/testpki"
)

// pki is testpki's throw-away CA under the names these tests use.
type pki struct {
	caPEM                  []byte
	serverCert, serverKey  []byte
	clientCert, clientKey  []byte
	caFile, clientPairFile string // files in a temp dir
	dir                    string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := testpki.New(t)
	return &pki{
		caPEM: p.CAPEM, serverCert: p.ServerCert, serverKey: p.ServerKey, clientCert: p.ClientCert, clientKey: p.ClientKey,
		caFile: p.CAFile, clientPairFile: p.ClientPairFile, dir: p.Dir,
	}
}

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
