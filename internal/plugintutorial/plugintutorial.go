// Package plugintutorial gives tests the plugin of kmirror's plugin
// tutorial (docs/writing-plugins.md): the module examples/plugins/group-filter,
// built as the tutorial's readers build it, outside the workspace, against
// the sdk version the daemon requires (scripts/tutorial.sh).
//
// Its tests run the built plugin through core/pluginhost and check that the
// tutorial shows the example's code as it is. An e2e test that needs the
// plugin calls Plugin, and appends Config to the daemon's configuration
// (the plugin is named Name there).
package plugintutorial

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Env names the environment variable holding the path of an already built
// tutorial plugin; `make tutorial-check` sets it, so the plugin it tested
// is the one that runs.
const Env = "KMIRROR_TUTORIAL_PLUGIN"

// Name is the tutorial's name for its plugin in kmirror's configuration.
const Name = "teams"

// Root returns the repository's top directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ExampleDir returns the directory of the tutorial's module.
func ExampleDir() string { return filepath.Join(Root(), "examples", "plugins", "group-filter") }

// Plugin returns the path of the tutorial's plugin binary and its SHA-256
// in hex: $KMIRROR_TUTORIAL_PLUGIN when set, else a build made once per
// test process with `scripts/tutorial.sh build` into a temporary directory
// that Cleanup removes (the build needs git, and the usual module proxy or
// a module cache holding the sdk's dependencies).
func Plugin(tb testing.TB) (path, sum string) {
	tb.Helper()
	path = os.Getenv(Env)
	if path == "" {
		built.once.Do(build)
		if built.err != nil {
			tb.Fatal(built.err)
		}
		path = built.path
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("the tutorial's plugin: %v", err)
	}
	s := sha256.Sum256(b)
	return path, hex.EncodeToString(s[:])
}

// Config returns the tutorial's configuration for the plugin binary bin
// with checksum sum: the example's kmirror.yaml (as docs/writing-plugins.md
// shows it) with plugin.dir, path and sha256 filled in. Its top-level keys
// are plugin.dir and plugins; append it to a daemon's configuration file.
func Config(tb testing.TB, bin, sum string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(ExampleDir(), "kmirror.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	subst := [][2]string{
		{"plugin.dir: /var/lib/kmirror/plugins", "plugin.dir: " + filepath.Dir(bin)},
		{"path: kmirror-group-filter", "path: " + filepath.Base(bin)},
		{"<the sum sha256sum printed>", sum},
	}
	cfg := string(b)
	for _, s := range subst {
		if !strings.Contains(cfg, s[0]) {
			tb.Fatalf("examples/plugins/group-filter/kmirror.yaml no longer holds %q; update plugintutorial.Config", s[0])
		}
		cfg = strings.Replace(cfg, s[0], s[1], 1)
	}
	return cfg
}

// built is the plugin Plugin built, once per process.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func build() {
	dir, err := os.MkdirTemp("", "kmirror-tutorial-plugin")
	if err != nil {
		built.err = err
		return
	}
	built.dir = dir
	cmd := exec.Command(filepath.Join(Root(), "scripts", "tutorial.sh"), "build", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		built.err = fmt.Errorf("scripts/tutorial.sh build: %v\n%s", err, stderr.String())
		return
	}
	built.path = strings.TrimSpace(string(out))
}

// Cleanup removes what Plugin built; a TestMain calls it after m.Run.
func Cleanup() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}
