package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// update rewrites the golden files instead of comparing with them:
// go test ./cmd/kmirror -run Golden -update
var update = flag.Bool("update", false, "rewrite testdata/**/*.golden from the current output")

// run runs a command line in process (no stdin) and returns its exit code
// and outputs.
func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = dispatch(args, strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

// golden compares got with testdata/<name>.golden (or writes it with
// -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/kmirror -run Golden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (run with -update if the change is meant):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// visible walks the command tree: every command help lists, with its path.
func visible(c *cobra.Command, fn func(c *cobra.Command)) {
	if c.Hidden {
		return
	}
	fn(c)
	for _, s := range c.Commands() {
		visible(s, fn)
	}
}

// TestGoldenHelpOfEveryCommand: `kmirror <command> --help` of every
// command exits 0, has an example, and prints what testdata/help holds.
func TestGoldenHelpOfEveryCommand(t *testing.T) {
	t.Parallel()
	var paths [][]string
	visible(newRoot(io.Discard), func(c *cobra.Command) {
		paths = append(paths, strings.Fields(c.CommandPath())[1:])
	})
	if len(paths) < 25 {
		t.Fatalf("only %d commands in the tree: %v", len(paths), paths)
	}
	for _, p := range paths {
		name := strings.Join(append([]string{"kmirror"}, p...), "-")
		code, out, errOut := run(append(p, "--help")...)
		if code != 0 || errOut != "" {
			t.Errorf("%s --help: exit %d, stderr %q", name, code, errOut)
		}
		if !strings.Contains(out, "Examples:\n  ") && name != "kmirror-help" {
			t.Errorf("%s --help has no example:\n%s", name, out)
		}
		golden(t, "help/"+name, out)
	}
	if code, out, _ := run("config", "-h"); code != 0 || !strings.Contains(out, "kmirror config init") {
		t.Errorf("config -h: exit %d\n%s", code, out)
	}
	// `kmirror help mirrors` is `kmirror mirrors --help`; `-h` too.
	_, viaHelp, _ := run("help", "mirrors")
	_, viaFlag, _ := run("mirrors", "-h")
	if _, want, _ := run("mirrors", "--help"); viaHelp != want || viaFlag != want {
		t.Errorf("help mirrors / mirrors -h differ from mirrors --help")
	}
}

// TestHelpListsEveryCommand: the top-level help names every visible
// command and sub-command, mirrors create and delete included, and
// not the hidden ones.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	_, out, _ := run("help")
	visible(newRoot(io.Discard), func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())
		if len(path) == 1 || path[1] == "completion" && len(path) > 2 {
			return
		}
		want := "\n  " + c.Name() + " "
		if len(path) == 3 {
			want = "kmirror " + path[1] + " " + c.Name()
		}
		if !strings.Contains(out, want) {
			t.Errorf("kmirror help does not list %q:\n%s", c.CommandPath(), out)
		}
	})
	for _, hidden := range []string{"\n  plugin ", "\n  docs "} {
		if strings.Contains(out, hidden) {
			t.Errorf("kmirror help lists the hidden %q", strings.TrimSpace(hidden))
		}
	}
}

// errorCases are command lines that fail before they reach a daemon or a
// cluster; their output is the same everywhere.
var errorCases = []struct {
	name string
	args []string
}{
	{"no-command", nil},
	{"unknown-command", []string{"describ"}},
	{"unknown-sub-command", []string{"mirrors", "describ", "--config", "kmirror.yaml"}},
	{"missing-sub-command", []string{"config"}},
	{"duration-without-unit", []string{"failover", "m1", "--wait-for-catch-up", "2"}},
	{"negative-duration", []string{"failover", "m1", "--wait-for-catch-up", "-1s", "--admin-address", "127.0.0.1:1"}},
	{"failover-needs-yes", []string{"failover", "m1", "--admin-address", "127.0.0.1:1"}},
	{"recreate-needs-yes", []string{"failback", "m1", "--allow-recreate", "--admin-address", "127.0.0.1:1"}},
	{"kafka-bootstrap-server", []string{"mirrors", "list", "--bootstrap-server", "kafka:9092"}},
	{"kafka-topic", []string{"mirrors", "pause", "m1", "--topic", "orders"}},
	{"kafka-group", []string{"describe", "--group", "billing"}},
	{"mistyped-flag", []string{"mirrors", "list", "--admin-adress", "127.0.0.1:9645"}},
	{"bad-output-format", []string{"mirrors", "list", "-o", "xml"}},
	{"no-admin-address", []string{"mirrors", "list"}},
	{"no-mirror", []string{"mirrors", "pause", "--admin-address", "127.0.0.1:1"}},
	{"two-mirrors", []string{"mirrors", "pause", "m1", "m2"}},
	{"mirror-twice", []string{"failback", "m1", "--mirror", "m2"}},
	{"stop-without-topics", []string{"mirrors", "stop", "m1", "--admin-address", "127.0.0.1:1"}},
	{"empty-regex", []string{"mirrors", "pause", "m1", "--topics", "a,,b"}},
	{"tls-cert-without-key", []string{"mirrors", "list", "--admin-address", "127.0.0.1:1", "--tls-cert", "c.pem"}},
	{"flag-needs-value", []string{"config", "validate", "--config"}},
	{"config-required", []string{"config", "validate"}},
	{"config-missing-file", []string{"config", "validate", "--config", "testdata/does-not-exist.yaml"}},
	{"config-invalid", []string{"config", "validate", "--config", "testdata/invalid.yaml"}},
	{"init-not-a-terminal", []string{"config", "init", "--source-bootstrap", "a:9092"}},
	{"init-bad-name", []string{"config", "init", "--source-bootstrap", "a:9092", "--destination-bootstrap", "b:9092", "--name", "no spaces", "-"}},
	{"extra-argument", []string{"version", "now"}},
	{"plugins-list-no-config", []string{"plugins", "list"}},
	{"plugins-install-no-kind", []string{"plugins", "install", "./kmirror-filter-x", "--plugin-dir", "testdata"}},
	{"state-migrate-bad-from", []string{"state", "migrate", "--config", "testdata/invalid.yaml", "--from", "/var/lib/kmirror"}},
}

