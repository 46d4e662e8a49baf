// Package pyfilter gives tests the Python filter plugin of
// plugins/filters/python-groups, ready to launch: Launcher builds (or
// reuses) its virtualenv through scripts/pyfilter.sh and returns the path
// of its executable, with the SHA-256 a plugins: entry needs. The e2e tests
// and the host-level tests in this package use it.
package pyfilter

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Plugin is the Python filter plugin, ready to launch.
type Plugin struct {
	// Path is the launcher script kmirror runs (a plugin's path key).
	Path string
	// SHA256 is the launcher's checksum in hex (a plugin's sha256 key).
	SHA256 string
}

var (
	once   sync.Once
	plugin Plugin
	errOut error
)

// Launcher makes sure the plugin's virtualenv exists with the pinned
// dependencies (scripts/pyfilter.sh venv: the first call may take a minute
// when it has to install them) and returns the launcher and its checksum.
// It fails, saying how to install what is missing, when python3 or its
// venv module is absent: the caller must not skip on that error. Safe for
// concurrent use; the work is done once per process.
func Launcher() (Plugin, error) {
	once.Do(func() { plugin, errOut = build() })
	return plugin, errOut
}

// RepoRoot is the root of the kmirror repository this package is in.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

const howToInstall = "the Python filter plugin needs python3 with its venv module and the pins of plugins/filters/python-groups/requirements.txt: run scripts/install-deps.sh (or scripts/pyfilter.sh venv)"

func build() (Plugin, error) {
	if _, err := exec.LookPath("python3"); err != nil {
		return Plugin{}, fmt.Errorf("python3 not found on PATH: %s", howToInstall)
	}
	cmd := exec.Command("scripts/pyfilter.sh", "venv")
	cmd.Dir = RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Plugin{}, fmt.Errorf("scripts/pyfilter.sh venv: %v: %s\n%s", err, strings.TrimSpace(stderr.String()), howToInstall)
	}
	path := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(path, '\n'); i >= 0 {
		path = path[i+1:]
	}
	if path == "" {
		return Plugin{}, errors.New("scripts/pyfilter.sh venv printed no launcher path")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Plugin{}, fmt.Errorf("read the Python plugin's launcher: %w", err)
	}
	sum := sha256.Sum256(b)
	return Plugin{Path: path, SHA256: hex.EncodeToString(sum[:])}, nil
}
