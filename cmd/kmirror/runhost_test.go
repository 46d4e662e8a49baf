package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A plugin the host cannot start (here an executable with the right
// checksum that is no plugin) stops `run` before anything else starts, and
// the error names the plugin.
func TestRunRefusesAPluginItCannotStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := []byte("#!/bin/sh\necho not a plugin >&2\nexit 1\n")
	if err := os.WriteFile(filepath.Join(dir, "not-a-plugin"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(script)
	base := strings.Replace(validBase, "/var/lib/kmirror", t.TempDir(), 1)
	p := writeFile(t, "plugins.yaml", base+fmt.Sprintf("plugin.dir: %s\nplugins:\n  sso:\n    kind: auth\n    path: not-a-plugin\n    sha256: %s\n", dir, hex.EncodeToString(sum[:])))
	code, _, errOut := kmirror(t, nil, "run", "--config", p)
	if code != exitFailure || !strings.Contains(errOut, "cannot start the plugins") || !strings.Contains(errOut, "plugin.auth.sso") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}