// TestGoldenErrors: each error's exit code and output, as text, as JSON
// and as YAML (-o json|yaml puts the error in the same format on stderr).
func TestGoldenErrors(t *testing.T) {
	// Not parallel: the cases must not see KMIRROR_CONFIG.
	t.Setenv("KMIRROR_CONFIG", "")
	t.Setenv("KMIRROR_ADMIN_ADDRESS", "")
	for _, tc := range errorCases {
		for _, format := range []string{"text", "json", "yaml"} {
			args := tc.args
			if format != "text" {
				args = append(append([]string{}, args...), "-o", format)
				if len(tc.args) < 2 || tc.args[0] == "config" && tc.args[1] != "validate" || tc.args[0] == "version" && format == "yaml" {
					continue // commands without -o (and one of each is enough)
				}
			}
			code, out, errOut := run(args...)
			if code == 0 {
				t.Errorf("kmirror %s: exit 0", strings.Join(args, " "))
			}
			if format != "text" && !strings.Contains(errOut, "exit_code") {
				t.Errorf("kmirror %s: the error is not in %s:\n%s", strings.Join(args, " "), format, errOut)
			}
			golden(t, "errors/"+tc.name+"."+format, fmt.Sprintf("$ kmirror %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, out, errOut))
		}
	}
}

// TestSingleDashFlagsStillWork: the Go flag forms of earlier versions
// (-config FILE, -json, -config=FILE) are taken as double-dash flags.
func TestSingleDashFlagsStillWork(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "ok.yaml", strings.Replace(validBase, "/var/lib/kmirror", t.TempDir(), 1))
	for _, args := range [][]string{
		{"config", "validate", "-config", p},
		{"config", "validate", "-config=" + p},
		{"config", "validate", "--config", p, "-json"},
	} {
		if code, out, errOut := run(args...); code != 0 || !strings.Contains(out, "valid") {
			t.Errorf("kmirror %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if _, out, _ := run("version", "-json"); !strings.Contains(out, `"franz_go_version"`) {
		t.Errorf("version -json: %s", out)
	}
	// -o json in one argument is the short flag with its value, not a
	// long flag.
	if _, out, _ := run("version", "-ojson"); !strings.Contains(out, `"franz_go_version"`) {
		t.Errorf("version -ojson: %s", out)
	}
}

// TestVersionFlagAndCompletion: --version, and a completion script per
// shell.
func TestVersionFlagAndCompletion(t *testing.T) {
	t.Parallel()
	_, want, _ := run("version")
	if code, out, _ := run("--version"); code != 0 || out != want {
		t.Errorf("--version: exit %d, %q; want the output of version %q", code, out, want)
	}
	for shell, marker := range map[string]string{"bash": "complete -o default", "zsh": "#compdef kmirror", "fish": "complete -c kmirror"} {
		code, out, errOut := run("completion", shell)
		if code != 0 || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d, stderr %q, no %q in the script", shell, code, errOut, marker)
		}
	}
	// Completion knows the sub-commands and the flags.
	_, out, _ := run("__complete", "mirrors", "de")
	if !strings.Contains(out, "delete") || !strings.Contains(out, "describe") {
		t.Errorf("completing `mirrors de`: %q", out)
	}
	_, out, _ = run("__complete", "failover", "m1", "--wait")
	if !strings.Contains(out, "--wait-for-catch-up") {
		t.Errorf("completing `failover m1 --wait`: %q", out)
	}
}

// TestManPagesFromTheCommandTree: `kmirror docs man DIR` writes a page per
// visible command, each with its flags and examples.
func TestManPagesFromTheCommandTree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if code, _, errOut := run("docs", "man", dir); code != 0 {
		t.Fatalf("docs man: exit %d\n%s", code, errOut)
	}
	visible(newRoot(io.Discard), func(c *cobra.Command) {
		if c.Name() == "help" {
			return // cobra's help command has no page
		}
		page := filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
		b, err := os.ReadFile(page)
		if err != nil {
			t.Errorf("no man page for %q: %v", c.CommandPath(), err)
			return
		}
		if c.Runnable() && c.HasAvailableFlags() && !strings.Contains(string(b), "OPTIONS") {
			t.Errorf("%s has no OPTIONS section", page)
		}
	})
	b, err := os.ReadFile(filepath.Join(dir, "kmirror-failover.1"))
	if err != nil || !strings.Contains(string(b), `\fB--wait-for-catch-up\fP`) || !strings.Contains(string(b), "EXAMPLE") {
		t.Errorf("kmirror-failover.1 lacks --wait-for-catch-up or its examples (%v)", err)
	}
}
